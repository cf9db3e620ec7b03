// The engine's speculative decoding (speculative.hpp, draft_model.hpp):
// proposing drafts for the decoding sequences before a step, and verifying
// them against the target's logits rows after it. The rest of the engine
// is in engine.cpp.
#include "engine/engine.hpp"

#include <algorithm>
#include <vector>

#include "common/assert.hpp"
#include "engine/engine_errc.hpp"
#include "engine/engine_request_state.hpp"
#include "engine/speculative.hpp"

namespace tessera::engine {

namespace {

/// Tokens of decoding sequences (each its real token plus its drafts) a
/// step may compute with drafts in it. A decode step streams every weight
/// once whatever the batch, so up to a few tokens cost about the same as
/// one (`tessera bench engine` times decode steps of 1, 4 and 16
/// sequences); past this, drafts would slow a big batch down more than
/// their accepted tokens gain.
constexpr int32_t spec_step_tokens = 8;

} // namespace

void engine::propose_drafts() {
  // Every decoding sequence computes one token; drafts share what is left
  // of spec_step_tokens.
  int32_t budget = spec_step_tokens;
  for (const auto& [id, p] : requests_)
    if (p->seq.state == sequence_state::running && p->seq.num_uncomputed() == 1)
      --budget;
  std::vector<draft_job> jobs;
  std::vector<request_state*> job_states;
  for (auto& [id, p] : requests_) {
    if (budget <= 0)
      break;
    auto& rs = *p;
    auto& seq = rs.seq;
    if (rs.spec.method == speculative_params::method_kind::none ||
        seq.state != sequence_state::running || seq.num_uncomputed() != 1)
      continue;
    if (rs.spec_skip > 0) {
      --rs.spec_skip;
      continue;
    }
    // Drafts past max_tokens could never be kept (and stay within
    // max_model_len and the pool, which check_new sized for max_tokens).
    const int32_t k = std::min({rs.spec.num_tokens, rs.params.max_tokens - rs.output_len() - 1, budget});
    if (rs.spec.method == speculative_params::method_kind::draft) {
      TESSERA_ASSERT(draft_ != nullptr, "check_new refuses method draft without a draft model");
      if (k <= 0)
        continue;
      draft_job j;
      j.cache = &rs.draft;
      j.tokens = seq.tokens;
      j.prompt_len = seq.prompt_len;
      j.k = k;
      j.params = &rs.params;
      j.seed = rs.seed;
      jobs.push_back(std::move(j));
      job_states.push_back(&rs);
      budget -= k;
      continue;
    }
    drafts_.clear();
    const int32_t n = ngram_propose(seq.tokens, k, drafts_);
    budget -= n;
    seq.tokens.insert(seq.tokens.end(), drafts_.begin(), drafts_.end());
    seq.num_draft = n;
  }
  if (jobs.empty())
    return;
  // The draft model's forwards are batched across these sequences.
  draft_->propose(jobs);
  for (size_t i = 0; i < jobs.size(); ++i) {
    auto& seq = job_states[i]->seq;
    seq.tokens.insert(seq.tokens.end(), jobs[i].drafts.begin(), jobs[i].drafts.end());
    seq.num_draft = static_cast<int32_t>(jobs[i].drafts.size());
  }
}

void engine::verify_drafts(request_state& rs, size_t first_row, request_output& out) {
  // Row i holds the target's logits after the last token (i = 0) or after
  // draft i; each is sampled exactly as plain decoding would at that output
  // position (same seed and step, penalties over the tokens so far), and
  // draft i + 1 is kept while it equals what was drawn: the rejection rule
  // for a point-mass draft (speculative.hpp).
  auto& seq = rs.seq;
  const int32_t nd = seq.num_draft;
  drafts_.assign(seq.tokens.end() - nd, seq.tokens.end());
  seq.tokens.resize(seq.tokens.size() - static_cast<size_t>(nd));
  const size_t vocab = static_cast<size_t>(backend_->logits_vocab());
  int32_t appended = 0, accepted = 0;
  for (int32_t i = 0; i <= nd; ++i) {
    const auto row = std::span{logits_}.subspan((first_row + static_cast<size_t>(i)) * vocab, vocab);
    // A sampled request's draft from a draft model came with its q: the
    // rejection rule. Otherwise (n-gram, greedy, a grammar) the draft is
    // a point mass, verified by drawing the target's own token.
    const auto q = i < nd && !rs.matcher ? rs.draft.q_row(static_cast<size_t>(i)) : std::span<const float>{};
    bool match = false;
    if (!q.empty()) {
      if (!verify_sampled_draft(rs, row, drafts_[static_cast<size_t>(i)], q, out, match))
        break;
      ++appended;
      accepted += match ? 1 : 0;
      if (!match || seq.state == sequence_state::finished)
        break;
      continue;
    }
    if (!emit_row(rs, row, out))
      break;
    ++appended;
    match = i < nd && seq.tokens.back() == drafts_[static_cast<size_t>(i)];
    accepted += match ? 1 : 0;
    if (!match || seq.state == sequence_state::finished)
      break;
  }
  stats_.draft_tokens += static_cast<uint64_t>(nd);
  stats_.accepted_draft_tokens += static_cast<uint64_t>(accepted);
  if (accepted > 0) {
    rs.spec_misses = 0;
  } else {
    rs.spec_misses = std::min(rs.spec_misses + 1, 5);
    rs.spec_skip = (1 << (rs.spec_misses - 1)) - 1; // 0, 1, 3, 7, 15 steps
  }
  // The last token and each accepted draft were computed with their KV.
  scheduler_->finish_speculation(seq, appended);
}

bool engine::verify_sampled_draft(request_state& rs, std::span<float> row, int32_t draft,
                                  std::span<const float> q, request_output& out, bool& accepted) {
  accepted = false;
  mask_early_stops(rs, row);
  const auto step = static_cast<uint64_t>(rs.output_len());
  // p: the target's distribution as sample() would draw from it here.
  if (auto err = sampling_distribution(row, rs.params, rs.prompt(), rs.output(), scratch_, target_probs_)) {
    fail(rs, err, out);
    return false;
  }
  const auto r = rejection_sample(target_probs_, q, draft, draft_uniform(rs.seed, 1, step),
                                  draft_uniform(rs.seed, 2, step));
  auto t = token_logprobs(row, rs.params, r.token, scratch_);
  if (!t) {
    fail(rs, t.error(), out);
    return false;
  }
  accepted = r.accepted;
  append_token(rs, *t, out);
  return true;
}

caf::error engine::attach_draft_model(std::unique_ptr<backend> draft) {
  if (draft_)
    return make_engine_error(engine_errc::bad_request, "this engine already has a draft model");
  auto d = draft_model::make(std::move(draft), *backend_, max_model_len_);
  if (!d)
    return std::move(d.error());
  draft_ = std::move(*d);
  return {};
}

} // namespace tessera::engine
