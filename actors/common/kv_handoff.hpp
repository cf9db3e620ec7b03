#pragma once
/// @file
/// The KV hand-off between a prefill engine (P) and a decode engine (D) in
/// different processes, as plain functions over engine, wire and transport
/// types (no actors): what each side computes at each step of the
/// protocol in engine/kv_export.hpp. The workers call these; the bridge
/// carries the messages and the blocks.
///
///   P: export_request_blocks -> make_handoff ----request_handoff---->  D
///   D: grant_handoff (reserve_import)         <------kv_grant--------
///   P: plan_puts -> transport transfer (RMA puts into D's pool, flushed)
///   P: ----------------kv_transfer_batch (offsets, checksums)------->  D
///   D: commit_handoff: every block's checksum verified in D's pool, then
///      commit_import; any mismatch: cancel_import and an error (the
///      request is recomputed, never decoded from wrong KV)

#include <cstdint>

#include <caf/expected.hpp>

#include "engine/engine.hpp"
#include "engine/kv_export.hpp"
#include "transport/transport.hpp"
#include "transport/wire/messages.hpp"

namespace tessera::actors {

/// P: the hand-off of held request `r` whose KV is `src`.
[[nodiscard]] transport::wire::request_handoff make_handoff(const engine::request& r,
                                                            const engine::kv_export_blocks& src);

/// D: reserves blocks for `h` in `eng` and answers where each goes, as byte
/// offsets in `pool_region` (eng's kv_pool_memory registered with the
/// transport). Errors: `h` carries no KV (bad_request), eng's pool is not
/// host memory (kv_mismatch), or reserve_import's (kv_mismatch, ...).
[[nodiscard]] caf::expected<transport::wire::kv_grant>
grant_handoff(engine::engine& eng, const transport::wire::request_handoff& h,
              transport::region_id pool_region);

/// What P sends after a grant: the puts and their description.
struct kv_put_plan {
  /// The blocks that need data, P's pool to D's region.
  transport::transfer_batch batch;
  /// Every exported block (those D already had too, so D can check the
  /// whole grant), with the XXH3 checksum of the bytes P sent.
  transport::wire::kv_transfer_batch descriptor;
};

/// P: the puts for `grant` from `eng`'s pool, registered as `src_region`.
/// Errors (kv_mismatch): the grant does not match `src` (block count,
/// request id), or eng's pool is not host memory.
[[nodiscard]] caf::expected<kv_put_plan> plan_puts(const engine::engine& eng,
                                                   const engine::kv_export_blocks& src,
                                                   transport::region_id src_region,
                                                   const transport::wire::kv_grant& grant,
                                                   uint64_t batch_id);

/// D: after P's puts completed, checks `d` against the reservation of
/// request d.request_id (each block's destination must be the block it was
/// granted) and every transferred block's checksum in eng's pool, then
/// commits the import. On any mismatch the reservation is cancelled and an
/// error (kv_mismatch) names the block. Blocks D already held (no data
/// needed) are not checksummed: they are D's own content.
[[nodiscard]] caf::error commit_handoff(engine::engine& eng, const transport::wire::kv_grant& grant,
                                        const transport::wire::kv_transfer_batch& d);

} // namespace tessera::actors
