#pragma once
/// @file
/// A sequence as the scheduler sees it: its tokens, how many of them have
/// KV in the cache, and the blocks that hold it.

#include <cstdint>
#include <vector>

#include "engine/block_hash.hpp"
#include "engine/kv_cache.hpp"

namespace tessera::engine {

/// Where a sequence is in the scheduler.
enum class sequence_state : uint8_t { waiting, running, finished };

/// One sequence. Owned by the engine; the scheduler holds pointers.
///
/// Invariants: num_computed <= tokens.size(); blocks cover at least
/// num_computed positions; hashes[i] names tokens [0, (i+1)*block_tokens).
struct sequence {
  uint64_t id = 0;
  /// Higher runs first; equal priorities run in arrival order. Default: 0.
  int32_t priority = 0;
  /// Arrival order, assigned by the engine (FCFS tiebreak).
  uint64_t arrival = 0;
  /// Prompt followed by generated tokens.
  std::vector<int32_t> tokens;
  int32_t prompt_len = 0;
  /// Tokens whose K/V are in the cache (a prefix of `tokens`).
  int32_t num_computed = 0;
  /// Block table: block i holds positions [i*bt, (i+1)*bt).
  std::vector<kv_block_id> blocks;
  /// Chained hashes of the full blocks of `tokens`, extended lazily.
  std::vector<kv_block_hash> hashes;
  /// Parent hash of block 0 (namespace + cache salt).
  kv_block_hash hash_root;
  /// Blocks [0, num_cached_blocks) have been offered to the prefix cache.
  int32_t num_cached_blocks = 0;
  sequence_state state = sequence_state::waiting;
  /// Times this sequence lost its blocks to preemption.
  int32_t num_preemptions = 0;
  /// Speculative draft tokens at the end of `tokens` (after the one real
  /// uncomputed token), there only from the engine's proposal to the end of
  /// that step: never hashed, never offered to the prefix cache.
  int32_t num_draft = 0;

  [[nodiscard]] int32_t length() const { return static_cast<int32_t>(tokens.size()); }
  [[nodiscard]] int32_t num_uncomputed() const { return length() - num_computed; }
};

} // namespace tessera::engine
