#pragma once
/// @file
/// The router actor: keeps the workers (from their joins and heartbeats),
/// the global prefix index (from their KV events) and a routing policy
/// (router_policy.hpp), and tells the frontend where each request goes.
///
/// Workers reach it through the bridge from any node (router_actor); the
/// frontend, in the same process, also asks it to route (router_local_actor).
///
///   worker --join--> router          (again after a restart: replaces it)
///   worker --kv_events / heartbeat--> router   (a worker silent for
///                                    heartbeat_timeout is unhealthy)
///   router --generate(canary)--> worker --token / failed--> router
///                                    (about once a second per worker, at
///                                    canary_priority; worker_health.hpp)
///   frontend --route(query)--> router --answer--> frontend
///                                    (held while no decode worker has KV
///                                    room for it: kv_admission.hpp)
///   frontend --finished(id)--> router          (its load estimate drops)
///   frontend --workers--> router --each worker's state and reason-->
///                                    (GET /health, /ready)

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/actor_types.hpp"
#include "actors/router/autoscale.hpp"
#include "actors/router/kv_admission.hpp"
#include "actors/router/prefix_index.hpp"
#include "actors/router/route_types.hpp"
#include "actors/router/worker_health.hpp"
#include "transport/wire/messages.hpp"

namespace tessera::cluster {
class metrics_registry;
} // namespace tessera::cluster

namespace tessera::actors {

/// What the router takes from workers (through the bridge).
using router_actor = caf::typed_actor<
  /// A worker announces itself (replaces an earlier worker of that id).
  caf::reacts_to<join_atom, transport::wire::worker_join>,
  /// A batch of a worker's prefix-cache changes.
  caf::reacts_to<kv_events_atom, transport::wire::kv_event>,
  /// A worker's load; heartbeat.node_id is the worker's "node/actor".
  caf::reacts_to<heartbeat_atom, transport::wire::heartbeat>,
  /// The token of a health canary (chunk.id is the canary's id): passed.
  caf::reacts_to<token_atom, transport::wire::token_chunk>,
  /// A health canary failed on its worker (c.reason says why).
  caf::reacts_to<failed_atom, transport::wire::request_cancel>>;

/// A request to route, as the frontend has it.
struct route_query {
  uint64_t request_id = 0;
  std::vector<int32_t> prompt;
  std::string cache_salt;
  std::string session_id;
  /// Most tokens it may generate (for the load estimate).
  int32_t max_tokens = 0;
  /// Most time the router may hold it while no decode worker has KV room
  /// (kv_admission.hpp), if shorter than its kv_admission.max_wait: a
  /// caller with a short timeout of its own (a router client, a remote
  /// frontend through the gateway) sets it. Negative: the router's.
  std::chrono::milliseconds max_wait{-1};
};

/// Where the request goes.
struct route_answer {
  /// Where the prompt is computed; equals decode when not disaggregated.
  transport::wire::actor_address prefill;
  transport::wire::actor_address decode;
  bool disaggregated = false;
  int32_t cached_blocks = 0;
  std::string reason;
  /// A kv store on another node holding the first kv_source_blocks blocks
  /// of the prompt, more than the prefill worker can use locally
  /// (route_decision::fetch_store); empty and 0: none.
  transport::wire::actor_address kv_source;
  int32_t kv_source_blocks = 0;
};

/// A worker as the router sees it (for /health, /ready, /metrics and
/// tests); load.healthy equals status.healthy, as of the query.
struct router_worker_view {
  transport::wire::worker_join join;
  worker_load load;
  worker_status status;
  /// The router routes new requests to this worker although it is
  /// unhealthy: it is only late and no worker that can decode is healthy
  /// (panic routing, router_options::panic_routing). A stream on it has
  /// nowhere better to go.
  bool panic_target = false;
};

} // namespace tessera::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tessera::actors::route_query)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tessera::actors::route_answer)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<tessera::actors::router_worker_view>)

