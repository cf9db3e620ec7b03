#pragma once
/// @file
/// The router's global KV index: which workers hold which KV blocks, and in
/// which tier, built from the workers' KV events (wire::kv_event). It answers
/// one question per request: for a prompt's chain of block hashes, how many
/// leading blocks does each worker hold?
///
/// Block hashes are chained (engine/block_hash.hpp): equal hashes mean equal
/// prefixes, so a flat map hash -> holders is enough (no radix tree), and a
/// worker's overlap with a chain is the number of blocks before its first
/// miss (a worker holding blocks 0, 1 and 3 of a chain overlaps 2).
///
/// Events per worker carry a sequence number (event_id, starting at 0). A
/// gap means events were lost and the router's view of that worker may be
/// stale. Recovery (a "resync"), as Dynamo's router does with a worker's
/// local indexer:
///
///   in sequence ----(event_id > expected)----> stale view: apply() reports
///        ^                                      `resync_requested` once;
///        |                                      needs_resync(w) is true
///        |                                             |
///        +---- a `cleared` event from w (it drops <----+  the router asks w
///              w's whole view, so nothing lost          for its blocks; w
///              before it matters any more)              answers `cleared`,
///                                                       then `stored` chains
///
/// Events that arrive with an id below the expected one (duplicates, or
/// late after a gap) are ignored: a late `stored` could resurrect blocks a
/// later `removed` dropped. A worker that restarts must be forgotten with
/// remove_worker() (membership notices its death) before its new events,
/// which start again at 0, arrive; otherwise they are ignored as stale.
///
/// Memory: one entry per (block hash, worker) pair, whatever the number of
/// tiers it is held in: 48 bytes in the entry slab plus, per distinct hash
/// (128 bits), about 48 bytes in the hash table (libstdc++ x86-64: a 40-byte
/// allocation and a bucket pointer), so about 96 bytes per entry when few
/// blocks are shared. The slab never shrinks (capacity is the high-water mark, up to
/// 2x by vector growth). With max_entries set, the oldest-stored entries are
/// evicted first (store order, refreshed by a new `stored` or by touch()):
/// an evicted entry only makes the router under-estimate a worker's cached
/// prefix, never route to a block that is not there.
///
/// Thread-compatible: no internal locking; one owner (the router actor)
/// calls it, or callers serialise every call. Reads no clock.

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/block_hash.hpp"
#include "transport/wire/messages.hpp"

namespace tessera::actors {

/// Number of KV tiers (wire::kv_tier: g1 pool, g2 host, g3 disk).
inline constexpr size_t kv_tier_count = 3;

/// What apply() did with an event.
enum class kv_event_status : uint8_t {
  /// The next event in the worker's sequence (or the first event seen of a
  /// worker, with id 0): applied.
  applied,
  /// Applied, but its id skipped ahead: `missed` events were lost (or the
  /// router joined late, for a worker's first event with id > 0).
  applied_after_gap,
  /// Its id was already passed (duplicate or reordered): ignored.
  stale,
  /// Malformed for this worker (event.worker_id differs from the worker it
  /// was attributed to, or a tier/kind out of range): ignored, and the
  /// worker's sequence is left as it was.
  rejected,
};

/// Returns "applied", "applied_after_gap", "stale" or "rejected".
const char* to_string(kv_event_status s);

/// The outcome of prefix_index::apply().
struct kv_event_result {
  kv_event_status status = kv_event_status::applied;
  /// Events lost before this one (event_id minus the expected id), for
  /// applied_after_gap; 0 otherwise.
  uint64_t missed = 0;
  /// True exactly when this event turned the worker's view stale: ask the
  /// worker for a resync (a `cleared` event followed by its blocks) once.
  /// needs_resync() stays true until that `cleared` event arrives.
  bool resync_requested = false;
};

/// How many leading blocks of a chain one worker holds.
struct worker_overlap {
  uint64_t worker_id = 0;
  /// Leading blocks of the chain the worker holds in any tier, >= 1.
  int32_t blocks = 0;
  /// Of those, how many have their fastest copy in each tier, indexed by
  /// wire::kv_tier (g1_pool, g2_host, g3_disk); they sum to `blocks`.
  std::array<int32_t, kv_tier_count> tier_blocks{};
};

/// Counters since construction, for metrics.
struct prefix_index_stats {
  /// Events applied (in sequence or after a gap).
  uint64_t events_applied = 0;
  /// Events that arrived after lost ones (applied_after_gap).
  uint64_t gaps = 0;
  /// Sum of the events lost over all gaps.
  uint64_t missed_events = 0;
  /// Duplicate or late events ignored.
  uint64_t stale_events = 0;
  /// Malformed events ignored.
  uint64_t rejected_events = 0;
  /// Entries dropped by the max_entries cap.
  uint64_t evicted_entries = 0;
  /// `stored` events whose parent the worker does not hold in this index
  /// (a lost event, or the parent was evicted by the cap): informational,
  /// the blocks are stored anyway.
  uint64_t unknown_parents = 0;
  /// Hashes in `removed` events the worker did not hold in this index.
  uint64_t unknown_removals = 0;
};

/// Options of a prefix_index.
struct prefix_index_options {
  /// Most (hash, worker) entries kept; when full, storing a new entry evicts
  /// the oldest-stored one. 0: unbounded (the workers' own evictions, sent
  /// as `removed` events, bound the index by the sum of their capacities).
  /// Default: 2^23 (about 800 MB when full; 8M blocks of 16 tokens = 128M
  /// cached prompt tokens across the cluster's pools and stores). Stores
  /// with disk tiers hold millions of blocks: four nodes' stores on the
  /// conversation trace outgrew 2^21 entries after about 14 minutes, and
  /// the entries evicted from then on hid cached prefixes from the router
  /// (0.82 of the optimum against 0.99 unbounded; bench/README). Dynamo's
  /// router caps its approximate tree at 2^20 blocks (--router-max-tree-size),
  /// without the stores' tiers. Cluster TOML `router_index_max_entries`,
  /// `tessera serve --router-index-max-entries`.
  size_t max_entries = size_t{1} << 23;
};

/// Block hash -> workers holding it and in which tiers. Thread-compatible
/// (see the file comment).
class prefix_index {
public:
  /// An empty index.
  explicit prefix_index(prefix_index_options opts = {});

