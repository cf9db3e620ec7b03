// write_random_model: a random-weight Llama-family model in Hugging Face
// layout, for demos, tests and benchmarks.

#include <cmath>
#include <cstdio>
#include <fstream>
#include <numbers>
#include <set>
#include <system_error>

#include <nlohmann/json.hpp>
#include <xxhash.h>

#include "engine/engine_errc.hpp"
#include "engine/weight_layout.hpp"
#include "engine/weights.hpp"

namespace tessera::engine {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

/// splitmix64: tiny, fast, and good enough for initial weights.
class splitmix64 {
public:
  explicit splitmix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

private:
  uint64_t state_;
};

/// Writes N(0, std) samples as `T` via `store`, two per 64-bit draw
/// (Box-Muller in float: 24-bit uniforms, tails to ~5.8 sigma).
template <class T, class Store>
void fill_normal(splitmix64& rng, float std_dev, T* out, size_t n, Store store) {
  constexpr float two_pi = 2.0f * std::numbers::pi_v<float>;
  constexpr float inv24 = 1.0f / 16777216.0f;
  for (size_t i = 0; i < n; i += 2) {
    uint64_t r = rng.next();
    float u1 = static_cast<float>((r >> 40) + 1) * inv24; // (0, 1]
    float u2 = static_cast<float>((r >> 16) & 0xffffff) * inv24;
    float rad = std_dev * std::sqrt(-2.0f * std::log(u1));
    float theta = two_pi * u2;
    out[i] = store(rad * std::cos(theta));
    if (i + 1 < n)
      out[i + 1] = store(rad * std::sin(theta));
  }
}

/// Fills chunks of each tensor; the stream of a tensor restarts from a seed
/// derived from (seed, name) at its first chunk.
class random_filler {
public:
  random_filler(std::span<const weight_entry> layout, std::span<const tensor_spec> specs,
                const random_model_options& opts)
    : layout_(layout), specs_(specs), opts_(opts), rng_(0) {}

  void operator()(size_t index, size_t byte_offset, std::span<std::byte> out) {
    const auto& entry = layout_[index];
    const dtype t = specs_[index].type;
    const size_t n = out.size() / dtype_size(t);
    if (byte_offset == 0)
      rng_ = splitmix64{XXH3_64bits_withSeed(entry.name.data(), entry.name.size(), opts_.seed)};
    if (entry.role == weight_role::norm) {
      for (size_t i = 0; i < n; ++i)
        store_from_f32(out.data(), t, i, 1.0f);
      return;
    }
    switch (t) {
      case dtype::f32:
        fill_normal(rng_, opts_.init_std, reinterpret_cast<float*>(out.data()), n,
                    [](float v) { return v; });
        break;
      case dtype::bf16:
        fill_normal(rng_, opts_.init_std, reinterpret_cast<uint16_t*>(out.data()), n,
                    f32_to_bf16);
        break;
      case dtype::f16:
        fill_normal(rng_, opts_.init_std, reinterpret_cast<uint16_t*>(out.data()), n,
                    f32_to_f16);
        break;
      case dtype::i8: break; // KV only: never a weight
    }
  }

private:
  std::span<const weight_entry> layout_;
  std::span<const tensor_spec> specs_;
  const random_model_options& opts_;
  splitmix64 rng_;
};

caf::error write_text(const fs::path& path, const std::string& text) {
  auto tmp = path;
  tmp += ".tmp";
  {
    std::ofstream out{tmp, std::ios::binary | std::ios::trunc};
    out << text;
    out.flush();
    if (!out)
      return make_engine_error(engine_errc::io_error, tmp.string() + ": cannot write");
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec)
    return make_engine_error(engine_errc::io_error,
                             path.string() + ": cannot rename: " + ec.message());
  return {};
}

std::string shard_name(int i, int n) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05d-of-%05d.safetensors", i + 1, n);
  return buf;
}

/// Splits [0, sizes.size()) into `n` consecutive non-empty groups of about
/// equal bytes; returns the first index of each group.
std::vector<size_t> split_by_bytes(const std::vector<uint64_t>& sizes, int n) {
  uint64_t total = 0;
  for (auto s : sizes)
    total += s;
  std::vector<size_t> starts = {0};
  uint64_t done = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const size_t shard = starts.size() - 1;
    const size_t shards_left = static_cast<size_t>(n) - starts.size();
    const bool current_has_some = i > starts.back();
    const bool past_target = done >= total / static_cast<uint64_t>(n) * (shard + 1);
    if (shards_left > 0 && current_has_some &&
        (past_target || sizes.size() - i == shards_left))
      starts.push_back(i);
    done += sizes[i];
  }
  return starts;
}

