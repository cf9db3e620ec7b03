#pragma once
/// @file
/// Tier G2: blocks in host memory, bounded in bytes, evicted least recently
/// used first. Evicted blocks are handed back to the caller (the tiered
/// store spills them to disk); this tier never does I/O.
///
/// Capacity accounting: each block is charged its payload bytes plus
/// `entry_overhead_bytes` (an estimate of the index node, LRU link and
/// metadata). used_bytes() never exceeds capacity_bytes(): an insert evicts
/// until the new block fits, and a block whose charge alone exceeds the
/// capacity is refused (`too_large`) without evicting anything. Readers may
/// keep a returned payload alive after it is evicted; that memory is theirs,
/// not charged here.
///
/// Thread-safety: every member may be called from any thread. One mutex
/// guards the index; checksums are computed outside it. Lock order: this
/// tier's mutex, then the event_log's.

#include <cstddef>
#include <list>
#include <mutex>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "kvstore/block.hpp"
#include "kvstore/store_events.hpp"
#include "kvstore/store_stats.hpp"

namespace tessera::kvstore {

/// A block removed from a tier, with its key.
struct keyed_block {
  block_key key;
  stored_block block;
};

/// Host-memory LRU tier. See the file comment for accounting and locking.
class host_tier {
public:
  /// Bytes charged per block on top of its payload.
  static constexpr size_t entry_overhead_bytes = 128;

  /// What insert() did.
  struct insert_result {
    /// The block is now held (false: it already was, or it is too large).
    bool stored = false;
    /// The block alone is larger than the capacity; nothing was evicted.
    bool too_large = false;
    /// Blocks evicted to make room, least recently used first.
    std::vector<keyed_block> evicted;
  };

  /// A tier of `capacity_bytes`, reporting changes to `events` (may be
  /// null; not owned, must outlive the tier).
  explicit host_tier(size_t capacity_bytes, event_log* events = nullptr);

  /// The bytes `b` is charged: payload + entry_overhead_bytes.
  [[nodiscard]] static size_t charge(const stored_block& b);

  /// Stores `b` under `key` as most recently used, evicting least recently
  /// used blocks until it fits. A key already held is only marked used.
  /// `b` must be valid (validate_block); the tier does not re-check it.
  insert_result insert(const block_key& key, stored_block b);

  /// The block under `key`, verified against its checksum, marked most
  /// recently used. A block failing verification is dropped, counted as a
  /// checksum failure and reported as a miss (nullopt).
  [[nodiscard]] std::optional<stored_block> get(const block_key& key);

  /// Marks `key` most recently used; false when absent. Counts as a hit or
  /// a miss like get(), but reads (and verifies) no bytes.
  bool touch(const block_key& key);

  /// The blocks under `keys`, in order (nullopt where absent), under one
  /// lock acquisition for the lot: unverified, unchanged (no LRU change,
  /// nothing counted). A batched read verifies them (verify_block), hands
  /// those that fail to drop_unverified() and reports the rest with
  /// mark_read().
  [[nodiscard]] std::vector<std::optional<stored_block>> peek(std::span<const block_key> keys) const;

  /// What get() does after reading `used` (verified) and missing `misses`
  /// others, under one lock: marks `used` most recently used in order (those
  /// evicted since are skipped) and counts them as hits, `misses` as misses.
  void mark_read(std::span<const block_key> used, size_t misses);

  /// What get() does with a block that failed verification: drops `key` if
  /// it still holds `payload`, counts a checksum failure and a miss, logs
  /// (rate-limited).
  void drop_unverified(const block_key& key, const block_payload& payload);

  /// Whether `key` is held; changes nothing.
  [[nodiscard]] bool contains(const block_key& key) const;

  /// Removes `key`; false when absent.
  bool erase(const block_key& key);

  /// Keys from least to most recently used.
  [[nodiscard]] std::vector<block_key> keys_lru_first() const;

  /// Pushes a `stored` event for every block held (see store_events.hpp).
  void push_snapshot(event_log& log) const;

  /// Counters and levels now.
  [[nodiscard]] tier_stats stats() const;

  /// Bytes charged now; never above capacity_bytes().
  [[nodiscard]] size_t used_bytes() const;
  /// The capacity given at construction.
  [[nodiscard]] size_t capacity_bytes() const { return capacity_bytes_; }

  /// Test hook: flips the bits of payload byte `offset` of `key` in place,
  /// as memory corruption would. Returns false when absent or out of range.
  /// Only for blocks made by make_block or read from disk (their bytes are
  /// not const objects). Readers holding the payload see the change.
  bool corrupt_for_testing(const block_key& key, size_t offset);

private:
  struct entry {
    stored_block block;
    size_t charge = 0;
    std::list<block_key>::iterator lru_pos;
  };
  using index = std::unordered_map<block_key, entry, block_key_hasher>;

  void remove_locked(index::iterator it);

  const size_t capacity_bytes_;
  event_log* events_;
  mutable std::mutex mutex_;
  index index_;
  std::list<block_key> lru_; // front: least recently used
  size_t used_bytes_ = 0;
  tier_stats stats_;
};

} // namespace tessera::kvstore
