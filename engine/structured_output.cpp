#include "engine/structured_output.hpp"

#include <algorithm>
#include <limits>

#include "engine/engine_errc.hpp"
#include "engine/grammar/json_schema.hpp"
#include "engine/tokenizer.hpp"

namespace tessera::engine {

namespace {

/// Compiled grammars kept (each a few hundred KB at most).
constexpr size_t grammar_cache_entries = 64;

/// Masks kept by the masker's two caches (each vocab / 8 bytes: 4 MiB
/// per cache at a 32k vocabulary, 16 MiB at 128k). All requests' grammars
/// share them, and a bounded string (maxLength) is one grammar node per
/// position, so the masker's default of 256 thrashed (its node cache is
/// cleared whole when full).
constexpr size_t masker_cache_entries = 1024;

caf::error bad(std::string what) {
  return make_engine_error(engine_errc::bad_request, std::move(what));
}

} // namespace

structured_output::structured_output(std::shared_ptr<const tokenizer> tok,
                                     std::vector<int32_t> eos_ids)
  : tok_(std::move(tok)), eos_ids_(std::move(eos_ids)) {}

structured_output::~structured_output() = default;

caf::expected<std::shared_ptr<const grammar::grammar>>
structured_output::grammar_for(const structured_output_params& p) {
  using kind = structured_output_params::kind_type;
  std::string key(1, static_cast<char>(p.kind));
  key += p.schema;
  if (auto it = grammars_.find(key); it != grammars_.end()) {
    ++compile_hits_;
    lru_.splice(lru_.begin(), lru_, it->second.second);
    return it->second.first;
  }
  grammar::json_grammar_options opts;
  opts.limits.max_nodes = structured_output_max_grammar_nodes;
  grammar::json_grammar_result r;
  if (p.kind == kind::json_object)
    r = grammar::compile_json_object_mode(opts);
  else if (p.kind == kind::json_schema)
    r = grammar::compile_json_schema_text(p.schema, opts);
  else
    return bad("structured output is not requested");
  ++compiles_;
  if (!r.ok())
    return bad("structured_output schema: " + r.error.text());
  if (grammars_.size() >= grammar_cache_entries) {
    grammars_.erase(lru_.back());
    lru_.pop_back();
  }
  lru_.push_front(key);
  grammars_.emplace(std::move(key), std::make_pair(r.value, lru_.begin()));
  return r.value;
}

grammar::token_masker& structured_output::masker() {
  if (!masker_) {
    grammar::grammar_vocabulary v;
    const int32_t n = tok_->vocab_size();
    v.token_bytes.reserve(static_cast<size_t>(n));
    v.special.reserve(static_cast<size_t>(n));
    for (int32_t id = 0; id < n; ++id) {
      v.token_bytes.push_back(tok_->token_bytes(id));
      v.special.push_back(tok_->is_special(id));
    }
    for (int32_t id : eos_ids_)
      if (id >= 0 && id < n)
        v.eos_ids.push_back(id);
    trie_ = std::make_unique<grammar::token_trie>(v);
    masker_ = std::make_unique<grammar::token_masker>(*trie_, masker_cache_entries);
  }
  return *masker_;
}

caf::expected<grammar::grammar_matcher>
structured_output::start(const structured_output_params& p, std::span<const int32_t> output) {
  if (!tok_)
    return bad("structured output needs the model's tokenizer, and this engine has none");
  if (std::none_of(eos_ids_.begin(), eos_ids_.end(),
                   [&](int32_t id) { return id >= 0 && id < tok_->vocab_size(); }))
    return bad("structured output needs an EOS token to end the document, and the model has none");
  auto g = grammar_for(p);
  if (!g)
    return std::move(g.error());
  grammar::grammar_matcher m(std::move(*g));
  auto& mk = masker();
  for (size_t i = 0; i < output.size(); ++i)
    if (!mk.accept_token(m, output[i]))
      return bad("output token " + std::to_string(i) + " (id " + std::to_string(output[i]) +
                 ") does not follow the request's structured-output grammar");
  return m;
}

size_t structured_output::mask(const grammar::grammar_matcher& m, std::span<float> row) {
  masker().fill(m, grammar::mask_mode::free, scratch_);
  return apply(row);
}

bool structured_output::fits(const grammar::grammar_matcher& m, int32_t token,
                             int32_t tokens_left) const {
  if (std::find(eos_ids_.begin(), eos_ids_.end(), token) != eos_ids_.end())
    return true;
  grammar::grammar_matcher after = m;
  if (!masker_ || !masker_->accept_token(after, token))
    return false;
  return int64_t{after.min_bytes_to_end()} <= int64_t{tokens_left} - 1;
}

size_t structured_output::mask_bounded(const grammar::grammar_matcher& m, int32_t tokens_left,
                                       std::span<float> row) {
  const auto budget = static_cast<uint32_t>(std::max<int32_t>(0, tokens_left - 1));
  masker().fill(m, grammar::mask_mode::bounded, scratch_, budget);
  return apply(row);
}

size_t structured_output::apply(std::span<float> row) const {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  size_t allowed = 0;
  const size_t n = row.size();
  for (size_t w = 0; w * 64 < n; ++w) {
    const uint64_t bits = w < scratch_.bits.size() ? scratch_.bits[w] : 0;
    const size_t hi = std::min(n, w * 64 + 64);
    if (bits == 0) {
      std::fill(row.begin() + static_cast<ptrdiff_t>(w * 64), row.begin() + static_cast<ptrdiff_t>(hi), neg_inf);
      continue;
    }
    for (size_t id = w * 64; id < hi; ++id) {
      if ((bits >> (id % 64)) & 1u)
        ++allowed;
      else
        row[id] = neg_inf;
    }
  }
  return allowed;
}

bool structured_output::accept(grammar::grammar_matcher& m, int32_t token) const {
  return masker_ && masker_->accept_token(m, token);
}

} // namespace tessera::engine
