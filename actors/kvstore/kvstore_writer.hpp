#pragma once
/// @file
/// The writer of a node's kv store: the actor, on its own thread, that puts
/// into the store the blocks the node's workers offer (sequences that
/// finished, prompts prefilled for another worker). A put may wait on the
/// store (an evicting put waits up to tiered_store_options::spill_wait per
/// block for spill-queue space when the disk falls behind); it waits here,
/// never on a worker's engine thread:
///
///   worker (engine thread)                        writer (own thread)
///     copy the blocks the store lacks out of
///     the pool (kv_tiering.hpp: copy_offer)
///     in flight += bytes --- offer(kv_offer) ---> put each block, in order
///     in flight -= bytes <-- blocks stored ------
///                        <-- error / timeout ----  (in flight -= bytes too)
///
/// A worker bounds the bytes of its offers in flight
/// (worker_config::offer_max_bytes) and drops what does not fit, so the
/// writer's mailbox holds at most that much per worker.
///
/// Offers stay inside a process: they carry the pool's bytes by value, not
/// a wire message, and a node's workers share its process with its store.
/// So the writer is not published on the bridge; a node spawns it when it
/// opens its store, before its workers (which are given its handle) and
/// before the kv store actor (kvstore_actor.hpp, which needs a worker's
/// engine to name the store's namespace).

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include <caf/all.hpp>

#include "actors/actor_types.hpp"
#include "kvstore/block_store.hpp"

namespace tessera::actors {

/// One block of an offer: its chained hash and the block (the bytes copied
/// out of the engine's pool, with their layout, token count and checksum).
struct offered_block {
  engine::kv_block_hash hash;
  kvstore::stored_block block;
};

/// Blocks a worker gives its node's store, in chain order.
struct kv_offer {
  /// The namespace of the blocks (the engine's hash_seed).
  uint64_t ns = 0;
  std::vector<offered_block> blocks;
  /// When the offering worker stops waiting for the answer and counts the
  /// bytes as returned: the writer drops an offer it reaches later,
  /// unwritten, so a writer that fell behind catches up at once. Default:
  /// never.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();

  /// Payload bytes of the blocks.
  [[nodiscard]] uint64_t payload_bytes() const;
};

} // namespace tessera::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tessera::actors::kv_offer)

namespace tessera::actors {

/// The writer's interface (local to its node).
using kvstore_writer_actor = caf::typed_actor<
  /// Puts o's blocks into the store in order (put_offer); replies with the
  /// blocks stored. Errors: caf::sec::request_timeout when o's deadline had
  /// passed (nothing was written).
  caf::replies_to<offer_atom, kv_offer>::with<uint64_t>,
  /// Stops once the offers received before are written (the node closes
  /// its store after that).
  caf::reacts_to<stop_atom>,
  /// Stops by about `until` (system clock): writes the offers received
  /// before until then and answers the rest unwritten (caf::sec::
  /// request_timeout, "the kv store is stopping"; counted in one log line),
  /// then quits. Send it with high priority (message_priority::high) so it
  /// overtakes a backlog: a node stopping on a host that fell behind would
  /// otherwise write up to offer_timeout's worth of queued offers first,
  /// past its drain timeout (issue 14).
  caf::reacts_to<stop_atom, caf::timestamp>>;

/// Puts the blocks of `o` into `store` in order, skipping those it holds
/// already; stops at the first block the store refuses (logged). Returns
/// the blocks stored. May wait (spill-queue backpressure): not for an
/// engine thread.
uint64_t put_offer(kvstore::block_store& store, const kv_offer& o);

/// Spawns a writer on its own thread. It holds the store weakly: once the
/// node has closed the store, an offer stores nothing.
[[nodiscard]] kvstore_writer_actor spawn_kvstore_writer(caf::actor_system& sys,
                                                        std::weak_ptr<kvstore::block_store> store);

} // namespace tessera::actors
