#pragma once
/// @file
/// A local stand-in for an actor on another node: it has the remote
/// actor's typed interface and forwards every message through the bridge
/// (bridge_actor.hpp); replies and errors come back to the original caller.

#include <map>
#include <string>
#include <utility>

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

/// Proxies by (node, actor), made on first use: an actor that talks to
/// many remote actors keeps one of these. Not thread-safe (one actor's).
template <class Handle>
class remote_actor_cache {
public:
  /// The proxy for `name` on `node`.
  [[nodiscard]] Handle get(caf::actor_system& sys, const bridge_actor& bridge, const std::string& node,
                           const std::string& name) {
    auto key = std::make_pair(node, name);
    auto it = proxies_.find(key);
    if (it == proxies_.end())
      it = proxies_.emplace(key, remote_actor<Handle>(sys, bridge, node, name)).first;
    return it->second;
  }

private:
  std::map<std::pair<std::string, std::string>, Handle> proxies_;
};

} // namespace tessera::actors
