#include "engine/draft_model.hpp"

#include <algorithm>
#include <string>

#include "common/assert.hpp"
#include "engine/engine_errc.hpp"
#include "engine/tokenizer.hpp"

namespace tessera::engine {

namespace {

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::string ids_text(const std::vector<int32_t>& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i)
    s += (i ? ", " : "") + std::to_string(ids[i]);
  return s + "]";
}

std::string id_text(const std::optional<int32_t>& id) {
  return id ? std::to_string(*id) : std::string{"none"};
}

} // namespace

double draft_uniform(uint64_t seed, uint32_t stream, uint64_t step) {
  // A different seed per stream: the sampler's own draws use `seed` itself.
  return sampler_uniform(mix(seed ^ (0xd1b54a32d192ed03ull * (uint64_t{stream} + 1))), step);
}

draft_cache::~draft_cache() {
  if (owner_ != nullptr)
    owner_->release(*this);
}

std::span<const float> draft_cache::q_row(size_t i) const {
  if (q_vocab_ == 0 || (i + 1) * q_vocab_ > q_.size())
    return {};
  return std::span{q_}.subspan(i * q_vocab_, q_vocab_);
}

caf::expected<std::unique_ptr<draft_model>> draft_model::make(std::unique_ptr<backend> draft,
                                                              const backend& target,
                                                              int32_t max_model_len) {
  TESSERA_ASSERT(draft != nullptr, "a draft backend");
  auto bad = [](std::string what) { return make_engine_error(engine_errc::bad_request, std::move(what)); };
  const auto& d = draft->config();
  const auto& t = target.config();
  if (d.vocab_size != t.vocab_size || draft->logits_vocab() != target.logits_vocab())
    return bad("the draft model's vocabulary (" + std::to_string(d.vocab_size) + " tokens, " +
               std::to_string(draft->logits_vocab()) + " logits) differs from the target model's (" +
               std::to_string(t.vocab_size) + " tokens, " + std::to_string(target.logits_vocab()) +
               " logits): a draft model must share the target's tokenizer");
  if (d.bos_token_id != t.bos_token_id || d.eos_token_ids != t.eos_token_ids)
    return bad("the draft model's special tokens (BOS " + id_text(d.bos_token_id) + ", EOS " +
               ids_text(d.eos_token_ids) + ") differ from the target model's (BOS " +
               id_text(t.bos_token_id) + ", EOS " + ids_text(t.eos_token_ids) +
               "): a draft model must share the target's tokenizer");
  const int64_t capacity = int64_t{draft->num_blocks()} * draft->layout().block_tokens;
  const int64_t need = int64_t{max_model_len} + speculative_params::max_tokens;
  if (capacity < need)
    return bad("the draft model's KV pool holds " + std::to_string(capacity) +
               " tokens, fewer than one sequence of the target's longest context plus drafts (" +
               std::to_string(need) + ")");
  return std::unique_ptr<draft_model>{new draft_model{std::move(draft)}};
}

draft_model::draft_model(std::unique_ptr<backend> be) : backend_(std::move(be)) {
  block_tokens_ = backend_->layout().block_tokens;
  const int32_t n = backend_->num_blocks();
  free_.reserve(static_cast<size_t>(n));
  // Lowest ids handed out first.
  for (int32_t i = n; i-- > 0;)
    free_.push_back(static_cast<kv_block_id>(i));
  stats_.num_blocks = n;
}

draft_model::~draft_model() {
  // The engine destroys its requests first; any cache left just forgets us.
  for (auto* c : live_) {
    c->owner_ = nullptr;
    c->blocks_.clear();
  }
}

void draft_model::bind(draft_cache& c) {
  if (c.owner_ == this)
    return;
  TESSERA_ASSERT(c.owner_ == nullptr, "a draft cache belongs to one draft model");
  c.owner_ = this;
  c.live_index_ = live_.size();
  live_.push_back(&c);
}

void draft_model::release(draft_cache& c) {
  TESSERA_ASSERT(c.owner_ == this, "releasing a cache of this draft model");
  free_.insert(free_.end(), c.blocks_.begin(), c.blocks_.end());
  c.blocks_.clear();
  c.kv_tokens_.clear();
  c.q_.clear();
  const size_t i = c.live_index_;
  live_[i] = live_.back();
  live_[i]->live_index_ = i;
  live_.pop_back();
  c.owner_ = nullptr;
}

void draft_model::rollback(draft_cache& c, std::span<const int32_t> tokens) {
  const auto n = std::min(c.kv_tokens_.size(), tokens.size());
  const auto same = std::mismatch(c.kv_tokens_.begin(), c.kv_tokens_.begin() + static_cast<ptrdiff_t>(n),
                                  tokens.begin())
                      .first -
                    c.kv_tokens_.begin();
  c.kv_tokens_.resize(static_cast<size_t>(same));
}

bool draft_model::reserve(draft_cache& c, int32_t tokens) {
  const auto need = static_cast<size_t>((tokens + block_tokens_ - 1) / block_tokens_);
  while (c.blocks_.size() < need) {
    if (free_.empty()) {
      // The least recently used cache that is not part of this proposal.
      draft_cache* victim = nullptr;
      for (auto* other : live_)
        if (other->last_used_ < clock_ && !other->blocks_.empty() &&
            (victim == nullptr || other->last_used_ < victim->last_used_))
          victim = other;
      if (victim == nullptr)
        return false;
      free_.insert(free_.end(), victim->blocks_.begin(), victim->blocks_.end());
      victim->blocks_.clear();
      victim->kv_tokens_.clear();
      ++stats_.evictions;
    }
    c.blocks_.push_back(free_.back());
    free_.pop_back();
  }
  return true;
}

