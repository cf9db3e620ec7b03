#include "engine/sim/sim_backend.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <thread>

#include <nlohmann/json.hpp>
#include <sys/mman.h>

#include "common/assert.hpp"
#include "engine/block_hash.hpp"
#include "engine/engine_errc.hpp"

namespace tessera::engine::sim {

namespace {

caf::error bad(std::string what) {
  return make_engine_error(engine_errc::bad_request, std::move(what));
}

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// d[p] from d[p-1]: what the sim "computes" for a token.
uint64_t chain(uint64_t prev, int32_t token, int32_t pos) {
  return splitmix64(prev ^ splitmix64((static_cast<uint64_t>(static_cast<uint32_t>(token)) << 32) |
                                      static_cast<uint32_t>(pos)));
}

constexpr size_t digest_bytes = sizeof(uint64_t);
constexpr float chosen_logit = 0.0f;
constexpr float fallback_logit = -1e4f;
constexpr float other_logit = -1e9f;

std::string fixed(double v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

} // namespace

caf::error validate(const sim_settings& s) {
  if (!find_gpu(s.gpu)) {
    std::string names;
    for (const auto& n : gpu_names())
      names += (names.empty() ? "" : ", ") + n;
    return bad("unknown sim GPU '" + s.gpu + "' (known: " + names + ")");
  }
  if (!std::isfinite(s.time_scale) || s.time_scale < 0 || s.time_scale > 1e6)
    return bad("sim time_scale must be in [0, 1e6], got " + fixed(s.time_scale, 3));
  if (s.payload_scale < 1)
    return bad("sim payload_scale must be at least 1, got " + std::to_string(s.payload_scale));
  if (s.tensor_parallel < 1 || s.tensor_parallel > 1024)
    return bad("sim tensor_parallel must be in [1, 1024], got " +
               std::to_string(s.tensor_parallel));
  auto fraction = [](const char* name, std::optional<double> v) -> caf::error {
    if (v && (!std::isfinite(*v) || *v <= 0 || *v > 1))
      return bad(std::string{"sim "} + name + " must be in (0, 1], got " + fixed(*v, 3));
    return {};
  };
  if (auto err = fraction("memory_efficiency", s.memory_efficiency))
    return err;
  if (auto err = fraction("compute_efficiency", s.compute_efficiency))
    return err;
  if (auto err = fraction("gpu_memory_utilization", s.gpu_memory_utilization))
    return err;
  if (s.step_overhead_s && (!std::isfinite(*s.step_overhead_s) || *s.step_overhead_s < 0 ||
                            *s.step_overhead_s > 10))
    return bad("sim step_overhead_s must be in [0, 10], got " + fixed(*s.step_overhead_s, 6));
  if (!std::isfinite(s.eos_probability) || s.eos_probability < 0 || s.eos_probability > 1)
    return bad("sim eos_probability must be in [0, 1], got " + fixed(s.eos_probability, 3));
  return {};
}

caf::expected<kv_layout> scaled_layout(const model_config& cfg, int32_t block_tokens,
                                       dtype kv_dtype, int32_t payload_scale) {
  if (block_tokens <= 0 || block_tokens > 1024)
    return bad("block_tokens must be in [1, 1024], got " + std::to_string(block_tokens));
  if (payload_scale < 1)
    return bad("sim payload_scale must be at least 1, got " + std::to_string(payload_scale));
  const int64_t units =
    int64_t{cfg.num_hidden_layers} * cfg.num_key_value_heads * cfg.head_dim;
  kv_layout l;
  l.block_tokens = block_tokens;
  l.kv_dtype = kv_dtype;
  if (units % payload_scale != 0)
    return bad("sim payload_scale " + std::to_string(payload_scale) +
               " must divide layers * kv_heads * head_dim = " + std::to_string(units) +
               " (e.g. a power of two up to its largest power-of-two factor)");
  // Layers first, then heads, then head_dim, each by what it shares with
  // the rest of the scale; the rest always divides head_dim once the scale
  // divides the product (prime by prime).
  int64_t rest = payload_scale;
  const int64_t g1 = std::gcd(static_cast<int64_t>(cfg.num_hidden_layers), rest);
  l.num_layers = static_cast<int32_t>(cfg.num_hidden_layers / g1);
  rest /= g1;
  const int64_t g2 = std::gcd(static_cast<int64_t>(cfg.num_key_value_heads), rest);
  l.num_kv_heads = static_cast<int32_t>(cfg.num_key_value_heads / g2);
  rest /= g2;
  TESSERA_ASSERT(cfg.head_dim % rest == 0);
  l.head_dim = static_cast<int32_t>(cfg.head_dim / rest);
  if (l.block_bytes() < digest_bytes * static_cast<size_t>(block_tokens))
    return bad("sim payload_scale " + std::to_string(payload_scale) + " leaves " +
               std::to_string(l.block_bytes() / static_cast<size_t>(block_tokens)) +
               " bytes per token in a KV block; the sim needs 8 (use a smaller scale)");
  return l;
}

sim_backend::sim_backend(const model_config& cfg, sim_backend_options opts, kv_layout layout,
                         int32_t num_blocks, cost_model costs)
  : cfg_(cfg), opts_(std::move(opts)), layout_(layout), num_blocks_(num_blocks),
    costs_(std::move(costs)) {
  pool_bytes_ = static_cast<size_t>(num_blocks_) * layout_.block_bytes();
  // Anonymous, zero until touched, and not reserved: a pool sized for a
  // GPU costs host memory only for the blocks the run writes.
  void* p = ::mmap(nullptr, pool_bytes_, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  TESSERA_ASSERT(p != MAP_FAILED, "cannot map the sim KV pool");
  pool_ = static_cast<std::byte*>(p);
  const std::string text = "sim:" + to_json(cfg_).dump() +
                           ":payload_scale=" + std::to_string(opts_.settings.payload_scale);
  fingerprint_ = hash_bytes(text.data(), text.size());
  if (opts_.emit_ids.empty()) {
    auto special = [&](int32_t id) {
      return (cfg_.bos_token_id && *cfg_.bos_token_id == id) ||
             std::find(cfg_.eos_token_ids.begin(), cfg_.eos_token_ids.end(), id) !=
               cfg_.eos_token_ids.end();
    };
    for (int32_t id = 0; id < cfg_.vocab_size; ++id)
      if (!special(id))
        opts_.emit_ids.push_back(id);
    if (opts_.emit_ids.empty())
      opts_.emit_ids.push_back(0); // a vocabulary of only BOS/EOS
  }
  if (!cfg_.eos_token_ids.empty())
    eos_id_ = cfg_.eos_token_ids.front();
  // Rows cover the ids the sim can emit (two entries of a row are used).
  logits_vocab_ = 1 + *std::max_element(opts_.emit_ids.begin(), opts_.emit_ids.end());
  if (opts_.settings.eos_probability > 0 && eos_id_)
    logits_vocab_ = std::max(logits_vocab_, *eos_id_ + 1);
  if (!opts_.sleep_until)
    opts_.sleep_until = [](std::chrono::steady_clock::time_point t) {
      std::this_thread::sleep_until(t);
    };
}

sim_backend::~sim_backend() {
  ::munmap(pool_, pool_bytes_);
}

std::string sim_backend::description() const {
  const auto& cal = costs_.calibration();
  std::string d = "sim " + costs_.gpu().name;
  if (costs_.tensor_parallel() > 1)
    d += " x" + std::to_string(costs_.tensor_parallel());
  d += " (roofline, efficiency " + fixed(cal.memory_efficiency, 2) + " memory / " +
       fixed(cal.compute_efficiency, 2) + " compute, time x" +
       fixed(opts_.settings.time_scale, 3) + ", KV payload 1/" +
       std::to_string(opts_.settings.payload_scale) + ")";
  return d;
}

size_t sim_backend::modelled_block_bytes() const {
  return layout_.block_bytes() * static_cast<size_t>(opts_.settings.payload_scale);
}

std::byte* sim_backend::digest_slot(kv_block_id block, int32_t slot) const {
  TESSERA_ASSERT(block >= 0 && block < num_blocks_);
  return pool_ + static_cast<size_t>(block) * layout_.block_bytes() +
         static_cast<size_t>(slot) * digest_bytes;
}

void sim_backend::write_logits(uint64_t digest, float* row) const {
  const auto& ids = opts_.emit_ids;
  const uint64_t h = splitmix64(digest ^ 0x51ed0f5ca1ab1e5ull);
  const size_t n = ids.size();
  const size_t first = static_cast<size_t>(h % n);
  size_t second = static_cast<size_t>((h >> 32) % n);
  if (second == first)
    second = (first + 1) % n;
  int32_t chosen = ids[first];
  int32_t fallback = ids[second];
  const double p = opts_.settings.eos_probability;
  if (p > 0 && eos_id_) {
    const double u = static_cast<double>(splitmix64(digest + 1) >> 11) * 0x1.0p-53;
    if (u < p) {
      fallback = chosen;
      chosen = *eos_id_;
    }
  }
  std::fill_n(row, logits_vocab_, other_logit);
  row[fallback] = fallback_logit;
  row[chosen] = chosen_logit;
}

void sim_backend::forward(std::span<const forward_seq> seqs, float* logits) {
  const auto started = std::chrono::steady_clock::now();
  const int32_t bt = layout_.block_tokens;
  shapes_.clear();
  size_t row = 0;
  for (const auto& f : seqs) {
    TESSERA_ASSERT(f.logits_rows >= 0 && static_cast<size_t>(f.logits_rows) <= f.tokens.size(),
                   "logits rows within the sequence's tokens");
    shapes_.push_back({static_cast<int64_t>(f.tokens.size()), f.start_pos, f.logits_rows > 0});
    if (f.tokens.empty())
      continue;
    uint64_t d = fingerprint_;
    if (f.start_pos > 0) {
      const int32_t prev = f.start_pos - 1;
      std::memcpy(&d, digest_slot(f.block_table[prev / bt], prev % bt), digest_bytes);
    }
    for (size_t i = 0; i < f.tokens.size(); ++i) {
      const int32_t pos = f.start_pos + static_cast<int32_t>(i);
      d = chain(d, f.tokens[i], pos);
      std::memcpy(digest_slot(f.block_table[pos / bt], pos % bt), &d, digest_bytes);
      if (i + static_cast<size_t>(f.logits_rows) >= f.tokens.size())
        write_logits(d, logits + row++ * static_cast<size_t>(logits_vocab_));
    }
  }
  last_ = costs_.step(shapes_);
  if (last_.tokens == 0)
    return; // the loads wait for the next real step
  last_.load_s = pending_load_s_;
  last_.seconds += pending_load_s_;
  totals_.load_s += pending_load_s_;
  pending_load_s_ = 0;
  ++totals_.steps;
  totals_.tokens += static_cast<uint64_t>(last_.tokens);
  totals_.modelled_s += last_.seconds;
  if (last_.compute_bound)
    totals_.compute_bound_s += last_.seconds;
  const double scale = opts_.settings.time_scale;
  if (scale > 0)
    opts_.sleep_until(started + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                  std::chrono::duration<double>(last_.seconds * scale)));
}

double sim_backend::emulated_wall_seconds() const {
  return opts_.settings.time_scale > 0 ? totals_.modelled_s * opts_.settings.time_scale : 0.0;
}

std::optional<double> sim_backend::prefill_wall_seconds(int64_t tokens, int64_t start_pos) const {
  if (opts_.settings.time_scale <= 0 || tokens <= 0)
    return std::nullopt;
  const seq_shape shape{tokens, start_pos, true};
  return costs_.step({&shape, 1}).seconds * opts_.settings.time_scale;
}

std::optional<double> sim_backend::load_wall_seconds(uint64_t bytes) const {
  if (opts_.settings.time_scale <= 0)
    return std::nullopt;
  return load_seconds(bytes) * opts_.settings.time_scale;
}

void sim_backend::copy_block(kv_block_id src, kv_block_id dst) {
  const size_t bb = layout_.block_bytes();
  std::memcpy(pool_ + static_cast<size_t>(dst) * bb, pool_ + static_cast<size_t>(src) * bb, bb);
}

void sim_backend::read_block(kv_block_id id, std::span<std::byte> out) const {
  const size_t bb = layout_.block_bytes();
  TESSERA_ASSERT(out.size() == bb);
  std::memcpy(out.data(), pool_ + static_cast<size_t>(id) * bb, bb);
}

void sim_backend::write_block(kv_block_id id, std::span<const std::byte> in) {
  const size_t bb = layout_.block_bytes();
  TESSERA_ASSERT(in.size() == bb);
  std::memcpy(pool_ + static_cast<size_t>(id) * bb, in.data(), bb);
  ++totals_.loaded_blocks;
  pending_load_s_ += load_seconds(bb);
}

double sim_backend::load_seconds(uint64_t host_bytes) const {
  const auto& gpu = costs_.gpu();
  const auto& cal = costs_.calibration();
  const double modelled = static_cast<double>(host_bytes) * opts_.settings.payload_scale;
  return modelled / (gpu.host_link_bytes_s * cal.host_link_efficiency * costs_.tensor_parallel());
}

caf::expected<std::unique_ptr<backend>> make_sim_backend(const model_config& cfg,
                                                         sim_backend_options opts) {
  const auto& s = opts.settings;
  if (auto err = validate(s))
    return err;
  auto layout = scaled_layout(cfg, opts.block_tokens, opts.kv_dtype, s.payload_scale);
  if (!layout)
    return layout.error();
  for (auto id : opts.emit_ids)
    if (id < 0 || id >= cfg.vocab_size)
      return bad("sim emit id " + std::to_string(id) + " is outside the vocabulary [0, " +
                 std::to_string(cfg.vocab_size) + ")");
  auto gpu = *find_gpu(s.gpu);
  auto cal = default_calibration(s.gpu);
  if (s.memory_efficiency)
    cal.memory_efficiency = *s.memory_efficiency;
  if (s.compute_efficiency)
    cal.compute_efficiency = *s.compute_efficiency;
  if (s.step_overhead_s)
    cal.step_overhead_s = *s.step_overhead_s;
  if (s.memory_efficiency || s.compute_efficiency || s.step_overhead_s)
    cal.source += ", overridden";
  cost_model costs{cfg, gpu, cal, opts.kv_dtype, s.tensor_parallel};

  const double real_block = static_cast<double>(layout->block_bytes()) * s.payload_scale;
  int64_t blocks = opts.num_blocks;
  if (blocks <= 0) {
    double capacity = static_cast<double>(opts.kv_cache_bytes);
    if (capacity == 0) {
      const double usable = gpu.memory_bytes * s.tensor_parallel * s.gpu_memory_utilization;
      capacity = usable - costs.weight_bytes();
      if (capacity <= 0)
        return bad("the model's weights (" + fixed(costs.weight_bytes() / 1e9, 1) +
                   " GB) do not fit in " + std::to_string(s.tensor_parallel) + " x " + gpu.name +
                   " (" + fixed(usable / 1e9, 1) +
                   " GB usable); raise the sim tensor_parallel or give a KV cache size");
    }
    blocks = static_cast<int64_t>(capacity / real_block);
  }
  if (blocks <= 0)
    return bad("the sim KV cache of " + std::to_string(opts.kv_cache_bytes) +
               " bytes holds no block of " + fixed(real_block, 0) + " bytes");
  if (blocks > (int64_t{1} << 30))
    return bad("too many KV blocks: " + std::to_string(blocks));
  return std::unique_ptr<backend>(new sim_backend(cfg, std::move(opts), *layout,
                                                  static_cast<int32_t>(blocks), std::move(costs)));
}

const sim_backend* as_sim_backend(const backend& be) {
  return dynamic_cast<const sim_backend*>(&be);
}

} // namespace tessera::engine::sim
