#pragma once
/// @file
/// The worker: one engine on its own thread (a detached actor) that plays
/// prefill, decode, or both (aggregated). Its tokens go to each request's
/// reply_to through the bridge.
///
/// A request, aggregated (decode_at empty):
///
///   generate(h) -> admitted; engine steps -> token chunks -> reply_to
///
/// Disaggregated (decode_at = worker D), this worker being P:
///
///   P: generate(h): prefill with the first token only (keep_kv); the first
///      token goes to reply_to
///   P -> D: handoff(h + KV export)        D: reserve blocks, reply kv_grant
///   P -> D's node: transfer (RMA puts of the blocks D needs)
///   P: release the blocks
///   P -> D: commit(kv_transfer_batch)     D: verify checksums, commit,
///                                            decode -> chunks -> reply_to
///   any failure: reply_to gets failed(request_cancel) and both sides free
///   the request's blocks
///
/// Each side is a plain state machine the worker feeds (handoff_sender.hpp
/// for P, handoff_receiver.hpp for D, each with its state diagram); so are
/// the prefix fetch (prefix_fetch.hpp) and the store offers
/// (store_offers.hpp). A stream resumed after its worker failed
/// (request_handoff::resume_output) starts as request_start.hpp says.
///
/// Before a request whose prompt's prefix the pool lacks enters the engine,
/// the worker fetches what the stores hold (kv_tiering.hpp): its node's
/// store first, then the peer store the router named; a miss, an error or
/// a timeout only means more to compute. generate replies once the request
/// is in the engine.
///
/// When a sequence finishes (or a prompt was prefilled for another
/// worker), the worker copies the blocks the node's store lacks out of its
/// pool and sends them to the store's writer (kvstore_writer.hpp), which
/// puts them; at most offer_max_bytes of offers are in flight per worker,
/// the rest is dropped and counted, so a slow store never stalls the batch.
///
/// Roles only say what the router may send; every worker can do every step.
///
/// A worker that fails (an exception out of its engine or a handler, or an
/// injected fault) first fails every request it holds (reply_to gets
/// failed(request_cancel) naming the worker and the cause), then exits with
/// the error; the node's supervisor (actors/node/worker_supervisor.hpp)
/// starts a new one in its place.
///
/// With a router configured, the worker sends it a worker_join and a load
/// heartbeat every heartbeat_interval, and after every engine step the
/// prefix-cache changes as wire::kv_event batches (per-worker event ids
/// counting up by one, so the router sees a lost batch) to the router.

#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/actor_types.hpp"
#include "actors/bridge/bridge_actor.hpp"
#include "actors/kvstore/kvstore_writer.hpp"
#include "actors/worker/fetch_cost.hpp"
#include "cluster/metrics.hpp"
#include "engine/engine.hpp"
#include "engine/model_units.hpp"
#include "kvstore/block_store.hpp"

