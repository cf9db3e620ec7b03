#pragma once
/// @file
/// How a `tessera node` stays connected to the rest of its cluster: one
/// transport connection per pair of nodes, dialled by one side and dialled
/// again whenever it goes away (a restarted node), to a set of nodes that
/// comes from the config (membership = "static") or from etcd
/// (membership = "etcd", cluster/etcd_membership.hpp).
///
///   static: dial every node listed before this one in the config.
///   etcd:   register this node; for each node registered there:
///             joined(n) --n.id < this id--> dial n (again when it drops)
///             left(id)  --> stop dialling it, bridge disconnect (node_down
///                           to the router and frontend: streams move),
///                           router forget (its workers leave /health)
///
/// Both modes share the dialler: a set of (id, address) it keeps connected
/// with a per-node retry backoff (200 ms doubling to 1 s), so one node
/// that is down never delays dialling another.

#include <memory>

#include <caf/all.hpp>

#include "actors/bridge/bridge_actor.hpp"
#include "actors/router/router_actor.hpp"
#include "cluster/cluster_config.hpp"

namespace tessera::actors::detail {

/// A node's links to its peers (see the file comment).
class peer_links {
public:
  /// Starts dialling (and, with etcd, registers `me`: an error when etcd
  /// cannot be reached or refuses). `router`: this node's router, if it
  /// runs one (told to forget nodes that leave); may be null.
  [[nodiscard]] static caf::expected<std::unique_ptr<peer_links>>
  start(caf::actor_system& sys, const bridge_actor& br, router_local_actor router, const cluster::cluster_config& cfg,
        const cluster::node_spec& me);

  /// Leaves etcd (revokes this node's lease: its peers drop it at once),
  /// then stops dialling. Blocks until both threads are gone.
  ~peer_links();
  peer_links(const peer_links&) = delete;
  peer_links& operator=(const peer_links&) = delete;

  class impl;

private:
  explicit peer_links(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

} // namespace tessera::actors::detail
