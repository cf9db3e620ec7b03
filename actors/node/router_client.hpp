#pragma once
/// @file
/// A frontend's router when the cluster has several: it looks like one
/// router (router_local_actor, what the frontend takes) and asks whichever
/// of them is live, so a router that dies or restarts costs no request.
///
///   route:    the routers in order, those marked down last; the first that
///             answers places it (remembered: prefilled/finished go there).
///             A router that fails the call (node_down, not connected, no
///             answer within attempt_timeout) is marked down for down_for
///             and the same query goes to the next; one that answers "no
///             healthy worker" (e.g. restarted, its workers not joined
///             again yet) is not marked, and the next is asked too. Only
///             when every router failed does the frontend get an error: the
///             routers' own answer if one gave it, else the last failure.
///   workers:  the same order; the first answer.
///   node_down(n): the routers on node n are marked down (the bridge
///             watches this actor).
///
/// Every worker joins every router and sends each its heartbeats and KV
/// events (worker_config::more_routers), so each router has the full
/// prefix index and any of them places as well as the others.

#include <chrono>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/bridge/bridge_actor.hpp"
#include "actors/node/router_gateway.hpp"
#include "actors/router/router_actor.hpp"

namespace tessera::actors {

/// One router the client may use: on this node (`local` set) or reached
/// through its gateway on `node`.
struct router_link {
  std::string node;
  router_local_actor local;
};

struct router_client_config {
  /// In order of preference; at least one.
  std::vector<router_link> routers;
  /// For the routers on other nodes.
  bridge_actor bridge;
  /// How long one router may take to answer. Default: 2 s.
  std::chrono::milliseconds attempt_timeout{2000};
  /// How long a router that failed a call is tried only after the others.
  /// Default: 2 s.
  std::chrono::milliseconds down_for{2000};
};

/// Spawns the client. Errors: no router given.
[[nodiscard]] caf::expected<router_local_actor> spawn_router_client(caf::actor_system& sys,
                                                                    router_client_config cfg);

} // namespace tessera::actors
