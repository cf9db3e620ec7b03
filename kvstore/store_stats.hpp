#pragma once
/// @file
/// Counters of a kv store, as plain snapshots (the kvstore actor exports
/// them to Prometheus). Counters only grow; `blocks`, `used_bytes` and the
/// queue sizes are levels. A snapshot is taken tier by tier, so it is
/// consistent within a tier but not across tiers.

#include <cstdint>

namespace tessera::kvstore {

/// Counters and levels of one tier.
struct tier_stats {
  /// Reads (get, promoting lookup) served from this tier with a verified block.
  uint64_t hits = 0;
  /// Reads that looked in this tier and found no usable block (absent,
  /// failing its checksum, or failing to read).
  uint64_t misses = 0;
  /// Blocks held now.
  uint64_t blocks = 0;
  /// Bytes charged against the capacity now (see each tier for what counts).
  uint64_t used_bytes = 0;
  /// The capacity in bytes.
  uint64_t capacity_bytes = 0;
  /// Blocks stored since opening.
  uint64_t inserts = 0;
  /// Blocks evicted to make room since opening.
  uint64_t evictions = 0;
  /// Blocks whose bytes failed verification (checksum, header, size) on a
  /// read; each was dropped from the tier and reported as a miss.
  uint64_t checksum_failures = 0;
  /// Failed reads and writes of the medium (disk tier only).
  uint64_t io_errors = 0;
};

/// Counters of a tiered store: both tiers plus the spill path.
struct store_stats {
  tier_stats host;
  tier_stats disk;
  /// put() calls that were accepted (a block already held counts too).
  uint64_t puts = 0;
  /// put() calls refused (bad block, too large).
  uint64_t put_rejects = 0;
  /// Blocks the spill thread wrote to disk.
  uint64_t spills = 0;
  /// Blocks evicted from host that were already on disk (nothing written).
  uint64_t spill_skips = 0;
  /// Blocks evicted from host and lost because the spill queue stayed full
  /// for the whole wait bound.
  uint64_t spill_drops = 0;
  /// Spills the disk tier refused (I/O error, larger than its capacity).
  uint64_t spill_failures = 0;
  /// Blocks waiting in the spill queue now (including the one being written).
  uint64_t spill_queue_blocks = 0;
  /// Payload bytes waiting in the spill queue now.
  uint64_t spill_queue_bytes = 0;
  /// Reads served from a block still waiting in the spill queue.
  uint64_t spill_queue_hits = 0;
  /// Disk hits copied back into host memory.
  uint64_t promotions = 0;
  /// Disk hits left on disk because the spill queue was full (the
  /// promotion's evictions could not have been spilled without waiting).
  uint64_t promotion_skips = 0;
  /// Events dropped because nobody drained them.
  uint64_t events_dropped = 0;
  /// int8 tiers: blocks put that were stored quantized (or were int8
  /// already: an int8 pool's blocks, kept as they are).
  uint64_t int8_blocks = 0;
  /// int8 tiers: blocks put that the quantizer refused (a NaN or an
  /// infinity), stored exact.
  uint64_t int8_refused = 0;
  /// Blocks found in a tier that could not be decoded (read as misses).
  uint64_t decode_failures = 0;
  /// Disk tiers found unusable at open, moved aside and started cold
  /// (disk_recovery.hpp): 0 or 1 per opening.
  uint64_t disk_resets = 0;
  /// 1 while the configured disk tier is off because it could not be
  /// opened (the store runs on host memory only); a level.
  uint64_t disk_disabled = 0;
};

} // namespace tessera::kvstore
