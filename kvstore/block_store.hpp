#pragma once
/// @file
/// The content-addressed KV block store interface, as the kvstore actor and
/// the engines see it. Blocks are named by block_key (namespace + chained
/// hash), so a hit on block i of a request's hash chain implies blocks
/// 0..i are the same prefix (DESIGN.md "KV store tiers"). Implementations:
/// tiered_block_store (host memory over RocksDB).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include <caf/error.hpp>

#include "kvstore/block.hpp"
#include "kvstore/disk_recovery.hpp"
#include "kvstore/store_events.hpp"
#include "kvstore/store_stats.hpp"

namespace tessera::kvstore {

/// A block read from a store, with the tier it was found in.
struct block_hit {
  kv_tier tier = kv_tier::host;
  stored_block block;
};

/// How lookup() treats blocks found below host memory.
enum class lookup_mode : uint8_t {
  /// Read, verify and copy disk hits back into host memory, so the blocks
  /// are ready to serve; a disk block failing verification ends the match.
  /// Host hits are marked recently used but not re-hashed (no bytes are
  /// returned; get() verifies them).
  promote,
  /// Consult the indexes only: no I/O, no promotion, no LRU change. Cheap
  /// enough for a router probe; a block it reports may still fail
  /// verification when read.
  probe,
};

/// The longest prefix of a hash chain a store holds.
struct prefix_match {
  /// tiers[i]: where block i of the chain was found (before any
  /// promotion). size() is the number of matched blocks.
  std::vector<kv_tier> tiers;

  /// Blocks matched.
  [[nodiscard]] size_t blocks() const { return tiers.size(); }
  /// Blocks matched in tier `t`.
  [[nodiscard]] size_t count(kv_tier t) const;
};

/// The leading blocks of a hash chain read from a store (get_prefix).
struct prefix_read {
  /// hits[i] is block i of the chain, verified.
  std::vector<block_hit> hits;
  /// It stopped at the byte bound before a block the store holds: ask
  /// again for the rest.
  bool more = false;
};

/// A content-addressed store of KV blocks. Thread-safe: every member may be
/// called concurrently from any thread.
class block_store {
public:
  virtual ~block_store() = default;

  /// Stores `b` under `key` (a key already held is only marked used).
  /// Validates the block first (validate_block). Errors:
  /// kvstore_errc::bad_block, kvstore_errc::too_large.
  [[nodiscard]] virtual caf::error put(const block_key& key, stored_block b) = 0;

  /// The block under `key`, verified; nullopt on a miss. A corrupt or
  /// unreadable block is a miss, never wrong bytes.
  [[nodiscard]] virtual std::optional<block_hit> get(const block_key& key) = 0;

  /// The leading blocks of `chain` (hashes in namespace `ns`, block 0
  /// first) the store holds, verified, as get() would return them one by
  /// one: up to the first miss (a block absent, unreadable or failing
  /// verification: a prefix is usable only up to its first gap), and while
  /// their payload stays within `max_bytes` (the first block is returned
  /// whatever its size). Callers bound the work with the span they pass.
  /// The default calls get() block by block; a store may read the chain
  /// in one pass.
  [[nodiscard]] virtual prefix_read get_prefix(uint64_t ns, std::span<const engine::kv_block_hash> chain,
                                               uint64_t max_bytes = UINT64_MAX);

  /// Longest prefix of `chain` (hashes in namespace `ns`, block 0 first)
  /// held by the store: walks the chain and stops at the first miss.
  [[nodiscard]] virtual prefix_match lookup(uint64_t ns, std::span<const engine::kv_block_hash> chain,
                                            lookup_mode mode = lookup_mode::promote) = 0;

  /// Whether any tier holds `key` (indexes only; bytes not checked).
  [[nodiscard]] virtual bool contains(const block_key& key) const = 0;

  /// Starts or stops recording store_events. Turning it on emits `stored`
  /// runs for everything held now (store_events.hpp). Default: off.
  virtual void record_events(bool on) = 0;

  /// The events since the last drain, in order per tier.
  [[nodiscard]] virtual std::vector<store_event> drain_events() = 0;

  /// Counters and levels now.
  [[nodiscard]] virtual store_stats stats() const = 0;

  /// How the disk tier was opened (reset or left off when it could not
  /// be; disk_recovery.hpp). Default: none (no disk tier).
  [[nodiscard]] virtual disk_open_report disk_report() const { return {}; }
};

} // namespace tessera::kvstore
