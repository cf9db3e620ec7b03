#pragma once
/// @file
/// A local stand-in for an actor on another node: it has the remote
/// actor's typed interface and forwards every message through the bridge
/// (bridge_actor.hpp); replies and errors come back to the original caller.

#include <string>

#include <caf/all.hpp>

#include "actors/bridge/bridge_actor.hpp"

namespace tessera::actors {

/// Spawns a proxy for actor `name` on node `node`. The proxy lives as
/// long as a handle to it does.
[[nodiscard]] caf::actor spawn_remote_proxy(caf::actor_system& sys, const bridge_actor& bridge,
                                            std::string node, std::string name);

/// A proxy for `name` on `node` typed as `Handle` (the interface the remote
/// actor was published with).
template <class Handle>
[[nodiscard]] Handle remote_actor(caf::actor_system& sys, const bridge_actor& bridge,
                                  std::string node, std::string name) {
  return caf::actor_cast<Handle>(spawn_remote_proxy(sys, bridge, std::move(node), std::move(name)));
}

} // namespace tessera::actors
