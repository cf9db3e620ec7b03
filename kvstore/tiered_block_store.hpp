#pragma once
/// @file
/// The tiered block store: G2 host memory (host_tier) over G3 RocksDB on
/// local disk (rocksdb_tier), with a write-behind spill thread between them.
///
///   put ──> host (LRU) ──evicted──> spill_queue ──spill thread──> disk (FIFO)
///              ^                                                   │
///              └──────────── promotion on a get/lookup hit ────────┘
///
/// - put() validates the block and stores it in host memory. Blocks the
///   host tier evicts to make room are queued for disk (unless the disk
///   already has them: disk copies stay after promotion, so a block that is
///   promoted and evicted again is not rewritten). A block larger than the
///   host tier goes straight to the queue.
/// - Backpressure (spill_queue.hpp): an evicting put waits up to
///   `spill_wait` for queue space, then drops the spill and counts it in
///   spill_drops. Host memory held by the store is therefore at most
///   host_capacity_bytes + spill_queue_bytes (+ one block).
/// - get() looks in host memory, then in the spill queue (blocks on their
///   way to disk are still in memory: reported as host hits), then on disk.
///   Disk hits are copied back into host memory (promotion), unless the
///   spill queue is full: a read never waits for writes, so the block is
///   then served from disk and stays there (promotion_skips).
/// - lookup() walks a hash chain and reports, per matched block, the tier
///   it was found in (see lookup_mode).
/// - Events and stats: see store_events.hpp and store_stats.hpp.
///
/// int8 tiers (tier_codec = int8): put() quantizes each block (block_quant.hpp,
/// per-slab scales) before it enters host memory, so both tiers, the spill
/// queue and their capacities hold and count the quantized bytes (~50% of a
/// bf16 block, ~25% of an f32 one); get() dequantizes, returning a block of
/// the original layout and dtype (its KV within half a quantization step of
/// what was put). Blocks the quantizer refuses (a NaN or an infinity) are
/// kept exact and counted (int8_refused). The tiers hold everything under
/// tier_key(key), whose namespace is the caller's XOR int8_namespace_tag:
/// a store of one codec never sees the other's blocks, even when reopened
/// on a directory the other wrote (those stay on disk until evicted, oldest
/// first). Checksums cover the stored (quantized) bytes, so corruption is
/// caught before dequantizing. Events report the caller's namespace.
///
/// A put racing with a get of a block being evicted may see a transient
/// miss (the block is between the host tier and the queue); it never sees
/// wrong bytes.
///
/// Thread-safety: every member may be called concurrently from any thread.
/// Locks: one per tier, one for the queue, one for the event log. The store
/// never holds two tier or queue locks at once; a tier's lock may be held
/// while taking the event log's (order: tier, then event log). Destruction
/// must not race with other calls.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <thread>

#include <caf/expected.hpp>

#include "kvstore/block_store.hpp"
#include "kvstore/disk_recovery.hpp"
#include "kvstore/host_tier.hpp"
#include "kvstore/rocksdb_tier.hpp"
#include "kvstore/spill_queue.hpp"

namespace tessera::kvstore {

/// Options of a tiered_block_store.
struct tiered_store_options {
  /// Capacity of the host tier (payload + host_tier::entry_overhead_bytes
  /// per block). Default: 4 GiB.
  size_t host_capacity_bytes = size_t{4} << 30;
  /// The disk tier; nullopt for host memory only (evicted blocks are then
  /// dropped). Default: none.
  std::optional<rocksdb_tier_options> disk;
  /// Blocks the spill queue holds at most. Default: 1024.
  size_t spill_queue_blocks = 1024;
  /// Payload bytes the spill queue holds at most. Default: 256 MiB.
  size_t spill_queue_bytes = size_t{256} << 20;
  /// How long an evicting put waits for spill queue space before dropping
  /// the spill. Default: 10 ms.
  std::chrono::milliseconds spill_wait{10};
  /// On destruction, write the queued spills before closing (else they are
  /// dropped). Default: true.
  bool drain_spills_on_close = true;
  /// Bound on undrained event hashes. Default: event_log's (1 Mi).
  size_t max_pending_event_hashes = event_log::default_max_pending_hashes;
  /// How the tiers keep blocks: exact (as put), or int8 (quantized; see
  /// the file comment). Callers see exact blocks either way. Default: exact.
  block_codec tier_codec = block_codec::exact;
  /// How many unusable disk directories, moved aside as
  /// <dir>.corrupt-<time> (disk_recovery.hpp), are kept; older ones are
  /// deleted. Default: 3.
  size_t keep_corrupt_disk_dirs = 3;
};

/// XORed into the namespace of every block an int8 store keeps: "int8kvbl".
inline constexpr uint64_t int8_namespace_tag = 0x696e74386b76626cull;

/// Host memory over RocksDB; see the file comment.
class tiered_block_store final : public block_store {
public:
  /// Opens the store (and its disk tier, if any) and starts the spill
  /// thread. A disk tier that cannot be opened never fails the store: it
  /// is reset (moved aside, started cold) or left off, as disk_recovery.hpp
  /// says; disk_report() tells which. Errors: kvstore_errc::bad_config.
  [[nodiscard]] static caf::expected<std::unique_ptr<tiered_block_store>>
  open(tiered_store_options opts);

