#pragma once
/// @file
/// The preflight of each command that starts something: what `tessera
/// serve` and `tessera node` check before they load the model, and what
/// `tessera check` checks for a whole cluster (cluster/preflight.hpp has
/// the checks below the engine; this file adds the model folder and puts
/// them together per command).

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>

#include "cluster/cluster_config.hpp"
#include "cluster/preflight.hpp"
#include "engine/factory/backend_factory.hpp"

namespace tessera::cli {

/// Checks the model folder `dir` without loading it: the folder exists,
/// config.json parses, a tokenizer (tokenizer.json or tokenizer.model) is
/// there, and for a cpu backend the weights' safetensors headers (of
/// model.safetensors, or of every shard model.safetensors.index.json
/// names) are readable and consistent. Maps files; reads no tensor data.
void check_model_folder(cluster::preflight_report& report, const std::string& node, const std::string& subject,
                        const std::filesystem::path& dir, engine::backend_kind kind);

/// What `tessera serve` is about to use.
struct serve_preflight_input {
  /// "" = the built-in demo model (not checked).
  std::string model;
  engine::backend_kind kind = engine::backend_kind::cpu;
  std::string host;
  uint16_t port = 0;
  uint64_t kv_store_host_mb = 0;
  std::string kv_store_disk_dir;
  uint64_t kv_store_disk_mb = 0;
};

/// `tessera serve`'s checks: the HTTP port can be listened on, the disk
/// tier's folder is writable with room for --kv-store-disk-mb, the model
/// folder is complete.
[[nodiscard]] cluster::preflight_report serve_preflight(const serve_preflight_input& in);

/// Adds the config's problems to `report` as failed "config" checks
/// (subject: the file), or one ok line when there are none. True when
/// the config is usable.
bool report_config(cluster::preflight_report& report, const std::string& file,
                   const cluster::config_reading& reading);

/// The node id `given` names in `c`, or a failed check ("--node X: the
/// config has no node 'X'; did you mean ...") and "".
[[nodiscard]] std::string find_node(cluster::preflight_report& report, const cluster::cluster_config& c,
                                    const std::string& given);

/// Checks shared by the whole cluster, run once: the cluster secret
/// (present and mode 600, or none needed: one node, or `insecure`), and
/// the model folder (on this machine).
void check_cluster_wide(cluster::preflight_report& report, const cluster::cluster_config& c, bool insecure);

/// One node's own resources on this machine: its transport address, HTTP
/// and metrics ports can be listened on (when `bind_ports`), and its kv
/// store's disk tier (kvstore_disk_dir/<id>).
void check_node_resources(cluster::preflight_report& report, const cluster::cluster_config& c,
                          const cluster::node_spec& n, bool bind_ports);

/// What `tessera check` was asked.
struct cluster_check_options {
  std::string config;
  /// Only this node ("": every node).
  std::string node;
  /// The cluster must not be running yet (scripts/cluster.sh start): a
  /// node that answers is a failure, not a report.
  bool before_start = false;
  /// For each connection and HTTP request. Default: 1 s.
  std::chrono::milliseconds timeout{1000};
};

/// `tessera check`: the config; the secret and the model; per node, the
/// ports and disk tier where the node is on this machine (others are
/// skipped) and not running, and the disk tiers that share a disk
/// together (check_shared_disks); and, when the cluster is running, each
/// node's reachability (TCP connect to its address), the frontend's
/// GET /health and /v1/models, and each worker node's workers as /health's
/// worker_states judge them (an unhealthy one is a warning). A node that
/// does not answer while others do is a failure; none answering is a
/// cluster not started (skipped).
[[nodiscard]] cluster::preflight_report check_cluster(const cluster_check_options& o);

} // namespace tessera::cli
