#pragma once
/// @file
/// A request's KV cache and generation state, exported by one engine and
/// imported by another (prefill -> decode hand-off, migration). Plain data:
/// the transport layer serialises it.
///
/// Two ways to move the blocks:
///
/// - Copying: export_request fills kv_export::data; import_request writes
///   it into fresh blocks. Simple; the bytes pass through a buffer twice.
/// - Zero-copy (engine.hpp): the blocks move straight from the exporter's
///   KV pool into the importer's (backend::kv_pool_memory, one-sided RMA).
///   import_request is this hand-off with the data written by write_block.
///
/// Zero-copy hand-off, exporter P (prefill) to importer D (decode):
///
///   P: add_request(keep_kv) ... finishes; its blocks stay held
///   P: export_request_blocks(id) -> kv_export_blocks {meta, P's block ids}
///                     |  meta (no data) travels to D
///                     v
///   D: reserve_import(r, meta) -> kv_import_plan {D's block ids, needs_data}
///                     |  the plan travels back to P
///                     v
///   P: for each i with needs_data[i], put P's block blocks[i] into D's
///      block plan.blocks[i] (RMA); once every put completed: release_request
///                     |  "done" (or "failed") travels to D
///                     v
///   D: commit_import(id)   the request becomes schedulable, or
///   D: cancel_import(id)   the transfer failed or P died: blocks freed
///
/// The importer's request in that hand-off:
///
///   reserve_import --> reserved --(data written)--> commit_import --> waiting
///                         |                                        (engine.hpp)
///                         +----cancel_import / abort----> gone, blocks freed
///
/// While reserved, the request holds its blocks (they count as used), is
/// never scheduled, preempted or evicted, and its freshly allocated blocks
/// are not in the prefix cache, so nothing reads them before commit.
/// Cancel only once no write into its blocks can still land: a freed block
/// is handed to the next request that needs one.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/backend.hpp"
#include "engine/block_hash.hpp"

namespace tessera::engine {

/// KV blocks plus the state needed to continue generating.
struct kv_export {
  /// backend::model_fingerprint of the exporter.
  uint64_t model_fingerprint = 0;
  kv_layout layout;
  /// Prompt followed by the tokens generated so far.
  std::vector<int32_t> tokens;
  int32_t prompt_len = 0;
  /// Tokens whose K/V are exported (a prefix of `tokens`).
  int32_t num_computed = 0;
  /// Sampling seed in use (so seeded sampling continues identically).
  uint64_t seed = 0;
  /// Chained hashes of the full computed blocks (block_hash.hpp).
  std::vector<kv_block_hash> block_hashes;
  /// ceil(num_computed / block_tokens) blocks of layout.block_bytes() each,
  /// in order (export_request). Empty in a zero-copy hand-off, where the
  /// blocks stay in the exporter's pool (export_request_blocks).
  std::vector<std::byte> data;
};

/// An export whose blocks stay where they are, in the exporter's KV pool
/// (engine::export_request_blocks).
struct kv_export_blocks {
  /// Everything but the bytes: meta.data is empty.
  kv_export meta;
  /// The exporter's blocks holding the exported KV, in order: block i holds
  /// positions [i*block_tokens, (i+1)*block_tokens) of meta.tokens.
  /// ceil(meta.num_computed / block_tokens) of them.
  std::vector<kv_block_id> blocks;
};

/// Where an importer wants an export's blocks (engine::reserve_import).
/// One entry per exported block, in order.
struct kv_import_plan {
  uint64_t request_id = 0;
  /// The importer's block that receives exported block i.
  std::vector<kv_block_id> blocks;
  /// 1 when exported block i's bytes must be written into blocks[i] before
  /// commit_import; 0 when the importer already holds the same content (a
  /// prefix-cache hit on a full block), so the sender skips it.
  std::vector<uint8_t> needs_data;
};

} // namespace tessera::engine
