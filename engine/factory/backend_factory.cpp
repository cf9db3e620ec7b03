#include "engine/factory/backend_factory.hpp"

#include <algorithm>

#include "engine/cpu/cpu_backend.hpp"
#include "engine/engine_errc.hpp"
#include "engine/tokenizer.hpp"
#include "engine/weights.hpp"

namespace tessera::engine {

namespace {

namespace fs = std::filesystem;

/// cpu's KV pool when none is given (`tessera serve`'s long-standing default).
constexpr size_t default_cpu_kv_cache_bytes = size_t{256} << 20;

/// Fewer readable ids than this and the sim emits any non-special id.
constexpr size_t min_readable_ids = 16;
/// The sim emits the lowest this many readable ids: its text is noise
/// anyway, and its logits rows then end there (backend::logits_vocab), not
/// at a 128k vocabulary.
constexpr size_t max_emit_ids = 4096;

bool printable(const std::string& bytes) {
  return !bytes.empty() && std::all_of(bytes.begin(), bytes.end(), [](char c) {
    return c >= 0x20 && c <= 0x7e;
  });
}

} // namespace

std::string_view to_string(backend_kind k) {
  return k == backend_kind::sim ? "sim" : "cpu";
}

std::optional<backend_kind> parse_backend_kind(std::string_view name) {
  if (name == "cpu")
    return backend_kind::cpu;
  if (name == "sim")
    return backend_kind::sim;
  return std::nullopt;
}

caf::expected<model_files> load_model_files(const fs::path& dir, backend_kind kind) {
  model_files m;
  if (kind == backend_kind::cpu) {
    std::error_code ec;
    if (fs::exists(dir / "config.json", ec) && !fs::exists(dir / "model.safetensors", ec) &&
        !fs::exists(dir / "model.safetensors.index.json", ec))
      return make_engine_error(
        engine_errc::io_error,
        dir.string() + ": no weights (neither model.safetensors nor model.safetensors.index.json "
                       "is there); a folder with only config.json and a tokenizer serves with "
                       "--engine sim");
    auto w = load_model_weights(dir);
    if (!w)
      return w.error();
    m.config = (*w)->config;
    m.weights = std::move(*w);
  } else {
    auto cfg = load_model_config(dir);
    if (!cfg)
      return cfg.error();
    m.config = std::move(*cfg);
  }
  auto tok = load_tokenizer(dir, m.config);
  if (!tok)
    return tok.error();
  m.tokenizer = std::move(*tok);
  return m;
}

std::vector<int32_t> sim_emit_ids(const tokenizer& tok, const model_config& cfg) {
  const int32_t limit = std::min(tok.vocab_size(), cfg.vocab_size);
  std::vector<int32_t> stop = cfg.eos_token_ids;
  stop.insert(stop.end(), tok.settings().eos_ids.begin(), tok.settings().eos_ids.end());
  if (cfg.bos_token_id)
    stop.push_back(*cfg.bos_token_id);
  if (tok.settings().bos_id)
    stop.push_back(*tok.settings().bos_id);
  auto usable = [&](int32_t id) {
    return !tok.is_special(id) && std::find(stop.begin(), stop.end(), id) == stop.end();
  };
  std::vector<int32_t> readable, any;
  for (int32_t id = 0; id < limit && readable.size() < max_emit_ids; ++id) {
    if (!usable(id))
      continue;
    if (any.size() < max_emit_ids)
      any.push_back(id);
    if (printable(tok.token_bytes(id)))
      readable.push_back(id);
  }
  return readable.size() >= min_readable_ids ? readable : any;
}

caf::expected<std::unique_ptr<backend>> make_backend(const model_files& files,
                                                     const backend_options& opts) {
  if (opts.choice.kind == backend_kind::cpu) {
    if (!files.weights)
      return make_engine_error(engine_errc::bad_request,
                               "the cpu engine needs the model's weights; this model was loaded "
                               "without them");
    cpu::cpu_backend_options bo;
    bo.threads = opts.threads;
    bo.block_tokens = opts.block_tokens;
    bo.kv_dtype = opts.kv_dtype;
    bo.kv_cache_bytes = opts.kv_cache_bytes > 0 ? opts.kv_cache_bytes : default_cpu_kv_cache_bytes;
    return cpu::make_cpu_backend(files.weights, bo);
  }
  sim::sim_backend_options so;
  so.settings = opts.choice.sim;
  so.block_tokens = opts.block_tokens;
  so.kv_dtype = opts.kv_dtype;
  so.kv_cache_bytes = opts.kv_cache_bytes;
  if (files.tokenizer)
    so.emit_ids = sim_emit_ids(*files.tokenizer, files.config);
  return sim::make_sim_backend(files.config, std::move(so));
}

} // namespace tessera::engine
