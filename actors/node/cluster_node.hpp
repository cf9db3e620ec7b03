#pragma once
/// @file
/// One node of a multi-process cluster (`tessera node --config F --node ID`):
/// the roles the config gives it (frontend + router, prefill, decode,
/// worker), on a UCX transport listening at its configured address, with
/// its bridge connected to every node listed before it in the config (so
/// every pair of nodes has one connection, whichever starts first: a node
/// keeps retrying until the earlier ones are up), or with membership =
/// "etcd" to the nodes registered in etcd (peer_links.hpp).

#include <filesystem>
#include <functional>
#include <memory>
#include <chrono>
#include <string>

#include <caf/all.hpp>

#include "cluster/cluster_config.hpp"

namespace tessera::actors {

/// A running node of a cluster.
class cluster_node {
public:
  /// Starts node `node_id` of `cfg` with the model in `model_dir` (the
  /// config's model, or the demo model the caller resolved). `progress`
  /// gets one line per step (may be empty). Errors: unknown node id, the
  /// model, on a node with workers the draft model (cfg.draft_model: a
  /// folder that does not load or has another tokenizer, named), the
  /// transport (address in use), the HTTP port; a cluster of
  /// several nodes without a cluster secret (cfg.cluster_secret_file)
  /// unless `insecure`, or a secret file that cannot be used
  /// (load_cluster_secret), checked before the model loads. With a secret,
  /// peers join only through the handshake and write only into memory
  /// granted to them (transport_options::grants_only); `insecure` with
  /// several nodes logs a warning.
  [[nodiscard]] static caf::expected<std::unique_ptr<cluster_node>>
  start(caf::actor_system& sys, const cluster::cluster_config& cfg, const std::string& node_id,
        const std::filesystem::path& model_dir, std::function<void(const std::string&)> progress,
        bool insecure = false);

  /// Stops connecting, the frontend, the actors, the bridge and transport.
  ~cluster_node();
  cluster_node(const cluster_node&) = delete;
  cluster_node& operator=(const cluster_node&) = delete;

  /// On a frontend node: reads the config's api_keys_file again and hands
  /// its table to the frontend (SIGHUP); requests in flight go on. Errors:
  /// no frontend or no key file, or the file's problems (the old table
  /// stays).
  [[nodiscard]] caf::error reload_api_keys();

  /// The HTTP API's URL if this node runs the frontend, else empty.
  [[nodiscard]] std::string url() const;

  /// Graceful stop, before destruction: on a frontend node, as
  /// serve_node::drain; elsewhere nothing to wait for here (the workers'
  /// requests end with their frontends' drain). Blocks.
  void drain(std::chrono::milliseconds timeout);

  struct impl;

private:
  explicit cluster_node(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

} // namespace tessera::actors
