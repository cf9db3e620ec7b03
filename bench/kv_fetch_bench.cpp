// kv_fetch_bench: what reading a prompt's cached prefix out of the kv store
// costs as the prefix grows (issue 14: "a prefix fetch whose cost grows
// gently with the prefix"). The read a kv store's reader does for a fetch
// (block_store::get_prefix on a tiered_block_store), in one pass (host
// tier under one lock, disk with one RocksDB MultiGet) against block by
// block (get() per block, the path it replaced).
//
//   kv_fetch_bench [--dir DIR] [--json FILE] [--reps N] [--prefixes 16,256,2560]
//                  [--models llama3-8b,small] [--cold-cpu-cache] [--heap-default]
//
// Payload per block: llama3-8b as the sim engine holds it at
// --sim-payload-scale 1024 (2 KiB), and the `small` model's real blocks
// (192 KiB); 16-token bf16 blocks. Placements of the prefix: host (every
// block in host memory), disk (every block on disk only: host memory lacks
// them), mixed (the first half on disk, the second in host memory). Before
// each timed read the placement is set up again (the read promotes disk
// blocks), so every rep reads the same thing; the disk's files are warm in
// the page cache, as a store's recently spilled blocks are. So are the
// CPU's caches, with what the previous rep read: a 16-block prefix is read
// from L1/L2, 2,560 blocks are not. --cold-cpu-cache writes a 64 MiB buffer
// before each timed read, so every length starts from cold CPU caches (a
// server's next fetch reads other blocks; but RocksDB's index and filters
// are then cold too, which a busy store's are not). The process keeps
// freed memory as a node hosting a store does (kvstore/heap_retention.hpp);
// --heap-default leaves glibc's defaults (freed blocks go back to the
// kernel and are faulted in again). Prints a table (median and min of the
// reps) and writes JSON.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "engine/model_config.hpp"
#include "engine/sim/sim_backend.hpp"
#include "kvstore/heap_retention.hpp"
#include "kvstore/tiered_block_store.hpp"

namespace {

using namespace tessera;
using clock_type = std::chrono::steady_clock;

struct options {
  std::filesystem::path dir = std::filesystem::temp_directory_path() / "tessera-kv-fetch-bench";
  std::string json_path;
  int reps = 5;
  std::vector<size_t> prefixes{16, 256, 2560};
  std::vector<std::string> models{"llama3-8b", "small"};
  bool cold_cpu_cache = false;
  bool heap_default = false;
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in{s};
  for (std::string part; std::getline(in, part, ',');)
    if (!part.empty())
      out.push_back(part);
  return out;
}

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "kv_fetch_bench: %s\nusage: kv_fetch_bench [--dir DIR] [--json FILE] [--reps N] "
               "[--prefixes 16,256,2560] [--models llama3-8b,small] [--cold-cpu-cache] [--heap-default]\n",
               why.c_str());
  std::exit(2);
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        usage(a + " needs a value");
      return argv[++i];
    };
    try {
      if (a == "--dir") {
        o.dir = value();
      } else if (a == "--json") {
        o.json_path = value();
      } else if (a == "--reps") {
        o.reps = std::stoi(value());
        if (o.reps < 1 || o.reps > 1000)
          usage("--reps must be in [1, 1000]");
      } else if (a == "--prefixes") {
        o.prefixes.clear();
        for (const auto& p : split(value())) {
          const long long n = std::stoll(p);
          if (n < 1 || n > 100000)
            usage("each of --prefixes must be in [1, 100000], not " + p);
          o.prefixes.push_back(static_cast<size_t>(n));
        }
        if (o.prefixes.empty())
          usage("--prefixes is empty");
      } else if (a == "--cold-cpu-cache") {
        o.cold_cpu_cache = true;
      } else if (a == "--heap-default") {
        o.heap_default = true;
      } else if (a == "--models") {
        o.models = split(value());
        if (o.models.empty())
          usage("--models is empty");
      } else {
        usage("unknown argument " + a);
      }
    } catch (const std::logic_error&) {
      usage("bad number for " + a);
    }
  }
  return o;
}

/// The block layout of `model`: llama3-8b scaled as the sim holds it at
/// payload scale 1024; any other shape at its real size.
engine::kv_layout layout_of(const std::string& model) {
  auto cfg = engine::model_shape(model);
  if (!cfg)
    usage("unknown model " + model);
  const int32_t scale = model.starts_with("llama3") ? 1024 : 1;
  auto l = engine::sim::scaled_layout(*cfg, 16, engine::dtype::bf16, scale);
  if (!l)
    usage("no layout for " + model + ": " + error_text(l.error()));
  return *l;
}