bool draft_model::draw(draft_job& j, std::span<const float> row, int32_t r) {
  auto& c = *j.cache;
  const auto& params = *j.params;
  const auto prompt = j.tokens.first(static_cast<size_t>(j.prompt_len));
  // Penalties see the output so far and the drafts before this one.
  scratch_tokens_.assign(j.tokens.begin() + j.prompt_len, j.tokens.end());
  scratch_tokens_.insert(scratch_tokens_.end(), j.drafts.begin(), j.drafts.end());
  const uint64_t step = scratch_tokens_.size();
  std::vector<float>& q = q_row_;
  if (sampling_distribution(row, params, prompt, scratch_tokens_, scratch_, q))
    return false; // bad draft logits: no more drafts for this sequence
  int32_t token = -1;
  if (sampling_is_greedy(params)) {
    token = static_cast<int32_t>(std::max_element(q.begin(), q.end()) - q.begin());
  } else {
    // Inverse CDF by id with the request's draft stream.
    double total = 0;
    for (float v : q)
      total += v;
    const double target = draft_uniform(j.seed, 0, step) * total;
    double acc = 0;
    for (size_t i = 0; i < q.size(); ++i) {
      if (q[i] <= 0)
        continue;
      token = static_cast<int32_t>(i);
      acc += q[i];
      if (target < acc)
        break;
    }
    if (token < 0)
      return false;
    if (c.q_vocab_ == 0)
      c.q_vocab_ = q.size();
    TESSERA_ASSERT(c.q_.size() == static_cast<size_t>(r) * c.q_vocab_, "q rows in draft order");
    c.q_.insert(c.q_.end(), q.begin(), q.end());
  }
  j.drafts.push_back(token);
  return true;
}

void draft_model::propose(std::span<draft_job> jobs) {
  ++clock_;
  const int32_t max_pos = backend_->config().max_position_embeddings;
  for (auto& j : jobs) {
    auto& c = *j.cache;
    bind(c);
    c.last_used_ = clock_;
    c.q_.clear();
    c.q_vocab_ = 0;
    j.drafts.clear();
    const auto len = static_cast<int32_t>(j.tokens.size());
    rollback(c, j.tokens.first(static_cast<size_t>(len - 1)));
    // Positions [0, len + k - 1) get KV; the last draft's logits come from
    // position len + k - 2.
    j.k = std::min(j.k, max_pos - len + 1);
  }
  for (auto& j : jobs)
    if (j.k > 0 && !reserve(*j.cache, static_cast<int32_t>(j.tokens.size()) + j.k - 1))
      j.k = 0; // the draft pool is full of this step's own sequences
  const auto vocab = static_cast<size_t>(backend_->logits_vocab());
  std::vector<forward_seq> batch;
  std::vector<draft_job*> in_batch;
  for (int32_t r = 0;; ++r) {
    batch.clear();
    in_batch.clear();
    for (auto& j : jobs) {
      auto& c = *j.cache;
      if (j.k <= r || static_cast<int32_t>(j.drafts.size()) != r)
        continue; // done, or stopped by bad logits
      forward_seq f;
      if (r == 0) {
        j.drafts.reserve(static_cast<size_t>(j.k));
        f.start_pos = c.num_computed();
        f.tokens = j.tokens.subspan(static_cast<size_t>(f.start_pos));
      } else {
        f.start_pos = static_cast<int32_t>(j.tokens.size()) + r - 1;
        f.tokens = std::span{j.drafts}.subspan(static_cast<size_t>(r - 1), 1);
      }
      f.block_table = c.blocks_;
      f.logits_rows = 1;
      batch.push_back(f);
      in_batch.push_back(&j);
    }
    if (batch.empty())
      break;
    logits_.resize(batch.size() * vocab);
    backend_->forward(batch, logits_.data());
    ++stats_.forwards;
    for (size_t i = 0; i < batch.size(); ++i) {
      auto& j = *in_batch[i];
      auto& c = *j.cache;
      stats_.tokens_computed += batch[i].tokens.size();
      c.kv_tokens_.insert(c.kv_tokens_.end(), batch[i].tokens.begin(), batch[i].tokens.end());
      draw(j, std::span{logits_}.subspan(i * vocab, vocab), r);
    }
  }
}

draft_stats draft_model::stats() const {
  auto s = stats_;
  s.free_blocks = static_cast<int32_t>(free_.size());
  return s;
}

caf::error check_draft_tokenizer(const tokenizer& target, const tokenizer& draft) {
  auto bad = [](std::string what) { return make_engine_error(engine_errc::bad_request, std::move(what)); };
  if (target.vocab_size() != draft.vocab_size())
    return bad("the draft model's tokenizer has " + std::to_string(draft.vocab_size()) +
               " tokens, the target's " + std::to_string(target.vocab_size()) +
               ": a draft model must share the target's tokenizer");
  for (int32_t id = 0; id < target.vocab_size(); ++id)
    if (target.id_to_token(id) != draft.id_to_token(id) || target.is_special(id) != draft.is_special(id))
      return bad("the draft model's tokenizer differs from the target's at token id " +
                 std::to_string(id) + ": a draft model must share the target's tokenizer");
  const auto& ts = target.settings();
  const auto& ds = draft.settings();
  if (ts.bos_id != ds.bos_id || ts.eos_ids != ds.eos_ids)
    return bad("the draft model's tokenizer has other BOS / EOS ids than the target's: "
               "a draft model must share the target's tokenizer");
  return {};
}

} // namespace tessera::engine
