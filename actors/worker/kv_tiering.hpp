#pragma once
/// @file
/// A worker's use of its node's kv store (kvstore/, shared and thread-safe):
/// before computing a prompt it fetches the cached prefix its own pool
/// lacks; when a sequence finishes it offers the sequence's full blocks.
/// Both run on the worker's engine thread and copy whole blocks
/// (engine::read_cached_block / extend_cached_prefix); every block read from
/// the store was verified against its checksum there, and one whose layout
/// is not the engine's is not used.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "engine/engine.hpp"
#include "kvstore/block_store.hpp"

namespace tessera::actors {

/// Blocks after what `eng`'s pool holds of `prompt`'s prefix, read from
/// `store` in order until the first miss and put into the pool as cached
/// blocks (the prompt's last token is always computed, so its block is
/// never fetched). Returns the blocks fetched.
size_t fetch_prefix(engine::engine& eng, kvstore::block_store& store, std::span<const int32_t> prompt,
                    std::string_view cache_salt);

/// Offers `store` the full blocks of a finished sequence (`tokens`: prompt
/// then output; the last token has no KV) that `eng`'s pool still caches
/// and the store lacks, in order, stopping at the first the pool no longer
/// holds. Returns the blocks offered.
size_t offer_sequence(engine::engine& eng, kvstore::block_store& store, std::span<const int32_t> tokens,
                      std::string_view cache_salt);

} // namespace tessera::actors
