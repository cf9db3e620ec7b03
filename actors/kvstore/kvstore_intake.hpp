#pragma once
/// @file
/// The door of a kv store for workers on other nodes: a node with the role
/// kvstore (and no workers of its own) publishes it as "kvstore-intake", and
/// workers whose node has no store (node key `store` in the cluster TOML)
/// send it the blocks of their finished sequences over the bridge, by value,
/// as the store's fetches bring them back (one wire message shape both ways,
/// wire::kv_fetch_reply: the layout, then per block its chained hash, token
/// count, checksum and bytes):
///
///   worker (other node)                 intake (store node)       writer
///     offer(kv_fetch_reply) --bridge-->  check every block      --> put each
///                                        (offer_from_wire)          block
///     <------------- void (stored) ----  <------------------------  stored n
///     <------------- error ------------  refused / busy / writer failed
///
/// The intake checks what arrives before anything reaches the store: the
/// layout must be the store's own, every block full, sized as the layout
/// says and matching its checksum; one bad block refuses the whole offer.
/// A block's hash chain starts from a root keyed by the cluster key and the
/// namespace (engine/block_hash.hpp), so blocks are kept in the store's own
/// namespace: a chain hashed in another namespace is unreachable there.
/// At most max_bytes_in_flight of offers wait for the writer; beyond that an
/// offer is answered "busy" at once and dropped (its worker keeps the blocks
/// in its pool), so a slow disk never queues unbounded memory here.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <caf/all.hpp>

#include "actors/actor_types.hpp"
#include "actors/kvstore/kvstore_writer.hpp"
#include "cluster/metrics.hpp"
#include "transport/wire/messages.hpp"

namespace tessera::actors {

/// What workers on other nodes may call.
using kvstore_intake_actor = caf::typed_actor<
  /// Stores the offered blocks (in chain order) through the store's
  /// writer; replies once they are written. Errors: invalid_argument
  /// naming what is wrong with the offer (nothing stored), "busy" (too
  /// much waiting for the writer: dropped), the writer's.
  caf::replies_to<offer_atom, transport::wire::kv_fetch_reply>::with<void>>;

/// The name the intake is published under on its node.
inline constexpr const char* kvstore_intake_name = "kvstore-intake";

/// How the intake runs.
struct kvstore_intake_config {
  /// The store's writer (its node's). Required.
  kvstore_writer_actor writer;
  /// The store's namespace (engine::hash_seed of the cluster's model) and
  /// the block layout its workers use: offers of another layout are refused.
  uint64_t ns = 0;
  engine::kv_layout layout;
  /// Most payload bytes of offers waiting for the writer. Default: 256 MiB.
  uint64_t max_bytes_in_flight = uint64_t{256} << 20;
  /// How long the writer may take for one offer. Default: 10 s.
  std::chrono::milliseconds write_timeout{10000};
  /// Where tessera_kvstore_remote_offer_blocks_total{result} goes; null:
  /// nowhere.
  std::shared_ptr<cluster::metrics_registry> metrics;
};

/// The offer `m` as the writer takes it, in namespace `ns`, after checking
/// every block against `layout` (see the file comment). Errors
/// (caf::sec::invalid_argument) name the first problem.
[[nodiscard]] caf::expected<kv_offer> offer_from_wire(const transport::wire::kv_fetch_reply& m, uint64_t ns,
                                                      const engine::kv_layout& layout);

/// Spawns the intake.
[[nodiscard]] kvstore_intake_actor spawn_kvstore_intake(caf::actor_system& sys, kvstore_intake_config cfg);

} // namespace tessera::actors
