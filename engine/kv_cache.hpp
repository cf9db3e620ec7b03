#pragma once
/// @file
/// Paged KV-cache accounting: a fixed pool of blocks (block_tokens tokens
/// each), reference counts, copy-on-write, and the automatic prefix cache.
/// It owns ids, not memory: the backend stores block `id`'s bytes, and the
/// engine asks it to copy when make_writable says so.
///
/// Block life cycle:
///
///   free (ref 0, no hash) --allocate--> used (ref 1) --cache_block--> used+hashed
///        ^                                  |                             |
///        |                               free_blocks                   free_blocks
///        |                                  v                             v
///        +-------- evicted <--allocate-- free LRU (ref 0, hashed) --match_prefix--> used
///
/// Freed blocks keep their hash and stay matchable until allocate needs
/// their memory, least recently freed first.

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/block_hash.hpp"

namespace tessera::engine {

/// Index of a block in the pool, 0..num_blocks-1.
using kv_block_id = int32_t;

/// Counters of the prefix cache and the pool.
struct kv_cache_stats {
  /// Tokens looked up in the prefix cache (full blocks of new requests).
  uint64_t prefix_query_tokens = 0;
  /// Of those, tokens found cached and reused.
  uint64_t prefix_hit_tokens = 0;
  /// Cached blocks whose memory was reused for something else.
  uint64_t evictions = 0;
  /// Shared blocks copied before a write.
  uint64_t cow_copies = 0;
};

/// A change to the set of cached block hashes, for the router's prefix
/// index (KV events). Hashes are chained, so a worker holding hash h_i of a
/// request holds that request's whole prefix up to block i.
struct kv_cache_event {
  enum class kind : uint8_t {
    /// `hash` became matchable.
    stored,
    /// `hash` is no longer matchable (evicted or overwritten).
    removed,
    /// Every hash was forgotten (`hash` unused).
    cleared,
  };
  kind what = kind::stored;
  kv_block_hash hash;
};

/// Block accounting for one engine. Not thread-safe: the engine thread owns it.
class kv_cache {
public:
  /// A pool of `num_blocks` blocks of `block_tokens` tokens. With
  /// `enable_prefix_caching` false, match_prefix never hits and cache_block
  /// is a no-op.
  kv_cache(int32_t num_blocks, int32_t block_tokens, bool enable_prefix_caching = true);

  [[nodiscard]] int32_t num_blocks() const { return static_cast<int32_t>(ref_.size()); }
  [[nodiscard]] int32_t block_tokens() const { return block_tokens_; }
  /// Blocks with no reference (never used, or cached and evictable).
  [[nodiscard]] int32_t num_free_blocks() const { return free_count_; }
  /// Blocks with no reference that still hold a cached prefix.
  [[nodiscard]] int32_t num_cached_free_blocks() const;
  [[nodiscard]] bool prefix_caching() const { return prefix_caching_; }

  /// Takes `n` blocks (ref 1 each), least recently freed first, evicting
  /// their cached hashes; appends them to `out`. Returns false and takes
  /// nothing if fewer than `n` are free.
  [[nodiscard]] bool allocate(int32_t n, std::vector<kv_block_id>& out);

  /// Walks `hashes` in order and stops at the first one not cached; each
  /// hit gains a reference and is appended to `out`. Returns the number of
  /// hits. Does not touch the counters (see record_prefix_query).
  size_t match_prefix(std::span<const kv_block_hash> hashes, std::vector<kv_block_id>& out);

  /// Names the full, immutable block `id` by `hash` so later requests can
  /// reuse it. If another block already holds that hash, nothing changes.
  void cache_block(kv_block_id id, kv_block_hash hash);

  /// Adds a reference to `id` (sharing it with another sequence).
  void retain(kv_block_id id);

  /// Drops one reference of each block. Blocks reaching zero join the free
  /// LRU in reverse order, so a sequence's last blocks (least likely to be
  /// shared) are evicted before its first.
  void free_blocks(std::span<const kv_block_id> ids);

  /// References to `id`.
  [[nodiscard]] int32_t ref_count(kv_block_id id) const { return ref_[id]; }
  /// The block cached under `hash`, if any (no reference taken).
  [[nodiscard]] std::optional<kv_block_id> find_cached(kv_block_hash hash) const;
  /// The hash `id` is cached under, if any.
  [[nodiscard]] std::optional<kv_block_hash> block_hash(kv_block_id id) const;

  /// Result of make_writable.
  struct writable_block {
    /// The block to write into (== the old one if it was not shared).
    kv_block_id id;
    /// True when the caller must copy the old block's bytes into `id`.
    bool needs_copy;
  };

  /// Copy-on-write: prepares block `id`, held by the caller, to be modified.
  /// A block shared with others (ref > 1) is swapped for a fresh one (the
  /// caller's reference moves; copy the bytes); an unshared block is
  /// written in place and loses its cached hash (its content will change).
  /// Returns nullopt if a copy is needed and no block is free.
  [[nodiscard]] std::optional<writable_block> make_writable(kv_block_id id);

  /// Counts a prefix lookup of `query_tokens` of which `hit_tokens` hit.
  void record_prefix_query(uint64_t query_tokens, uint64_t hit_tokens);

  [[nodiscard]] const kv_cache_stats& stats() const { return stats_; }

  /// Forgets every cached hash (used blocks are unaffected).
  void reset_prefix_cache();
  /// Every hash the prefix cache holds now (in no order): a full picture
  /// for a reader of the events that lost some.
  [[nodiscard]] std::vector<kv_block_hash> cached_hashes() const;

  /// Starts (or stops) recording kv_cache_events. Default: off (nothing is
  /// recorded, so an engine nobody asks pays nothing).
  void record_events(bool on);
  /// The events since the last call, in order.
  [[nodiscard]] std::vector<kv_cache_event> drain_events();

private:
  static constexpr kv_block_id none = -1;
  void push_free_back(kv_block_id id);
  void unlink_free(kv_block_id id);
  void drop_hash(kv_block_id id);

  int32_t block_tokens_;
  bool prefix_caching_;
  std::vector<int32_t> ref_;
  std::vector<kv_block_hash> hash_;
  std::vector<bool> hashed_;
  // Free LRU as an intrusive doubly linked list over block ids.
  std::vector<kv_block_id> prev_, next_;
  kv_block_id head_ = none, tail_ = none;
  int32_t free_count_ = 0;
  std::unordered_map<kv_block_hash, kv_block_id> cached_;
  kv_cache_stats stats_;
  bool record_events_ = false;
  std::vector<kv_cache_event> events_;
};

} // namespace tessera::engine
