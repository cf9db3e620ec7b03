#pragma once
/// @file
/// The kv store of a node with the role kvstore (internal to actors/node):
/// a store that serves the workers of other nodes over the bridge. Workers
/// whose node names it (the cluster TOML's `store`) offer it their finished
/// sequences through its intake (actors/kvstore/kvstore_intake.hpp) and
/// fetch prefixes from its kv store actor, as from their own node's; the
/// routers credit them with its blocks (router_config::store_nodes).
///
/// A node of only this role runs no engine: it builds one backend with the
/// cluster's model and KV settings just to learn the blocks' namespace,
/// layout and model fingerprint (what its workers' engines would say), and
/// drops it.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/kvstore/kvstore_intake.hpp"
#include "actors/node/node_parts.hpp"
#include "cluster/cluster_config.hpp"

namespace tessera::actors::detail {

/// What start_store_node needs beyond the node's actors.
struct store_node_spec {
  std::string node;
  transport::wire::actor_address router;
  std::vector<transport::wire::actor_address> more_routers;
  std::shared_ptr<cluster::metrics_registry> metrics;
  engine::kv_hash_key hash_key = engine::process_kv_hash_key();
};

/// Opens the store of `p` (unless the node's workers opened it already),
/// its writer and kv store actor, and publishes its intake
/// (kvstore_intake_name). Errors: the store's options; a backend the model
/// and settings cannot build.
[[nodiscard]] caf::expected<kvstore_intake_actor> start_store_node(node_actors& p, const cluster::cluster_config& cfg,
                                                                   const loaded_model& model,
                                                                   const engine::backend_choice& engine,
                                                                   const store_node_spec& spec);

/// The cluster's worker nodes that use another node's store: worker node
/// -> store node (router_config::store_nodes).
[[nodiscard]] std::map<std::string, std::string> store_nodes_of(const cluster::cluster_config& cfg);

} // namespace tessera::actors::detail
