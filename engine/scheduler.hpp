#pragma once
/// @file
/// Continuous batching: which sequences run in the next forward step and
/// how many of their tokens. A plain policy class over sequences and the
/// KV-cache accounting, unit-tested without a model.
///
/// Each step, with a token budget B:
///   0. waiting sequences of higher priority than every running one (a
///      health canary) are admitted first, as in 2: priority holds for the
///      budget too, so running prefills of lower priority, which could
///      fill B for many steps, run on what they leave.
///   1. running sequences, highest priority first then oldest: each gets
///      min(its uncomputed tokens, what is left of B, the chunk cap) (a
///      decode is 1 token; a long prompt is prefilled in chunks). When the
///      blocks for them cannot be allocated, the lowest-priority, newest
///      running sequence is preempted (its blocks freed; it is recomputed
///      later, reusing whatever the prefix cache kept) until they can.
///   2. if nothing was preempted, waiting sequences are admitted in
///      (priority, arrival) order: their longest cached prefix is reused,
///      the rest scheduled as above, while budget, blocks and max_num_seqs
///      allow. A waiting sequence of higher priority than a running one may
///      preempt it to get in (health checks first).
///
/// A running sequence may carry speculative drafts (sequence::num_draft):
/// they count against the budget and take blocks like any token, but they
/// give way first: drafts that do not fit the budget are dropped, and a
/// sequence short of blocks drops its drafts before anything is preempted;
/// a preempted or unscheduled sequence loses them.
///
/// Sequence states:  waiting --admit--> running --finish--> finished
///                      ^                  |
///                      +-----preempt------+

#include <cstdint>
#include <vector>

#include "engine/kv_cache.hpp"
#include "engine/sequence.hpp"

namespace tessera::engine {

/// Scheduler limits.
struct scheduler_config {
  /// Tokens computed per step, over all sequences. Default: 512.
  int32_t max_batched_tokens = 512;
  /// Sequences running at once. Default: 64.
  int32_t max_num_seqs = 64;
  /// Most tokens of one sequence's prefill per step (0: the whole budget).
  /// Default: 0.
  int32_t max_prefill_chunk = 0;
};

/// One sequence's part of a step.
struct scheduled_seq {
  sequence* seq = nullptr;
  /// Tokens to compute: seq->tokens[num_computed, num_computed + n).
  int32_t num_tokens = 0;
};

/// A block copy the backend must do before the step (copy-on-write).
struct block_copy {
  kv_block_id src = 0;
  kv_block_id dst = 0;
};

/// The plan for one step.
struct schedule_output {
  std::vector<scheduled_seq> seqs;
  std::vector<block_copy> copies;
  /// Sequences preempted in this step (now waiting again).
  std::vector<sequence*> preempted;
  int32_t total_tokens = 0;
};

/// The scheduling policy. Not thread-safe: the engine thread owns it.
class scheduler {
public:
  /// `hash_key` keys the prefix-cache hash chain (see block_hash.hpp).
  scheduler(const scheduler_config& cfg, kv_cache& cache, const kv_hash_key& hash_key);

  /// Queues `seq` (state waiting). Its hash_root must be set.
  void add(sequence* seq);

  /// Removes `seq` from whichever queue holds it and frees its blocks
  /// (finished or aborted). Its state becomes finished.
  void remove(sequence* seq);

  /// Removes `seq` from the queues but keeps its blocks (a finished request
  /// held for KV export); remove() frees them later. State becomes finished.
  void hold(sequence* seq);

  /// Plans the next step. Allocates the blocks it needs.
  [[nodiscard]] schedule_output schedule();

  /// Records that a step computed what `out` planned: advances
  /// num_computed and offers newly full blocks to the prefix cache.
  /// Sequences with drafts are left to finish_speculation.
  void commit(const schedule_output& out);

  /// Ends a speculative step of `seq` (its last token and num_draft drafts
  /// were computed): the caller has replaced the drafts in seq.tokens by
  /// what it accepted; the first `num_valid` computed tokens (the last
  /// token and the accepted drafts) keep their KV. Advances num_computed by
  /// num_valid, returns the blocks past it to the pool and offers newly
  /// full blocks to the prefix cache (rejected tokens never reach it).
  void finish_speculation(sequence& seq, int32_t num_valid);

  /// Offers seq's full, computed blocks to the prefix cache (also used
  /// after tokens were imported rather than computed).
  void cache_full_blocks(sequence& seq);

  [[nodiscard]] size_t num_waiting() const { return waiting_.size(); }
  [[nodiscard]] size_t num_running() const { return running_.size(); }
  [[nodiscard]] const scheduler_config& config() const { return cfg_; }
  [[nodiscard]] kv_cache& cache() { return cache_; }

  /// Blocks a sequence of `tokens` tokens needs.
  [[nodiscard]] int32_t blocks_for(int32_t tokens) const;

private:
  bool reserve(sequence& seq, int32_t num_tokens, schedule_output& out);
  /// Drops seq's last `n` drafts (at most num_draft) from its tokens.
  static void drop_drafts(sequence& seq, int32_t n);
  void preempt(sequence& seq, schedule_output& out);
  /// Frees seq's blocks; it will be computed from its first token again.
  void release_blocks(sequence& seq);
  /// Frees the blocks of the newest waiting sequence other than `keep` that
  /// holds some (a committed import, a sequence whose prefix hits were
  /// matched): it will recompute what its blocks held, from the prefix
  /// cache where they are still cached. Without this, waiting sequences
  /// holding the pool would wait for each other forever. False if none.
  bool release_waiting_holder(const sequence* keep, schedule_output& out);
  /// Admits waiting sequences in order while budget, blocks and
  /// max_num_seqs allow (a higher-priority one may preempt the lowest
  /// running one to get in); with `above_running`, only while the next one
  /// is of higher priority than every running sequence.
  void admit_waiting(schedule_output& out, bool above_running);
  void insert_waiting(sequence* seq);
  int32_t chunk(const sequence& seq, int32_t budget) const;
  void match_prefix(sequence& seq);

  scheduler_config cfg_;
  kv_cache& cache_;
  kv_hash_key hash_key_;
  /// Ordered by (priority desc, arrival asc).
  std::vector<sequence*> waiting_;
  std::vector<sequence*> running_;
};

} // namespace tessera::engine
