#pragma once
/// @file
/// The building blocks a node is assembled from (internal to actors/node):
/// the loaded model, a worker on it, the frontend, and the protocol every
/// node's bridge speaks. serve_node (one process) and cluster_node (one
/// node of many) both use them, so the two run the same actors the same way.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/bridge/bridge_actor.hpp"
#include "actors/frontend/frontend_actor.hpp"
#include "actors/kvstore/kvstore_actor.hpp"
#include "actors/kvstore/kvstore_writer.hpp"
#include "actors/router/router_actor.hpp"
#include "actors/worker/worker_actor.hpp"
#include "cluster/metrics.hpp"
#include "engine/factory/backend_factory.hpp"
#include "engine/tokenizer.hpp"
#include "engine/weights.hpp"

namespace tessera::actors::detail {

class worker_supervisor;

/// The actors a node runs and its bridge, stopped in order: the frontend
/// first (no new requests; open streams closed), then the workers and the
/// router, then the bridge with its transport, and last the workers'
/// engines (their KV pools are registered with the transport).
struct node_actors {
  explicit node_actors(caf::actor_system& s) : sys(s) {}
  ~node_actors();
  node_actors(const node_actors&) = delete;
  node_actors& operator=(const node_actors&) = delete;

  caf::actor_system& sys;
  std::unique_ptr<bridge> br;
  router_local_actor router;
  std::unique_ptr<worker_supervisor> supervisor;
  std::unique_ptr<frontend::frontend> front;
  /// The node's kv store (shared with its workers), its actor and its
  /// writer; null when the node keeps none.
  std::shared_ptr<kvstore::block_store> store;
  kvstore_actor store_actor;
  kvstore_writer_actor store_writer;
  /// When a drain (SIGTERM) said the node must be gone: at stop, the store
  /// writer writes its queued offers until then (at least 1 s), and drops
  /// the rest. Default: no drain, so it writes them all.
  std::optional<std::chrono::steady_clock::time_point> stop_by;