  /// Stops the spill thread (draining the queue if so configured) and
  /// closes the disk tier. Host contents are lost.
  ~tiered_block_store() override;
  tiered_block_store(const tiered_block_store&) = delete;
  tiered_block_store& operator=(const tiered_block_store&) = delete;

  [[nodiscard]] caf::error put(const block_key& key, stored_block b) override;
  [[nodiscard]] std::optional<block_hit> get(const block_key& key) override;
  /// In one pass: the host tier's blocks of the whole chain under one
  /// lock, then each run of blocks the host lacks from the spill queue and
  /// the disk with RocksDB MultiGet (rocksdb_tier::get_run), up to the
  /// first gap. Every block is verified; disk hits are promoted as get()
  /// promotes them. For int8
  /// tiers the byte bound is applied to the stored (quantized) bytes while
  /// reading and to the returned ones after decoding, so a read may fetch
  /// a few blocks it does not return.
  [[nodiscard]] prefix_read get_prefix(uint64_t ns, std::span<const engine::kv_block_hash> chain,
                                       uint64_t max_bytes = UINT64_MAX) override;
  [[nodiscard]] prefix_match lookup(uint64_t ns, std::span<const engine::kv_block_hash> chain,
                                    lookup_mode mode = lookup_mode::promote) override;
  [[nodiscard]] bool contains(const block_key& key) const override;
  void record_events(bool on) override;
  [[nodiscard]] std::vector<store_event> drain_events() override;
  [[nodiscard]] store_stats stats() const override;

  /// Waits until every queued spill was written (or failed); false if
  /// `timeout` passed first.
  bool wait_spilled(std::chrono::milliseconds timeout) const;

  /// Pauses or resumes the spill thread (tests fill the queue this way;
  /// pushes still wait and drop as configured).
  void set_spill_paused(bool paused);

  /// The key `key` is held under in the tiers: `key` itself for exact
  /// tiers, its namespace XOR int8_namespace_tag for int8 ones.
  [[nodiscard]] block_key tier_key(const block_key& key) const;

  /// The host tier (for tests and diagnostics).
  [[nodiscard]] host_tier& host() { return host_; }
  /// The disk tier, or null when there is none (for tests and diagnostics).
  [[nodiscard]] rocksdb_tier* disk() { return disk_.get(); }

  /// How the disk tier was opened (none, opened, reset or disabled).
  [[nodiscard]] disk_open_report disk_report() const override { return disk_report_; }

private:
  explicit tiered_block_store(const tiered_store_options& opts);
  void spill(const block_key& key, stored_block b);
  // Copies `b` into host memory, spilling what that evicts (and adding
  // the evicted keys to `evicted` when given).
  bool promote(const block_key& key, const stored_block& b, std::vector<block_key>* evicted = nullptr);
  void spill_loop();
  // get() below the codec: the block under tier key `key`, as held.
  [[nodiscard]] std::optional<block_hit> find(const block_key& key);
  // The block the tiers keep for `b` (quantized for int8 tiers).
  stored_block encode(stored_block b);
  // The block a caller gets for `b` as the tiers held it; nullopt if it
  // cannot be decoded.
  [[nodiscard]] std::optional<stored_block> decode(stored_block b) const;

  const tiered_store_options opts_;
  event_log events_;
  host_tier host_;
  std::unique_ptr<rocksdb_tier> disk_;
  disk_open_report disk_report_;
  spill_queue queue_;
  std::thread spill_thread_;

  std::atomic<uint64_t> puts_{0};
  std::atomic<uint64_t> put_rejects_{0};
  std::atomic<uint64_t> spills_{0};
  std::atomic<uint64_t> spill_skips_{0};
  std::atomic<uint64_t> spill_drops_{0};
  std::atomic<uint64_t> spill_failures_{0};
  std::atomic<uint64_t> queue_hits_{0};
  std::atomic<uint64_t> promotions_{0};
  std::atomic<uint64_t> promotion_skips_{0};
  std::atomic<uint64_t> int8_blocks_{0};
  std::atomic<uint64_t> int8_refused_{0};
  mutable std::atomic<uint64_t> decode_failures_{0};
};

} // namespace tessera::kvstore