namespace tessera::actors {

/// The priority of the router's health canaries (worker_health.hpp): the
/// engine's top one, so a canary runs ahead of every user request, and
/// generate takes it even when max_waiting requests wait already. Users'
/// requests run at 0.
inline constexpr int32_t canary_priority = std::numeric_limits<int32_t>::max();

/// The worker's interface (what other nodes may call through the bridge).
using worker_actor = caf::typed_actor<
  /// Starts h.request; tokens go to h.reply_to. With h.decode_at set, this
  /// worker prefills and hands over to that worker. Replies once the
  /// engine accepted the request. Errors: bad_request (naming the
  /// problem), overloaded (queue full; never for a canary_priority request).
  caf::replies_to<generate_atom, transport::wire::request_handoff>::with<void>,
  /// The decode side of a hand-off: reserves blocks for h (h.kv set) and
  /// replies where each block goes.
  caf::replies_to<handoff_atom, transport::wire::request_handoff>::with<transport::wire::kv_grant>,
  /// The decode side: the puts of a granted hand-off are done; verify,
  /// commit, and continue generating.
  caf::replies_to<commit_atom, transport::wire::kv_transfer_batch>::with<void>,
  /// Stops a request wherever it is here (queued, running, reserved).
  caf::reacts_to<cancel_atom, transport::wire::request_cancel>,
  /// Load and KV usage now.
  caf::replies_to<load_atom>::with<transport::wire::heartbeat>,
  /// Which of the asked requests this worker does not hold (queued,
  /// fetching its prefix, running, handing off or reserved): the frontend
  /// asks for streams that went quiet, whose request or last chunk may
  /// have been lost on the way.
  caf::replies_to<status_atom, transport::wire::request_status>::with<transport::wire::request_status_reply>,
  /// The router lost some of this worker's KV events: resend the whole
  /// view (a "cleared" event, then "stored" events with every cached hash).
  caf::reacts_to<kv_events_atom>>;

/// The worker as its own node sees it: the interface plus fault injection
/// (not reachable from other nodes).
using worker_local_actor = worker_actor::extend<
  /// Injects a fault when worker_config::fault_injection is set (else it
  /// is ignored with a warning): "crash" makes the worker fail as an
  /// exception from its engine would.
  caf::reacts_to<fault_atom, std::string>>;

/// How a worker runs.
struct worker_config {
  /// This node's id (as the bridge knows it). Required.
  std::string node;
  /// The worker's published name on its node, e.g. "worker-0". Required.
  std::string name;
  /// This node's bridge. Required.
  bridge_actor bridge;
  /// The engine's KV pool, registered through the bridge (hand-offs put
  /// blocks there).
  transport::region_id pool_region = 0;
  /// Most requests waiting in the engine before generate fails with
  /// overloaded. Default: 1024.
  size_t max_waiting = 1024;
  /// How long a hand-off step (grant, transfer, commit) may take.
  /// Default: 30 s.
  std::chrono::milliseconds handoff_timeout{30000};
  /// Where this worker's KV events (prefix-cache hashes stored / removed)
  /// and load reports go; empty: nowhere (nothing is recorded).
  transport::wire::actor_address router;
  /// Further routers (a cluster with several, actors/node/router_client.hpp):
  /// each gets the same joins, load reports and KV events as `router`, so
  /// each has the whole prefix index. Default: none.
  std::vector<transport::wire::actor_address> more_routers;
  /// The worker's id in KV events and load reports: unique in the cluster
  /// and new for every start of a worker (a restarted worker is a new one
  /// to the router).
  uint64_t worker_id = 0;
  /// What the worker tells the router it does: prefill, decode, or both.
  std::vector<transport::wire::node_role> roles{transport::wire::node_role::prefill,
                                                transport::wire::node_role::decode};
  /// How often it sends the router its join and load (the router's
  /// health_options::heartbeat_timeout, 1.2 s, allows three missed).
  /// Default: 300 ms.
  std::chrono::milliseconds heartbeat_interval{300};
  /// The process's metrics (KV blocks used, requests aborted, KV bytes and
  /// seconds transferred, each labelled worker="<name>"); null: none.
  std::shared_ptr<cluster::metrics_registry> metrics;
  /// Obey fault_atom (chaos drills). Default: false.
  bool fault_injection = false;
  /// The node's kv store (kv_tiering.hpp): a prompt it prefilled for
  /// another worker, and a sequence that finishes here, are offered to it
  /// through store_writer (the engine thread only checks the store's index
  /// and copies the blocks it lacks). Null: none.
  std::shared_ptr<kvstore::block_store> store;
  /// The writer of that store (actors/kvstore/kvstore_writer.hpp), which
  /// puts the offered blocks on its own thread. Empty: nothing is offered.
  kvstore_writer_actor store_writer;
  /// Most payload bytes of this worker's offers the writer has not
  /// answered yet: blocks of an offer beyond that are dropped, not queued,
  /// and counted (tessera_kvstore_offer_dropped_blocks_total); 0 drops
  /// every offer. Default: 64 MiB.
  uint64_t offer_max_bytes = uint64_t{64} << 20;
  /// How long the worker waits for the writer's answer to an offer before
  /// it counts the offer's bytes as returned (the writer then drops it
  /// unwritten if it has not reached it). Default: 30 s.
  std::chrono::milliseconds offer_timeout{30000};
  /// The node's kv store actor (actors/kvstore): a prompt this worker
  /// computes first takes the cached prefix its pool lacks from there, then
  /// from the peer store its request names (request_handoff::kv_source).
  /// Empty: no local store. A worker that uses another node's store
  /// (remote_store) names that node's kv store actor here.
  transport::wire::actor_address store_at;
  /// The intake of a kv store on another node (actors/kvstore/
  /// kvstore_intake.hpp) that this worker offers its finished sequences to
  /// over the bridge, when its node keeps no store (`store` null); within
  /// offer_max_bytes as with a local store, each offer at most 8 MiB.
  /// Empty: none.
  transport::wire::actor_address remote_store;
  /// Whether a prefix fetch pays and how long it may take
  /// (actors/worker/fetch_cost.hpp): the deadline follows the prefix's
  /// size and the compute it saves, between min and max_deadline.
  fetch_cost_options fetch_cost;
  /// Most payload bytes one fetch reply may carry; the worker asks for at
  /// most min(this, 4 MiB) per reply (worker_fetch.cpp), so a long prefix
  /// comes in chunks imported as they land. Default: 16 MiB.
  uint64_t fetch_max_bytes = uint64_t{16} << 20;
  /// The model's units for this engine: its heartbeats report outstanding
  /// and served work in them (the router's load term). Default: unfitted.
  engine::model_units units;
  /// The commit's answer may take commit_base plus the time to verify its
  /// bytes at commit_bytes_per_second, at most handoff_timeout: the decode
  /// side checks and imports blocks already in its pool, so a commit (or
  /// its answer) lost on the way is noticed in seconds, the hand-off fails
  /// and its stream moves, instead of waiting out handoff_timeout.
  /// Defaults: 2 s, 200 MB/s.
  std::chrono::milliseconds commit_base{2000};
  double commit_bytes_per_second = 200e6;
};

/// Spawns a worker on its own thread, driving `eng` (which it shares with
/// the caller: the engine's KV pool may stay registered with the transport
/// after the worker is gone).
[[nodiscard]] worker_local_actor spawn_worker(caf::actor_system& sys, std::shared_ptr<engine::engine> eng,
                                              worker_config cfg);

} // namespace tessera::actors