  /// Applies one KV event that `worker_id` sent: `stored` adds the chain
  /// (its tier is added to blocks the worker already holds in another
  /// tier), `removed` drops the listed hashes from the event's tier (the
  /// entry goes when no tier is left), `cleared` drops every block of the
  /// worker in every tier. Checks the worker's event_id sequence first
  /// (see kv_event_status). `ev.worker_id` must equal `worker_id`.
  [[nodiscard]] kv_event_result apply(uint64_t worker_id,
                                      const transport::wire::kv_event& ev);

  /// Forgets a worker entirely (it died or left): its blocks and its event
  /// sequence, so a restarted worker's events (from id 0) are accepted.
  /// O(the worker's entries). No-op for an unknown worker.
  void remove_worker(uint64_t worker_id);

  /// For each worker holding chain[0], the number of leading blocks of
  /// `chain` it holds (the walk stops at a worker's first miss), sorted by
  /// worker id; workers holding nothing of it are absent. An empty chain
  /// gives an empty result. Visits only the holders of each block until no
  /// worker is left in the walk: O(chain.size() x holders per block x
  /// log(workers)), independent of the index size.
  [[nodiscard]] std::vector<worker_overlap>
  overlap(std::span<const engine::kv_block_hash> chain) const;

  /// Marks the leading blocks of `chain` that `worker_id` holds as just
  /// used, so the max_entries cap evicts them last (a hot system prompt is
  /// stored once but reused by every request). The router calls it with the
  /// chosen worker and the request's chain. Stops at the first miss.
  void touch(uint64_t worker_id, std::span<const engine::kv_block_hash> chain);

  /// True between a gap in `worker_id`'s events and its next `cleared`.
  [[nodiscard]] bool needs_resync(uint64_t worker_id) const;

  /// The event_id expected next from `worker_id`; nullopt for a worker
  /// never seen (or removed).
  [[nodiscard]] std::optional<uint64_t> next_event_id(uint64_t worker_id) const;

  /// The fastest tier in which `worker_id` holds `hash`; nullopt if it
  /// does not.
  [[nodiscard]] std::optional<transport::wire::kv_tier>
  tier_of(engine::kv_block_hash hash, uint64_t worker_id) const;

  /// (hash, worker) entries held.
  [[nodiscard]] size_t entries() const { return entries_; }
  /// Distinct block hashes held by at least one worker.
  [[nodiscard]] size_t blocks() const { return heads_.size(); }
  /// Entries of one worker.
  [[nodiscard]] size_t worker_entries(uint64_t worker_id) const;
  /// Workers with an event sequence (seen and not removed).
  [[nodiscard]] size_t workers() const { return workers_.size(); }
  /// Counters since construction.
  [[nodiscard]] const prefix_index_stats& stats() const { return stats_; }
  /// The options in force.
  [[nodiscard]] const prefix_index_options& options() const { return opts_; }

private:
  static constexpr uint32_t npos = UINT32_MAX;

  // One (hash, worker) entry. Linked into three lists by slab index: the
  // holders of its hash (singly), the eviction order and its worker's
  // entries (doubly).
  struct entry {
    engine::kv_block_hash hash;
    uint64_t worker = 0;
    uint32_t next_holder = npos; // also the free-list link
    uint32_t lru_prev = npos;
    uint32_t lru_next = npos;
    uint32_t worker_prev = npos;
    uint32_t worker_next = npos;
    uint8_t tiers = 0; // bit per kv_tier; 0 = free slot
  };
  static_assert(sizeof(entry) <= 48, "the per-entry cost documented above");

  struct worker_state {
    uint32_t head = npos;
    size_t entries = 0;
    uint64_t next_event_id = 0;
    bool needs_resync = false;
  };

  [[nodiscard]] uint32_t find(engine::kv_block_hash hash, uint64_t worker) const;
  void store(worker_state& w, uint64_t worker, engine::kv_block_hash hash, uint8_t tier_bit);
  void remove(uint64_t worker, engine::kv_block_hash hash, uint8_t tier_bit);
  void clear_worker(worker_state& w);
  void unlink(uint32_t i);
  void lru_push_back(uint32_t i);
  void lru_unlink(uint32_t i);
  uint32_t allocate();

  prefix_index_options opts_;
  std::vector<entry> slab_;
  uint32_t free_ = npos;
  uint32_t lru_head_ = npos; // oldest
  uint32_t lru_tail_ = npos; // newest
  size_t entries_ = 0;
  std::unordered_map<engine::kv_block_hash, uint32_t> heads_;
  std::unordered_map<uint64_t, worker_state> workers_;
  prefix_index_stats stats_;
};

} // namespace tessera::actors