  /// Marks the node as draining for `timeout` (sets stop_by).
  void draining(std::chrono::milliseconds timeout) { stop_by = std::chrono::steady_clock::now() + timeout; }
};

/// A bad option or setting, as an error naming it.
[[nodiscard]] caf::error bad_option(const std::string& what);

/// Config, weights (null for the sim backend) and tokenizer, shared by
/// every worker of the process.
struct loaded_model {
  engine::model_config config;
  std::shared_ptr<const engine::model_weights> weights;
  std::shared_ptr<const engine::tokenizer> tokenizer;
};

/// Loads what a `kind` backend needs (engine::load_model_files).
[[nodiscard]] caf::expected<loaded_model> load_model(const std::filesystem::path& dir,
                                                     engine::backend_kind kind);

/// The block-hash key of a node's engines and router (cluster/kv_hash_key.hpp):
/// derived from `cluster_secret` when there is one; else, when `store` has
/// a disk tier that opened, the key kept in its folder (made on the first
/// start); else the process's random key. Errors name a key file that
/// cannot be read or made.
[[nodiscard]] caf::expected<engine::kv_hash_key>
node_kv_hash_key(const std::string& cluster_secret, const kvstore::block_store* store);

/// The operations other nodes may call on this node's actors.
[[nodiscard]] std::shared_ptr<const bridge_protocol> node_protocol();

/// One worker to start.
struct worker_spec {
  std::string node;
  std::string name;
  std::vector<transport::wire::node_role> roles;
  int threads = 1;
  /// engine::backend_options::kv_cache_bytes (0: the backend's default).
  size_t kv_cache_bytes = size_t{256} << 20;
  /// engine::backend_options::kv_dtype. Default: bf16.
  engine::dtype kv_dtype = engine::dtype::bf16;
  /// The backend (cpu or sim) and the sim's settings.
  engine::backend_choice engine;
  int32_t max_model_len = 0;
  /// engine_config::speculative of the worker's engine.
  engine::speculative_params speculative;
  /// The draft model for speculative method draft (engine::attach_draft_model),
  /// built on the same backend kind, threads and KV settings; null: none.
  std::shared_ptr<const loaded_model> draft;
  uint64_t worker_id = 0;
  transport::wire::actor_address router;
  /// worker_config::more_routers (a cluster with several routers).
  std::vector<transport::wire::actor_address> more_routers;
  std::shared_ptr<cluster::metrics_registry> metrics;
  bool fault_injection = false;
  /// The node's kv store and its writer (worker_config::store,
  /// store_writer); null: none.
  std::shared_ptr<kvstore::block_store> store;
  kvstore_writer_actor store_writer;
  /// With no store here: the node with the role kvstore whose store the
  /// worker uses over the bridge (worker_config::store_at, remote_store;
  /// store_node.hpp). Empty: none.
  std::string store_node;
  /// worker_config::offer_max_bytes. Default: 64 MiB.
  uint64_t offer_max_bytes = uint64_t{64} << 20;
  /// The engine's block-hash key (node_kv_hash_key): the router's.
  engine::kv_hash_key hash_key = engine::process_kv_hash_key();
  /// worker_config::units (the model's units for this engine).
  engine::model_units units;
};

struct started_worker {
  worker_local_actor actor;
  /// The worker's engine: its KV pool is registered with the bridge's
  /// transport, so it must outlive the worker until the bridge is gone.
  std::shared_ptr<engine::engine> engine;
  int32_t max_model_len = 0;
  std::string backend;
};

/// Builds the worker's engine, registers its KV pool with `br`, spawns the
/// worker and publishes it under spec.name.
[[nodiscard]] caf::expected<started_worker> start_worker(caf::actor_system& sys, bridge& br,
                                                         const loaded_model& model,
                                                         const worker_spec& spec);

/// A node's kv store tiers (kvstore/).
struct kv_store_spec {
  /// Host-memory tier; 0: the node keeps no kv store. Default: 1 GiB.
  size_t host_bytes = size_t{1} << 30;
  /// RocksDB directory of the disk tier; empty: host memory only.
  std::filesystem::path disk_dir;
  /// Disk tier capacity. Default: 16 GiB.
  uint64_t disk_bytes = uint64_t{16} << 30;
  /// Keep blocks as int8 in both tiers (tiered_store_options::tier_codec).
  /// Default: false (exact).
  bool int8 = false;
};

/// Opens the node's store; null when spec.host_bytes is 0. A disk
/// directory that cannot be opened does not fail it: the disk tier is reset
/// or left off (kvstore/disk_recovery.hpp; kv_store_health says which).
/// Errors: bad options (kvstore_errc::bad_config).
[[nodiscard]] caf::expected<std::shared_ptr<kvstore::block_store>> open_kv_store(const kv_store_spec& spec);

/// Spawns the store's actor (announces it to `router`, exports its metrics)
/// and publishes it as "kvstore". `eng` names the namespace: any engine of
/// the node. `more_routers`: kvstore_config::more_routers.
[[nodiscard]] kvstore_actor start_kvstore_actor(caf::actor_system& sys, bridge& br,
                                                std::shared_ptr<kvstore::block_store> store,
                                                const std::string& node,
                                                const transport::wire::actor_address& router,
                                                const engine::engine& eng,
                                                std::shared_ptr<cluster::metrics_registry> metrics,
                                                std::vector<transport::wire::actor_address> more_routers = {});

/// The frontend's settings that differ per node.
struct frontend_spec {
  std::string node;
  std::string model_name;
  int32_t max_model_len = 0;
  std::string chat_template;
  std::string host = "127.0.0.1";
  uint16_t port = 8000;
  int http_threads = 1;
  frontend::api_limits limits;
  std::shared_ptr<cluster::metrics_registry> metrics;
  /// The node's worker supervisor, for POST /admin/fault; null: off.
  caf::actor supervisor;
  /// frontend_config::admin_key.
  std::string admin_key;
  /// frontend_config::api_keys and protect_metrics.
  std::shared_ptr<const cluster::api_key_table> api_keys;
  bool protect_metrics = false;
  /// The node's kv store, whose start-up trouble (a disk tier reset or
  /// turned off) /health reports; null: none.
  std::shared_ptr<kvstore::block_store> store;
  /// frontend_config::units (the model's units for this engine).
  engine::model_units units;
  /// frontend_config::late_grace.
  std::chrono::milliseconds late_grace{3000};
};

/// The JSON object /health reports as "kv_store" for `store`: what went
/// wrong with its disk tier at start-up; empty when nothing did.
[[nodiscard]] std::string kv_store_health(const kvstore::block_store* store);

/// Starts the frontend (HTTP listening) and publishes it on `br`; warns
/// when it listens beyond loopback without API keys. Errors: a bad
/// --chat-template, the port in use.
[[nodiscard]] caf::expected<std::unique_ptr<frontend::frontend>>
start_frontend(caf::actor_system& sys, bridge& br, const router_local_actor& router,
               const loaded_model& model, const frontend_spec& spec);

/// Reads the API key file `file` (cluster/api_keys.hpp) and hands the
/// table to `front` (frontend::set_api_keys): a SIGHUP's reload. Errors:
/// the file's (the frontend keeps its table then).
[[nodiscard]] caf::error reload_api_keys(frontend::frontend& front, const std::filesystem::path& file);

/// The API key file's table, or null when `file` is empty. Errors: the
/// file's problems.
[[nodiscard]] caf::expected<std::shared_ptr<const cluster::api_key_table>>
load_api_keys(const std::filesystem::path& file);

/// The longest prompt + output the model allows with `max_model_len`
/// (0: the model's max_position_embeddings).
[[nodiscard]] int32_t model_len(const loaded_model& model, int32_t max_model_len);

/// A random 64-bit base for ids that must not collide across processes.
[[nodiscard]] uint64_t random_id_base();

} // namespace tessera::actors::detail
