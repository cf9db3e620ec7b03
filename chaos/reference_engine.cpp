#include "chaos/reference_engine.hpp"

#include <algorithm>
#include <map>

#include "engine/engine.hpp"
#include "engine/tokenizer.hpp"

namespace tessera::chaos {

caf::expected<reference_engine> reference_engine::open(const reference_options& opts) {
  auto files = engine::load_model_files(opts.model_dir, opts.choice.kind);
  if (!files)
    return files.error();
  reference_engine out;
  out.opts_ = opts;
  out.opts_.choice.sim.time_scale = 0;
  out.vocab_ = std::min(static_cast<int32_t>(files->config.vocab_size), files->tokenizer->vocab_size());
  out.files_ = std::make_shared<const engine::model_files>(std::move(*files));
  return out;
}

caf::expected<std::vector<std::string>> reference_engine::texts(const std::vector<planned_request>& reqs) const {
  engine::backend_options bo;
  bo.choice = opts_.choice;
  bo.threads = opts_.threads;
  // Enough KV for one batch of these requests (4 bytes a value at most),
  // not a server's pool.
  size_t longest = 0;
  for (const auto& r : reqs)
    longest = std::max(longest, r.prompt.size() + static_cast<size_t>(r.max_tokens));
  const auto& c = files_->config;
  const size_t token_bytes = size_t{2} * 4 * static_cast<size_t>(c.num_hidden_layers) *
                             static_cast<size_t>(c.num_key_value_heads) * static_cast<size_t>(c.head_dim);
  if (opts_.choice.kind == engine::backend_kind::cpu)
    bo.kv_cache_bytes = std::max<size_t>(size_t{16} << 20, 2 * (longest + 64) * opts_.batch * token_bytes);
  auto be = engine::make_backend(*files_, bo);
  if (!be)
    return be.error();
  engine::engine_config ec;
  ec.max_model_len = opts_.max_model_len;
  engine::engine eng{std::move(*be), ec, files_->tokenizer};
  std::vector<std::string> out(reqs.size());
  for (size_t first = 0; first < reqs.size(); first += opts_.batch) {
    const size_t last = std::min(reqs.size(), first + opts_.batch);
    for (size_t i = first; i < last; ++i) {
      engine::request r;
      r.id = i + 1;
      r.prompt = reqs[i].prompt;
      r.params.max_tokens = reqs[i].max_tokens;
      r.params.temperature = reqs[i].temperature;
      r.params.seed = reqs[i].seed;
      r.params.ignore_eos = true;
      if (auto err = eng.add_request(r))
        return err;
    }
    while (eng.has_unfinished())
      for (const auto& o : eng.step()) {
        if (o.error)
          return o.error;
        out[o.id - 1] += o.text;
      }
  }
  return out;
}

} // namespace tessera::chaos