/// Writes config.json and generation_config.json for `cfg`, checked through
/// the parser (so nothing absurd is ever allocated or written, and the
/// config.json written is one we can read back); returns the checked config.
caf::expected<model_config> write_config_files(const fs::path& dir, const model_config& cfg) {
  auto config_json = to_json(cfg);
  auto checked = parse_model_config(config_json.dump(), (dir / "config.json").string());
  if (!checked)
    return checked.error();
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    return make_engine_error(engine_errc::io_error,
                             dir.string() + ": cannot create folder: " + ec.message());
  if (auto err = write_text(dir / "config.json", config_json.dump(2) + "\n"))
    return err;
  json gen = {{"bos_token_id", cfg.bos_token_id ? json(*cfg.bos_token_id) : json(nullptr)},
              {"eos_token_id", cfg.eos_token_ids},
              {"do_sample", false}};
  if (auto err = write_text(dir / "generation_config.json", gen.dump(2) + "\n"))
    return err;
  return checked;
}

/// Removes model.safetensors, model.safetensors.index.json and the shards
/// it names, if present.
void remove_weight_files(const fs::path& dir) {
  std::error_code ec;
  fs::remove(dir / "model.safetensors", ec);
  auto index = dir / "model.safetensors.index.json";
  if (!fs::exists(index, ec))
    return;
  try {
    std::ifstream in{index};
    auto doc = json::parse(in);
    std::set<std::string> shards;
    for (auto& [name, file] : doc.at("weight_map").items())
      if (file.is_string())
        shards.insert(file.get<std::string>());
    for (const auto& f : shards)
      if (f.find('/') == std::string::npos && f != "." && f != "..")
        fs::remove(dir / f, ec);
  } catch (const json::exception&) {
    // A malformed index names nothing we may delete; the index goes anyway.
  }
  fs::remove(index, ec);
}

} // namespace

caf::error write_model_config(const fs::path& dir, const model_config& cfg) {
  if (auto checked = write_config_files(dir, cfg); !checked)
    return checked.error();
  remove_weight_files(dir);
  return {};
}

caf::error write_random_model(const fs::path& dir, const model_config& cfg,
                              const random_model_options& opts) {
  auto parsed = parse_model_config(to_json(cfg).dump(), (dir / "config.json").string());
  if (!parsed)
    return parsed.error();
  if (!std::isfinite(opts.init_std) || opts.init_std < 0.0f)
    return make_engine_error(engine_errc::bad_config,
                             dir.string() + ": init_std must be finite and non-negative");

  const auto layout = weight_layout(*parsed);
  if (opts.shards < 1 || static_cast<size_t>(opts.shards) > layout.size())
    return make_engine_error(engine_errc::bad_config,
                             dir.string() + ": shards must be between 1 and " +
                               std::to_string(layout.size()) + ", got " +
                               std::to_string(opts.shards));

  if (auto written = write_config_files(dir, cfg); !written)
    return written.error();
  std::error_code ec;

  std::vector<tensor_spec> specs;
  std::vector<uint64_t> sizes;
  for (const auto& e : layout) {
    specs.push_back({e.name, opts.weight_dtype, e.shape});
    uint64_t numel = 1;
    for (auto d : e.shape)
      numel *= static_cast<uint64_t>(d);
    sizes.push_back(numel * dtype_size(opts.weight_dtype));
  }
  const std::map<std::string, std::string> metadata = {{"format", "pt"}};
  random_filler filler{layout, specs, opts};

  auto single = dir / "model.safetensors";
  auto index_path = dir / "model.safetensors.index.json";
  if (opts.shards == 1) {
    fs::remove(index_path, ec); // a stale index would name other files
    return write_safetensors_streamed(single, specs, std::ref(filler), metadata);
  }

  fs::remove(single, ec); // the loader prefers model.safetensors
  auto starts = split_by_bytes(sizes, opts.shards);
  starts.push_back(specs.size());
  json weight_map = json::object();
  uint64_t total = 0;
  for (size_t s = 0; s + 1 < starts.size(); ++s) {
    const size_t first = starts[s];
    auto name = shard_name(static_cast<int>(s), opts.shards);
    auto part = std::span{specs}.subspan(first, starts[s + 1] - first);
    auto err = write_safetensors_streamed(
      dir / name, part,
      [&](size_t i, size_t offset, std::span<std::byte> out) { filler(first + i, offset, out); },
      metadata);
    if (err)
      return err;
    for (size_t i = first; i < starts[s + 1]; ++i) {
      weight_map[specs[i].name] = name;
      total += sizes[i];
    }
  }
  json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  return write_text(index_path, index.dump(2) + "\n");
}

} // namespace tessera::engine
