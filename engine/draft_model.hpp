#pragma once
/// @file
/// Speculative decoding with a draft model: a smaller model with the same
/// tokenizer proposes K tokens autoregressively; the engine's target model
/// verifies them in one batched forward (engine.cpp, speculative.hpp).
///
/// The draft model has its own backend and its own paged KV pool (a free
/// list of its blocks; no prefix caching). Each speculating sequence keeps a
/// draft_cache, owned by the engine's request state and freed with it: the
/// draft pool's blocks of that sequence and the token ids their KV was
/// computed from. Before proposing, the cache is compared with the
/// sequence's tokens and cut at the first difference, so whatever the
/// target rejected, the scheduler dropped or a preemption recomputed is
/// rolled back without any other hook: positions the target changed are
/// recomputed by the draft, the rest is reused. Under pressure on the draft
/// pool, the least recently used caches outside the current proposal lose
/// their blocks (they catch up by recompute when they draft again).
///
/// Draws: greedy requests draft the argmax of the draft's logits (after the
/// request's penalties), a point mass. Sampled requests draw from q, the
/// draft's distribution under the request's sampling params
/// (sampling_distribution), with the request's seed stream (draft_uniform),
/// and q's rows are kept in the cache for the rejection rule.

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include <caf/expected.hpp>

#include "engine/backend.hpp"
#include "engine/sampler.hpp"

namespace tessera::engine {

class draft_model;
class tokenizer;

/// Checks that `draft` is the same tokenizer as `target`: the same
/// vocabulary, token for token (strings and special flags), and the same
/// BOS / EOS ids. Errors (bad_request) name the first difference.
[[nodiscard]] caf::error check_draft_tokenizer(const tokenizer& target, const tokenizer& draft);

/// One sequence's state in the draft model. Default-constructed empty;
/// bound to a draft_model by its first proposal; its destructor returns the
/// blocks. Not copyable or movable (the draft model keeps its address).
class draft_cache {
public:
  draft_cache() = default;
  ~draft_cache();
  draft_cache(const draft_cache&) = delete;
  draft_cache& operator=(const draft_cache&) = delete;

  /// Rows of q, one per draft of the last proposal, [num drafts, vocab]:
  /// the distribution each draft was drawn from. Empty for greedy
  /// requests (their drafts are point masses).
  [[nodiscard]] std::span<const float> q_row(size_t i) const;
  /// Tokens whose draft KV is held (a prefix of the sequence's tokens as of
  /// the last proposal, drafts included).
  [[nodiscard]] int32_t num_computed() const { return static_cast<int32_t>(kv_tokens_.size()); }
  /// Draft pool blocks held.
  [[nodiscard]] size_t num_blocks() const { return blocks_.size(); }

private:
  friend class draft_model;
  draft_model* owner_ = nullptr;
  std::vector<kv_block_id> blocks_;
  /// Token ids at positions [0, num_computed) whose KV the blocks hold.
  std::vector<int32_t> kv_tokens_;
  std::vector<float> q_;
  size_t q_vocab_ = 0;
  uint64_t last_used_ = 0;
  /// Index in draft_model::live_.
  size_t live_index_ = 0;
};

/// One sequence's proposal request.
struct draft_job {
  draft_cache* cache = nullptr;
  /// The sequence's tokens: prompt, output, and last the real token the
  /// target has not computed yet.
  std::span<const int32_t> tokens;
  int32_t prompt_len = 0;
  /// Drafts wanted (>= 1).
  int32_t k = 0;
  const sampling_params* params = nullptr;
  /// The request's seed (engine: params.seed or the one it chose).
  uint64_t seed = 0;
  /// Out: the drafts, at most k (fewer when the draft pool or the draft's
  /// context is short, or its logits are bad).
  std::vector<int32_t> drafts;
};

/// Counters of the draft model.
struct draft_stats {
  /// Batched draft forwards run, and the tokens they computed (catch-up and
  /// drafts).
  uint64_t forwards = 0;
  uint64_t tokens_computed = 0;
  /// Caches whose blocks were taken for another sequence's proposal.
  uint64_t evictions = 0;
  int32_t num_blocks = 0;
  int32_t free_blocks = 0;
};

/// The uniform in [0, 1) for speculative decoding's draw `stream` (0: the
/// draft's draw, 1: the acceptance test, 2: the resampling) at output
/// position `step` of a request seeded `seed`: sampler_uniform on a seed
/// derived from (seed, stream), so independent of the sampler's own draws.
[[nodiscard]] double draft_uniform(uint64_t seed, uint32_t stream, uint64_t step);

/// The draft model. Not thread-safe: the engine thread drives it.
class draft_model {
public:
  /// Wraps `draft` as the draft for `target`. Errors (bad_request, naming
  /// both): a different vocabulary size or logits width, different BOS or
  /// EOS ids (a different tokenizer), or a pool too small for one sequence
  /// of the target's longest context.
  [[nodiscard]] static caf::expected<std::unique_ptr<draft_model>> make(std::unique_ptr<backend> draft,
                                                                        const backend& target,
                                                                        int32_t max_model_len);
  ~draft_model();
  draft_model(const draft_model&) = delete;
  draft_model& operator=(const draft_model&) = delete;

  /// Proposes each job's drafts: catches its cache up to the sequence (one
  /// batched forward of every job's missing tokens), then K - 1 batched
  /// forwards of one draft token per job still drafting. Fills job.drafts
  /// and the caches' q rows.
  void propose(std::span<draft_job> jobs);

  /// Counters.
  [[nodiscard]] draft_stats stats() const;
  /// The draft's backend.
  [[nodiscard]] const backend& get_backend() const { return *backend_; }

private:
  explicit draft_model(std::unique_ptr<backend> be);
  friend class draft_cache;
  void bind(draft_cache& c);
  void release(draft_cache& c);
  /// Cuts c's KV at its first token that differs from `tokens` (and frees
  /// the blocks past what remains).
  void rollback(draft_cache& c, std::span<const int32_t> tokens);
  /// Gives c blocks for `tokens` positions, evicting the least recently
  /// used caches not stamped `now`. False if the pool cannot.
  bool reserve(draft_cache& c, int32_t tokens);
  /// Draws job j's next draft from its logits `row` (its r-th draft).
  bool draw(draft_job& j, std::span<const float> row, int32_t r);

  std::unique_ptr<backend> backend_;
  int32_t block_tokens_ = 16;
  std::vector<kv_block_id> free_;
  std::vector<draft_cache*> live_;
  uint64_t clock_ = 0;
  std::vector<float> logits_;
  std::vector<float> q_row_;
  std::vector<int32_t> scratch_tokens_;
  sampler_scratch scratch_;
  draft_stats stats_;
};

} // namespace tessera::engine