/// Random bytes for block `i` of a chain (KV is incompressible noise).
kvstore::stored_block block_of(const engine::kv_layout& l, uint64_t i) {
  std::vector<std::byte> bytes(l.block_bytes());
  std::mt19937_64 rng{i * 0x9E3779B97F4A7C15ull + 1};
  for (size_t k = 0; k < bytes.size(); k += 8) {
    const uint64_t x = rng();
    for (size_t b = 0; b < 8 && k + b < bytes.size(); ++b)
      bytes[k + b] = static_cast<std::byte>(x >> (8 * b));
  }
  return kvstore::make_block(l, l.block_tokens, std::move(bytes));
}

constexpr uint64_t bench_ns = 0xfe7c4ull;

std::unique_ptr<kvstore::tiered_block_store> open_store(const std::filesystem::path& dir, size_t host_bytes,
                                                        uint64_t disk_bytes) {
  kvstore::tiered_store_options o;
  o.host_capacity_bytes = host_bytes;
  o.disk = kvstore::rocksdb_tier_options{};
  o.disk->dir = dir;
  o.disk->capacity_bytes = disk_bytes;
  o.spill_wait = std::chrono::minutes{1}; // filling: every block must reach the disk
  auto s = kvstore::tiered_block_store::open(o);
  if (!s) {
    std::fprintf(stderr, "kv_fetch_bench: %s\n", error_text(s.error()).c_str());
    std::exit(1);
  }
  if ((*s)->disk_report().result != kvstore::disk_open_report::outcome::opened) {
    std::fprintf(stderr, "kv_fetch_bench: the disk tier under %s did not open\n", dir.string().c_str());
    std::exit(1);
  }
  return std::move(*s);
}

struct row {
  std::string model;
  size_t block_bytes = 0;
  std::string placement;
  size_t blocks = 0;
  std::string path;
  double median_ms = 0;
  double min_ms = 0;
  double us_per_block = 0;
  double mb_per_s = 0;
};

/// Writes a buffer larger than the CPU's last-level cache, so what the
/// previous rep read is no longer there.
void evict_cpu_caches() {
  static std::vector<uint64_t> sweep((size_t{64} << 20) / sizeof(uint64_t));
  for (size_t i = 0; i < sweep.size(); i += 8) // one write per 64-byte line
    sweep[i] += i;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// Every block of the prefixes on disk (spilled through a host tier of one
/// block), then a store over that disk with host memory for all of them.
/// Unless `heap_default`, the heap keeps freed memory as a node's does for
/// its store (actors/node/node_parts.cpp, open_kv_store).
std::unique_ptr<kvstore::tiered_block_store> fill(const std::filesystem::path& dir, const engine::kv_layout& l,
                                                  size_t blocks, bool heap_default, nlohmann::json& heap) {
  std::filesystem::remove_all(dir);
  const uint64_t disk_bytes = (blocks + 16) * kvstore::rocksdb_tier::charge(block_of(l, 0)) + (uint64_t{1} << 20);
  const size_t host_bytes = (blocks + 16) * kvstore::host_tier::charge(block_of(l, 0));
  if (!heap_default) {
    const auto r = kvstore::retain_freed_heap(host_bytes + kvstore::tiered_store_options{}.spill_queue_bytes);
    heap = {{"retained", r.applied}, {"trim_threshold_bytes", r.trim_threshold_bytes},
            {"mmap_threshold_bytes", r.mmap_threshold_bytes}};
  }
  {
    auto s = open_store(dir, kvstore::host_tier::charge(block_of(l, 0)), disk_bytes);
    for (uint64_t i = 0; i < blocks + 1; ++i)
      if (auto err = s->put({bench_ns, engine::kv_block_hash{i + 1, ~i}}, block_of(l, i))) {
        std::fprintf(stderr, "kv_fetch_bench: put: %s\n", error_text(err).c_str());
        std::exit(1);
      }
    if (!s->wait_spilled(std::chrono::minutes{5}) || s->stats().spill_drops > 0 || s->stats().spill_failures > 0) {
      std::fprintf(stderr, "kv_fetch_bench: the disk tier did not take every block\n");
      std::exit(1);
    }
  }
  return open_store(dir, host_bytes, disk_bytes);
}

} // namespace

