#pragma once
/// @file
/// Changes to what a kv store holds, for the router's index
/// (hash -> {store, tier}). The tiers push one event per block while they
/// hold their own lock (so the order of events matches the order of
/// changes within a tier); a reader drains them in batches, coalesced into
/// runs of equal kind, tier and namespace.
///
/// Recording is off by default (as engine::kv_cache::record_events), so a
/// store nobody indexes pays one relaxed atomic load per change. Turning it
/// on through a store emits `stored` runs for everything the store holds at
/// that moment, so an index built from the drained events is complete.
/// Because that snapshot races with concurrent changes, a `stored` event
/// may repeat: apply events with set semantics.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "kvstore/block.hpp"

namespace tessera::kvstore {

/// A run of changes of one kind to one tier of one namespace.
struct store_event {
  enum class kind : uint8_t {
    /// `hashes` became readable from `tier`.
    stored,
    /// `hashes` are no longer in `tier` (evicted, or dropped as corrupt).
    removed,
    /// Events were dropped because nobody drained them (the backlog passed
    /// its bound); the index of this store is stale. `hashes` is empty.
    /// Re-sync by turning recording off and on again.
    lost,
  };
  kind what = kind::stored;
  kv_tier tier = kv_tier::host;
  /// Namespace of every hash in the run.
  uint64_t ns = 0;
  /// In the order the changes happened.
  std::vector<engine::kv_block_hash> hashes;
};

/// "stored", "removed" or "lost".
const char* to_string(store_event::kind k);

/// A bounded, thread-safe log of store_events. Thread-safe: every member
/// may be called from any thread. Lock order: a tier's lock, then this
/// log's lock (the log calls out to nothing).
class event_log {
public:
  /// Default bound on hashes waiting to be drained (8 MiB of hashes).
  static constexpr size_t default_max_pending_hashes = size_t{1} << 20;

  /// A log keeping at most `max_pending_hashes` undrained hashes.
  explicit event_log(size_t max_pending_hashes = default_max_pending_hashes);

  /// Starts or stops recording; stopping discards what was not drained.
  /// Returns true when recording was off and is now on (the caller then
  /// pushes a snapshot of the current contents).
  bool set_recording(bool on);

  /// Whether events are being recorded.
  [[nodiscard]] bool recording() const { return recording_.load(std::memory_order_relaxed); }

  /// Appends one change (extends the last run when kind, tier and ns
  /// match). No-op when not recording; past the bound, drops the change,
  /// counts it and appends one `lost` event.
  void push(store_event::kind what, kv_tier tier, const block_key& key);

  /// The runs since the last drain, in order; empties the log.
  [[nodiscard]] std::vector<store_event> drain();

  /// Changes dropped because the backlog was full, since construction.
  [[nodiscard]] uint64_t dropped() const;

private:
  const size_t max_pending_hashes_;
  std::atomic<bool> recording_{false};
  mutable std::mutex mutex_;
  std::vector<store_event> runs_;
  size_t pending_hashes_ = 0;
  bool lost_pushed_ = false;
  uint64_t dropped_ = 0;
};

} // namespace tessera::kvstore
