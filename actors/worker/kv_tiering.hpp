#pragma once
/// @file
/// A worker's use of the kv stores (kvstore/, actors/kvstore/): before
/// computing a prompt it fetches the cached prefix its own pool lacks from
/// its node's store, then from a peer node's store the router named
/// (request_handoff::kv_source); when a sequence finishes it offers the
/// sequence's full blocks to its node's store.
///
/// Fetches are messages to the stores' actors (kv_fetch_request ->
/// kv_fetch_reply), so the engine thread never waits on a store; what they
/// bring is checked here block by block (the chain's hash, the engine's
/// layout, a full block, the checksum of the bytes as they arrived) before
/// it enters the pool, so no wrong KV ever reaches the engine. Offers only
/// copy blocks on the engine thread (copy_offer: engine::read_cached_block
/// of the blocks the store's index lacks); the node's kv store writer
/// (actors/kvstore/kvstore_writer.hpp) puts them, so a store that waits for
/// its disk never stalls a worker's batch.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "actors/kvstore/kvstore_writer.hpp"
#include "engine/engine.hpp"
#include "kvstore/block_store.hpp"
#include "transport/wire/messages.hpp"

namespace tessera::actors {

/// What of a prompt a fetch could bring: the hashes of its full blocks
/// before its last token (which is always computed, so its block is never
/// fetched) and how many leading ones the pool caches now.
struct prefix_need {
  std::vector<engine::kv_block_hash> hashes;
  size_t cached = 0;
  [[nodiscard]] bool satisfied() const { return cached >= hashes.size(); }
};

/// The prefix_need of `prompt` with `cache_salt` in `eng`.
[[nodiscard]] prefix_need prefix_need_of(const engine::engine& eng, std::span<const int32_t> prompt,
                                         std::string_view cache_salt);

/// What insert_fetched did.
struct fetch_result {
  /// Leading blocks of the chain the pool caches afterwards.
  size_t cached = 0;
  /// Blocks of the reply refused (wrong hash, layout, size, token count or
  /// checksum): the first refusal ends the insert.
  size_t refused = 0;
};

/// Caches the blocks of `reply` (the answer to a fetch of
/// hashes[first..]) in `eng`'s pool, in order, checking each first
/// (see the file comment); stops at the first refused block or when the
/// pool has no free block.
[[nodiscard]] fetch_result insert_fetched(engine::engine& eng, std::span<const engine::kv_block_hash> hashes,
                                          size_t first, const transport::wire::kv_fetch_reply& reply);

/// What copy_offer copied.
struct offer_copy {
  /// The blocks copied, for the node's kv store writer.
  kv_offer offer;
  /// Blocks the store lacks that did not fit in the bytes allowed (not
  /// copied).
  size_t dropped = 0;
};

/// Copies out of `eng`'s pool the full blocks of a finished sequence
/// (`tokens`: prompt then output; the last token has no KV) that `store`
/// lacks, in chain order, up to the first block the pool no longer holds:
/// as many leading ones as fit in `max_bytes` of payload (a prefix lookup
/// only reaches a block through the ones before it); the rest are counted
/// in `dropped`. On the engine thread: an index check (block_store::contains)
/// and a copy per block, never a put.
[[nodiscard]] offer_copy copy_offer(const engine::engine& eng, const kvstore::block_store& store,
                                    std::span<const int32_t> tokens, std::string_view cache_salt,
                                    uint64_t max_bytes);

/// copy_offer without a bound, then put_offer into `store`, on the calling
/// thread. Returns the blocks stored.
size_t offer_sequence(engine::engine& eng, kvstore::block_store& store, std::span<const int32_t> tokens,
                      std::string_view cache_salt);

} // namespace tessera::actors