namespace tessera::actors {

/// The frontend's view of its (local) router.
using router_local_actor = router_actor::extend<
  /// Picks the workers for a request; while no worker that can decode is
  /// healthy, among the late ones too (panic routing, counted in
  /// tessera_router_panic_routes_total). Errors (router_errc):
  /// no_healthy_worker (no worker joined, or none can take it: every one
  /// down, failed, drained, or full).
  caf::replies_to<route_atom, route_query>::with<route_answer>,
  /// The request's prompt is prefilled (its first token arrived): its
  /// prompt tokens leave the prefill worker's queue estimate.
  caf::reacts_to<prefilled_atom, uint64_t>,
  /// The request ended (finished, failed or cancelled).
  caf::reacts_to<finished_atom, uint64_t>,
  /// The workers and their load estimates.
  caf::replies_to<workers_atom>::with<std::vector<router_worker_view>>,
  /// Node `node` failed (from the bridge): its workers are unhealthy until
  /// they report again.
  caf::reacts_to<node_down_atom, std::string>,
  /// Node `node` left the cluster (membership through etcd: its lease
  /// ended): its workers and kv store are forgotten, not just unhealthy;
  /// if it comes back its workers join again.
  caf::reacts_to<forget_atom, std::string>,
  /// An operator drains node `node` (true: its workers get no new request
  /// and show as unhealthy, "drained by an operator") or takes it back
  /// (false). Answers how many workers the router knows on that node.
  caf::replies_to<drain_atom, std::string, bool>::with<int32_t>>;

/// How the router runs.
struct router_config {
  /// make_router_policy's name: kv, round-robin, random, least-loaded.
  std::string policy = "kv";
  router_options options;
  /// When a worker counts as unhealthy (heartbeat timeout) and how its
  /// canaries run (worker_health.hpp).
  health_options health;
  /// This node's id: canaries' tokens come back to {node, name} through
  /// the bridge. Empty: no canaries (heartbeats and node_down only).
  std::string node;
  /// The router's published name on its node. Default: "router".
  std::string name = "router";
  /// A kv store without a heartbeat for this long is not offered to the
  /// policy. Default: 5 s.
  std::chrono::milliseconds store_timeout{5000};
  /// Nodes whose workers use another node's kv store (the cluster TOML's
  /// `store`): worker node -> store node. Such a worker is credited with
  /// that store's blocks as with its own node's, and fetches them from
  /// there. Default: none (each node's workers use their node's store).
  std::map<std::string, std::string> store_nodes;
  /// Where the autoscaling signal goes (autoscale.hpp): units demanded and
  /// served per second and the recommended workers, per role; the TTFT and
  /// ITL histograms the frontend records there are read for the SLO test;
  /// and the router's counter tessera_router_panic_routes_total.
  /// Null: no signal, no counter.
  std::shared_ptr<cluster::metrics_registry> metrics;
  /// The signal's SLOs and capacity.
  autoscale_options autoscale;
  /// The node's bridge: how the router asks a worker whose KV events it
  /// lost to resend its view (kv_events_atom). Unset: the gap is only
  /// logged and the view stays stale until the worker clears its cache.
  caf::actor bridge;
  /// Key of the block-hash chain: the workers' engines' key
  /// (engine::engine_config::hash_key), or no prompt matches their caches.
  /// Default: the process's random key.
  engine::kv_hash_key hash_key = engine::process_kv_hash_key();
  /// Admission by the decode workers' KV memory (kv_admission.hpp): a
  /// request waits at the router (first come, first served, at most
  /// kv_admission.max_wait) while no decode worker's pool has room for it.
  kv_admission_options kv_admission;
  /// The prefix index's bounds (prefix_index.hpp): most (block, worker or
  /// store) entries kept. /metrics: tessera_router_index_entries and
  /// tessera_router_index_evicted_entries_total; the first eviction is
  /// logged.
  prefix_index_options index;
};

/// Spawns a router; fails if the policy name is unknown (the error names
/// the choices).
[[nodiscard]] caf::expected<router_local_actor> spawn_router(caf::actor_system& sys,
                                                             router_config cfg);

} // namespace tessera::actors