int main(int argc, char** argv) {
  const auto opts = parse(argc, argv);
  const size_t most = *std::max_element(opts.prefixes.begin(), opts.prefixes.end());
  std::vector<row> rows;
  nlohmann::json heap = {{"retained", false}};
  for (const auto& model : opts.models) {
    const auto l = layout_of(model);
    auto store = fill(opts.dir / model, l, most, opts.heap_default, heap);
    std::vector<engine::kv_block_hash> chain;
    for (uint64_t i = 0; i < most; ++i)
      chain.push_back(engine::kv_block_hash{i + 1, ~i});
    for (const char* placement : {"host", "disk", "mixed"}) {
      for (size_t n : opts.prefixes) {
        const std::span<const engine::kv_block_hash> prefix{chain.data(), n};
        // On disk from `first_host` on is what host memory lacks.
        const size_t on_disk = std::string{placement} == "host" ? 0 : std::string{placement} == "disk" ? n : n / 2;
        auto place = [&] {
          for (size_t i = 0; i < n; ++i) {
            const kvstore::block_key k{bench_ns, chain[i]};
            if (i < on_disk)
              store->host().erase(k);
            else if (!store->host().contains(k))
              (void)store->put(k, block_of(l, i));
          }
        };
        for (const char* path : {"block_by_block", "one_pass"}) {
          const bool batched = std::string{path} == "one_pass";
          std::vector<double> ms;
          for (int rep = 0; rep < opts.reps + 1; ++rep) { // the first warms up
            place();
            if (opts.cold_cpu_cache)
              evict_cpu_caches();
            const auto t0 = clock_type::now();
            auto got = batched ? store->get_prefix(bench_ns, prefix)
                               : store->kvstore::block_store::get_prefix(bench_ns, prefix);
            const double took = std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
            if (got.hits.size() != n) {
              std::fprintf(stderr, "kv_fetch_bench: %s %s %zu: read %zu blocks\n", model.c_str(), placement, n,
                           got.hits.size());
              return 1;
            }
            if (rep > 0)
              ms.push_back(took);
          }
          row r;
          r.model = model;
          r.block_bytes = l.block_bytes();
          r.placement = placement;
          r.blocks = n;
          r.path = path;
          r.median_ms = median(ms);
          r.min_ms = *std::min_element(ms.begin(), ms.end());
          r.us_per_block = 1000.0 * r.median_ms / static_cast<double>(n);
          r.mb_per_s = static_cast<double>(n * l.block_bytes()) / (r.median_ms / 1000.0) / 1e6;
          rows.push_back(r);
        }
      }
    }
    store.reset();
    std::filesystem::remove_all(opts.dir / model);
  }

  if (heap.value("retained", false))
    std::printf("heap: freed memory kept (trim threshold %.0f MiB, as a store's node sets it)\n\n",
                heap["trim_threshold_bytes"].get<double>() / (1 << 20));
  else
    std::printf("heap: glibc's defaults (--heap-default or not glibc)\n\n");
  std::printf("| model (block) | placement | blocks | path | median ms | min ms | us/block | MB/s |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (const auto& r : rows)
    std::printf("| %s (%zu B) | %s | %zu | %s | %.3f | %.3f | %.2f | %.0f |\n", r.model.c_str(), r.block_bytes,
                r.placement.c_str(), r.blocks, r.path.c_str(), r.median_ms, r.min_ms, r.us_per_block, r.mb_per_s);
  // The claim: per-block cost at the longest prefix <= at the shortest.
  nlohmann::json gentle = nlohmann::json::array();
  std::printf("\nper-block cost, longest prefix / shortest, of the medians and of the mins (<= 1.5: grows gently):\n");
  const size_t least = *std::min_element(opts.prefixes.begin(), opts.prefixes.end());
  for (const auto& a : rows) {
    if (a.blocks != most || most == least)
      continue;
    for (const auto& b : rows)
      if (b.blocks == least && b.model == a.model && b.placement == a.placement && b.path == a.path) {
        const double ratio = a.us_per_block / b.us_per_block;
        const double min_ratio = (a.min_ms / static_cast<double>(a.blocks)) / (b.min_ms / static_cast<double>(b.blocks));
        std::printf("  %-10s %-6s %-15s %.2f  %.2f\n", a.model.c_str(), a.placement.c_str(), a.path.c_str(), ratio,
                    min_ratio);
        gentle.push_back({{"model", a.model},
                          {"placement", a.placement},
                          {"path", a.path},
                          {"ratio", ratio},
                          {"min_ratio", min_ratio}});
      }
  }
  if (!opts.json_path.empty()) {
    nlohmann::json out;
    out["bench"] = "kv_fetch";
    out["reps"] = opts.reps;
    out["cold_cpu_cache"] = opts.cold_cpu_cache;
    out["heap"] = heap;
    out["rows"] = nlohmann::json::array();
    for (const auto& r : rows)
      out["rows"].push_back({{"model", r.model},
                             {"block_bytes", r.block_bytes},
                             {"placement", r.placement},
                             {"blocks", r.blocks},
                             {"path", r.path},
                             {"median_ms", r.median_ms},
                             {"min_ms", r.min_ms},
                             {"us_per_block", r.us_per_block},
                             {"mb_per_s", r.mb_per_s}});
    out["per_block_ratio_longest_to_shortest"] = gentle;
    std::ofstream f{opts.json_path};
    f << out.dump(2) << "\n";
    if (!f) {
      std::fprintf(stderr, "kv_fetch_bench: cannot write %s\n", opts.json_path.c_str());
      return 1;
    }
  }
  return 0;
}
