#pragma once
/// @file
/// A router reached from other nodes: in a cluster with several routers,
/// a frontend asks any of them where a request goes, also one on another
/// node. The router's own interface (router_local_actor) takes in-process
/// types; the gateway, published beside it as "router-api", takes their
/// wire forms (transport/wire: route_call, route_reply, worker_views) and
/// asks the local router.
///
///   frontend --router_client--> bridge ... bridge --> gateway --> router
///
/// Also the conversions between the two forms (router_client uses them).

#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/router/router_actor.hpp"
#include "transport/wire/messages.hpp"

namespace tessera::actors {

/// What a router's gateway takes from other nodes (through the bridge).
using router_api_actor = caf::typed_actor<
  /// Where a request goes (router_local_actor's route). Errors: the
  /// router's (router_errc::no_healthy_worker).
  caf::replies_to<route_atom, transport::wire::route_call>::with<transport::wire::route_reply>,
  /// These requests are prefilled (router_local_actor's prefilled).
  caf::reacts_to<prefilled_atom, transport::wire::request_status>,
  /// These requests ended (router_local_actor's finished).
  caf::reacts_to<finished_atom, transport::wire::request_status>,
  /// The router's workers and their state.
  caf::replies_to<workers_atom>::with<transport::wire::worker_views>>;

/// The gateway's published name on a router's node.
inline constexpr const char* router_api_name = "router-api";

/// Spawns the gateway in front of `router` (a router on this node).
[[nodiscard]] router_api_actor spawn_router_gateway(caf::actor_system& sys, router_local_actor router);

/// Most time a remote caller may have its route call held for KV room
/// (route_call::max_wait_ms): half the time the gateway waits for its
/// router.
inline constexpr std::chrono::milliseconds max_remote_route_wait{5000};

/// The wire forms and back. A route_reply's reason is cut to the wire's
/// name limit (it is for logs). A route_call carries the query's max_wait
/// (none: 0); from_wire holds it to max_remote_route_wait, and a call
/// without one gets 1 s.
[[nodiscard]] transport::wire::route_call to_wire(const route_query& q);
[[nodiscard]] route_query from_wire(transport::wire::route_call c);
[[nodiscard]] transport::wire::route_reply to_wire(const route_answer& a);
[[nodiscard]] route_answer from_wire(transport::wire::route_reply r);
[[nodiscard]] transport::wire::worker_views to_wire(const std::vector<router_worker_view>& ws);
[[nodiscard]] std::vector<router_worker_view> from_wire(const transport::wire::worker_views& v);

} // namespace tessera::actors
