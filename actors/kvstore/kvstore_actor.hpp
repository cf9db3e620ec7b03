#pragma once
/// @file
/// The kv store actor of a node. The node's tiered block store (kvstore/)
/// is shared with the node's workers, which check its index (it is
/// thread-safe) and offer it finished sequences through its writer
/// (kvstore_writer.hpp), which puts them on its own thread. Blocks come
/// out through this actor, for the node's own workers and for other nodes'
/// alike (through the bridge):
///
///   fetch(kv_fetch_request) --> the leading blocks of the chain the store
///                               holds, verified, by value (kv_fetch_reply)
///
/// so a worker never waits on the store on its engine thread. Fetches run
/// on `readers` actors of their own threads (a read may wait on disk),
/// taken in turn, so several workers' fetches proceed at once. A fetch
/// still queued at its reader when its asker stopped waiting for it
/// (kv_fetch_request::wait_ms) is answered empty without a read
/// (tessera_kvstore_fetch_expired_total). Where a fetch's time goes, the
/// wait for a reader and the read, is in
/// tessera_kvstore_fetch_stage_seconds{stage=queued|read}. The actor also
/// makes the store known:
///
///   every event_interval:      store events --> kv_event (g2 host / g3 disk)
///                                                --> router (prefix index)
///   every heartbeat_interval:  worker_join (role kvstore) + heartbeat
///                              (kv_usage per tier) --> router;
///                              store counters --> metrics
///
/// The router credits each worker with the blocks its node's store holds
/// (router_options::host_tier_credit). If the store dropped events (its
/// log overflowed), the actor sends `cleared` and re-announces everything
/// the store holds.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <caf/all.hpp>

#include "actors/actor_types.hpp"
#include "actors/bridge/bridge_actor.hpp"
#include "cluster/metrics.hpp"
#include "kvstore/block_store.hpp"

namespace tessera::actors {

/// What other nodes may call on a kv store actor.
using kvstore_actor = caf::typed_actor<
  /// The leading blocks of r's chain the store holds (read_chain).
  caf::replies_to<fetch_atom, transport::wire::kv_fetch_request>::with<transport::wire::kv_fetch_reply>,
  /// Its tiers' use now.
  caf::replies_to<load_atom>::with<transport::wire::heartbeat>,
  /// The router lost some of this store's KV events: announce everything
  /// again ("cleared", then every block held), so its index recovers.
  caf::reacts_to<kv_events_atom>>;

/// How a kv store actor runs.
struct kvstore_config {
  /// This node's id and the actor's published name. Required / "kvstore".
  std::string node;
  std::string name = "kvstore";
  bridge_actor bridge;
  /// The node's store (shared with its workers). Required.
  std::shared_ptr<kvstore::block_store> store;
  /// Where joins, heartbeats and KV events go; empty: nowhere.
  transport::wire::actor_address router;
  /// Further routers (a cluster with several): each gets the same. Default:
  /// none.
  std::vector<transport::wire::actor_address> more_routers;
  /// The store's id in the router's index: unique in the cluster, new
  /// for every start.
  uint64_t store_id = 0;
  /// The namespace of the node's engines (engine::hash_seed), the model
  /// fingerprint and block size: the store announces only blocks of this
  /// namespace.
  uint64_t hash_seed = 0;
  uint64_t model_fingerprint = 0;
  int32_t block_tokens = 16;
  /// Actors (threads) reading blocks for fetches. Default: 4.
  size_t readers = 4;
  /// Fetches in flight at most (queued at the readers or being read); one
  /// more is answered at once with an empty `busy` reply, so its worker
  /// computes instead of waiting behind the queue. Default: 16.
  size_t max_fetches_in_flight = 16;
  /// How long one read of a fetch may take before it is answered empty
  /// (the fetch's wait_ms where that is shorter). Default: 30 s.
  std::chrono::milliseconds read_timeout{30000};
  std::chrono::milliseconds event_interval{100};
  std::chrono::milliseconds heartbeat_interval{1000};
  /// Where tessera_kvstore_* series go; null: nowhere.
  std::shared_ptr<cluster::metrics_registry> metrics;
};

/// The leading blocks of `r.block_hashes` that `store` holds in namespace
/// r.ns, verified, in order, read in one pass (block_store::get_prefix):
/// up to the first miss, the first block of
/// another layout, or r.max_bytes of payload (then `more` is set; the
/// first block is returned even when it alone is larger).
[[nodiscard]] transport::wire::kv_fetch_reply read_chain(kvstore::block_store& store,
                                                         const transport::wire::kv_fetch_request& r);

/// Spawns the actor (it turns the store's event recording on).
[[nodiscard]] kvstore_actor spawn_kvstore(caf::actor_system& sys, kvstore_config cfg);

} // namespace tessera::actors
