#pragma once
/// @file
/// A cluster's layout from a TOML file (configs/*.toml): the model, the
/// router and transport settings, and every node with its transport
/// address and roles. Every node of a cluster reads the same file and
/// starts the part whose id it was given. Reading is strict: a key not
/// listed below (each with its default) is an error, with the nearest
/// known key suggested, and every problem of a file is reported at once
/// (read_cluster_config).
///
///   model = ""                      # a model folder; "" = the demo model
///   served_model_name = "tessera-demo"
///   router_policy = "kv"            # kv, round-robin, random, least-loaded
///   max_local_prefill_tokens = 1000 # uncached tokens a decode worker prefills
///   router_load = "units"           # the load term: units (model units) or blocks (KV blocks)
///   router_sticky_break = 2.0       # a session leaves its worker above this x the
///                                   # least-loaded one's load (0: never)
///   kv_admission = true             # hold a request at the router while no decode
///                                   # worker's KV pool has room for it
///   kv_admission_wait_ms = 8000     # at most this long; then route it anyway
///   panic_routing = true            # no healthy decode worker: route among the late ones
///   router_index_max_entries = 8388608 # prefix index entries (block, worker or store);
///                                   # past it the oldest are forgotten (0: unbounded)
///   late_grace_ms = 3000            # a late worker keeps its streams this long
///   slo_ttft_ms = 0.0               # the autoscaling signal's TTFT p90 SLO (0: none)
///   slo_itl_ms = 0.0                # and its inter-token latency p90 SLO
///   transport = "ucx"               # ucx (tls below) or loopback (one process)
///   ucx_tls = "tcp"
///   cluster_secret_file = "x.secret" # the cluster secret (cluster_secret.hpp),
///                                   # relative to this file's folder; a
///                                   # multi-node cluster needs one (or
///                                   # tessera node --insecure)
///   admin_key_file = "admin.key"    # the frontend's admin key (POST /admin/*,
///                                   # Authorization: Bearer); relative as above
///   api_keys_file = "keys.toml"     # the API keys and tenants (api_keys.hpp);
///                                   # relative as above; "" = no authentication
///   protect_metrics = false         # with api_keys_file: /metrics needs a key
///   threads_per_worker = 0          # 0: the cores shared out
///   kv_cache_mb = 256               # per worker; 0: the backend's default
///   kv_dtype = "bf16"               # KV pool elements: bf16 or int8 (per-token scales)
///   max_model_len = 0               # 0: the model's; at most 1048576
///   speculative = "none"            # ngram:K or draft:K (K 1-16): speculative
///                                   # decoding for requests that ask for none
///                                   # (tessera serve's --speculative)
///   draft_model = ""                # the draft model folder (as model: a path
///                                   # as given) for draft:K and requests' method
///                                   # draft; every worker node loads it
///   kvstore_host_mb = 1024          # per node with workers or the role kvstore; 0: none
///   kvstore_disk_dir = ""           # RocksDB tier under <dir>/<node id>
///   kvstore_disk_mb = 16384         # its capacity per node
///   kvstore_int8 = false            # keep the store's blocks as int8
///   kvstore_offer_mb = 64           # per worker: blocks on their way to the store
///   kv_remote_fetch = true          # fetch prefixes from other nodes' stores
///   engine = "cpu"                  # or "sim": no model math, a GPU's timing
///   fault_injection = false         # every node's transport through the fault
///                                   # decorator; POST /admin/faults on each
///                                   # node's metrics endpoint sets its plan
///   membership = "static"           # static: the [[node]] tables are the cluster;
///                                   # etcd: each node registers in etcd and
///                                   # dials whoever is there (etcd_membership.hpp);
///                                   # nodes the file does not list join with
///                                   # tessera node --node ID --address A --roles R
///   etcd_endpoints = ["http://127.0.0.1:2379"] # with etcd: its client URLs
///                                   # (http only; not on loopback: a warning)
///   etcd_prefix = "/tessera/cluster/" # with etcd: this cluster's keys
///                                   # (<prefix><node id>); one per cluster
///   membership_ttl_s = 5            # with etcd: a node's lease; a node that
///                                   # stops renewing it leaves within this
///                                   # (needs admin_key_file: the endpoint
///                                   # takes the admin key)
///   [sim]                           # only with engine = "sim"; all optional
///   gpu = "h100"                    # a100, h100, h200
///   time_scale = 1.0                # wall seconds per modelled second (0: no wait)
///   payload_scale = 1               # host KV bytes = real / payload_scale
///   tensor_parallel = 1
///   memory_efficiency = 0.7         # default: the sim's calibration table
///   compute_efficiency = 0.6
///   step_overhead_us = 0.0
///   gpu_memory_utilization = 0.9    # for kv_cache_mb = 0
///   eos_probability = 0.0
///   [[node]]
///   id = "front"
///   address = "127.0.0.1:14000"     # where its transport listens
///   roles = ["frontend", "router"]
///   http = "127.0.0.1:8000"
///   [[node]]
///   id = "decode-a"
///   address = "127.0.0.1:14002"
///   roles = ["decode"]              # or "prefill", or "worker" (both)
///   workers = 1
///   metrics = "127.0.0.1:9102"      # optional: GET /metrics of this node
///                                   # (a frontend node has it on its API)
///   store = "store-a"               # optional, on a node with workers: use the
///                                   # kv store of node store-a (roles =
///                                   # ["kvstore"]) instead of one of its own
///   sim_gpu = "a100"                # optional, with engine = "sim": the GPU
///                                   # its workers model instead of [sim].gpu
///                                   # (a fleet of mixed devices; each prices
///                                   # work in its device's fitted units)
///   [[node]]
///   id = "store-a"
///   address = "127.0.0.1:14003"
///   roles = ["kvstore"]             # a kv store (kvstore_host_mb, disk under
///                                   # kvstore_disk_dir/<id>) serving other nodes

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <caf/expected.hpp>

namespace tessera::cluster {

/// One node of the cluster.
struct node_spec {
  /// Unique, non-empty.
  std::string id;
  /// host:port its transport listens on (unique).
  std::string address;
  /// Some of: frontend, router, prefill, decode, worker (prefill+decode),
  /// kvstore (a kv store that serves the cluster's workers over the wire).
  std::vector<std::string> roles;
  /// Workers of its worker role. Default: 1.
  int workers = 1;
  /// frontend: host and port of the HTTP API. Default: 127.0.0.1:8000.
  std::string http_host = "127.0.0.1";
  uint16_t http_port = 8000;
  /// Where this node serves GET /metrics (its own series: workers' KV
  /// blocks, transfers, restarts); port 0: nowhere. Default: none.
  std::string metrics_host = "127.0.0.1";
  uint16_t metrics_port = 0;
  /// A node with workers and no store of its own: the id of the node with
  /// the role kvstore whose store its workers offer finished blocks to and
  /// fetch prefixes from, over the bridge. Empty: the node opens its own
  /// store (kvstore_host_mb). Default: empty.
  std::string store;
  /// With the sim engine: the GPU preset its workers model, overriding
  /// [sim].gpu (a fleet of mixed devices); its workers price their work in
  /// that device's fitted units. Empty: [sim].gpu. Default: empty.
  std::string sim_gpu;

  [[nodiscard]] bool has(const std::string& role) const;
  /// Whether it runs workers (prefill, decode or worker), and so a kv store.
  [[nodiscard]] bool has_workers() const;
};

/// The [sim] table: the sim backend's settings (engine/sim/sim_backend.hpp,
/// sim_settings; converted by the node). Defaults as there.
struct sim_config {
  std::string gpu = "h100";
  double time_scale = 1.0;
  int32_t payload_scale = 1;
  int32_t tensor_parallel = 1;
  std::optional<double> memory_efficiency;
  std::optional<double> compute_efficiency;
  std::optional<double> step_overhead_us;
  double gpu_memory_utilization = 0.9;
  double eos_probability = 0.0;
};

/// GPU names the [sim] table accepts (the sim backend's presets).
[[nodiscard]] const std::vector<std::string>& sim_gpu_names();

/// The whole cluster.
struct cluster_config {
  /// Model folder ("" = the built-in demo model).
  std::string model;
  /// The name clients pass as "model" ("" = the folder's name).
  std::string served_model_name;
  std::string router_policy = "kv";
  /// Uncached prompt tokens a decode worker prefills itself. Default: 1000.
  int32_t max_local_prefill_tokens = 1000;
  /// The router's load term: "units" or "blocks" (router_options::load).
  std::string router_load = "units";
  /// router_options::sticky_break_factor: 0, or >= 1. Default: 2.
  double router_sticky_break = 2.0;
  /// The router's KV admission (kv_admission_options): on, and its
  /// max_wait in ms, [0, 20000] (below the route timeouts). Defaults:
  /// true, 8000.
  bool kv_admission = true;
  int64_t kv_admission_wait_ms = 8000;
  /// router_options::panic_routing. Default: true.
  bool panic_routing = true;
  /// prefix_index_options::max_entries, [0, 2^32]; 0: unbounded. Default: 2^23.
  int64_t router_index_max_entries = int64_t{1} << 23;
  /// frontend_config::late_grace in ms, [0, 600000]. Default: 3000.
  int64_t late_grace_ms = 3000;
  /// The autoscaling signal's SLOs, ms (autoscale_options); 0: none.
  double slo_ttft_ms = 0;
  double slo_itl_ms = 0;
  /// "ucx" or "loopback". Default: ucx.
  std::string transport = "ucx";
  /// UCX_TLS for this cluster's transports. Default: "tcp".
  std::string ucx_tls = "tcp";
  /// The file holding the cluster secret (cluster_secret.hpp), as written
  /// in the TOML but resolved against the TOML's folder when relative
  /// (load_cluster_config). Empty: none. Default: empty.
  std::string cluster_secret_file;
  /// The file holding the frontend's admin key (frontend_config::admin_key;
  /// read like the cluster secret: chmod 600, at least 16 bytes), resolved
  /// like cluster_secret_file. Empty: no admin endpoints. Default: empty.
  std::string admin_key_file;
  /// The frontend's API key file (cluster/api_keys.hpp), resolved like
  /// cluster_secret_file; reloaded on SIGHUP. Empty: no authentication.
  /// Default: empty.
  std::string api_keys_file;
  /// With api_keys_file: the frontend's GET /metrics needs a key too.
  /// Default: false.
  bool protect_metrics = false;
  /// Per worker. Defaults: 0 (cores shared out), 256 MiB, 0 (the model's).
  /// kv_cache_mb is, with the sim, the modelled GPU's KV capacity; 0 is the
  /// backend's default (cpu 256 MiB; sim: the GPU's memory left by the
  /// weights).
  int threads_per_worker = 0;
  uint64_t kv_cache_mb = 256;
  int32_t max_model_len = 0;
  /// Every worker's KV pool element type (engine::parse_kv_dtype): "bf16",
  /// "int8", "f32" or "f16". Nodes that hand KV to each other need the
  /// same one (a mismatch is refused at hand-off). Default: "bf16".
  std::string kv_dtype = "bf16";
  /// Every worker's speculative decoding for requests that ask for none
  /// (engine_config::speculative), as engine::parse_speculative reads it:
  /// "none", "ngram:K" or "draft:K" (draft needs draft_model). Default:
  /// "none".
  std::string speculative = "none";
  /// The draft model folder (a smaller model with the model's tokenizer)
  /// for speculative method draft, the config's or a request's: loaded by
  /// every node with workers and attached to each worker's engine (the
  /// decode worker drafts); a folder that does not load, or whose
  /// tokenizer differs, stops the node's start naming the key. Empty:
  /// none. Default: empty.
  std::string draft_model;
  /// Each node with workers keeps a kv store: host memory (0: none),
  /// and a disk tier under kvstore_disk_dir/<node id> when that is set.
  /// kvstore_int8 keeps its blocks as int8 with per-head scales in both
  /// tiers (tiered_store_options::tier_codec). Defaults: 1024 MiB, "",
  /// 16384 MiB, false.
  uint64_t kvstore_host_mb = 1024;
  std::string kvstore_disk_dir;
  uint64_t kvstore_disk_mb = 16384;
  bool kvstore_int8 = false;
  /// Most MiB of finished sequences' blocks each worker has on their way
  /// to its node's kv store (worker_config::offer_max_bytes); more is
  /// dropped and counted; 0 offers nothing. Default: 64.
  uint64_t kvstore_offer_mb = 64;
  /// Whether a worker may fetch a prompt's prefix from another node's kv
  /// store the router names (router_options::remote_fetch). Default: true.
  bool kv_remote_fetch = true;
  /// The workers' backend: "cpu" or "sim". Default: cpu.
  std::string engine = "cpu";
  /// Every node's transport runs through transport/faults/fault_transport
  /// (no faults until told), and each node's metrics endpoint takes
  /// POST /admin/faults {"plan": "<fault_plan text>"} (a fault harness:
  /// tessera chaos). For testing clusters only. Default: false.
  bool fault_injection = false;
  /// "static" (the [[node]] tables) or "etcd" (etcd_membership.hpp): each
  /// node registers under etcd_prefix with a lease of membership_ttl_s and
  /// dials the nodes registered there. Defaults: static,
  /// ["http://127.0.0.1:2379"], "/tessera/cluster/", 5 s.
  std::string membership = "static";
  std::vector<std::string> etcd_endpoints{"http://127.0.0.1:2379"};
  std::string etcd_prefix = "/tessera/cluster/";
  int32_t membership_ttl_s = 5;
  /// The [sim] table.
  sim_config sim;
  std::vector<node_spec> nodes;

  /// The node `id`, or null.
  [[nodiscard]] const node_spec* node(const std::string& id) const;
  /// The first node that runs a router.
  [[nodiscard]] const node_spec& router_node() const;
  /// Every node that runs a router, in file order (at least one in a
  /// checked config): every worker joins each of them.
  [[nodiscard]] std::vector<const node_spec*> router_nodes() const;
  /// The first node that runs a frontend; null: none.
  [[nodiscard]] const node_spec* frontend_node() const;
};

/// A config as read, and every problem found in it. `config` is usable
/// only when `problems` is empty.
struct config_reading {
  cluster_config config;
  /// One line each, "<file>: <what is wrong and the fix>", naming the key
  /// (node[i].address, sim.gpu, ...).
  std::vector<std::string> problems;
};

/// Reads TOML `text` (`name` for messages) strictly, collecting every
/// problem rather than stopping at the first: a TOML syntax error (with
/// line); an unknown key, with the nearest known one ("did you mean
/// 'kv_cache_mb'?"); a key of the wrong type or out of range (max_model_len
/// at most the wire's max_tokens); an unknown role, router policy, engine
/// or transport; a speculative setting engine::parse_speculative refuses,
/// or draft:K without draft_model; no router node;
/// a node id empty, over the wire's 1024 bytes (wire_limits::max_name_bytes)
/// or with a '/'; an address that is not host:port (IPv6 only as
/// [addr]:port, and not for node addresses: the transport is IPv4); ids
/// or addresses written twice. Does not resolve host names.
[[nodiscard]] config_reading read_cluster_config(std::string_view text, const std::string& name);

/// Resolves every node's address, HTTP and metrics endpoint (getaddrinfo)
/// and returns a problem for each host that does not resolve and for each
/// two endpoints that are one after resolution (localhost:14000 and
/// 127.0.0.1:14000). Blocks on the system resolver.
[[nodiscard]] std::vector<std::string> resolve_cluster_addresses(const cluster_config& c,
                                                                 const std::string& name);

/// read_cluster_config on the file's text, cluster_secret_file resolved
/// against the file's folder, then resolve_cluster_addresses on the nodes
/// that read without a problem.
[[nodiscard]] config_reading read_cluster_config_file(const std::filesystem::path& file);

/// read_cluster_config_file as an expected: the error
/// (caf::sec::invalid_argument) carries every problem, one per line.
[[nodiscard]] caf::expected<cluster_config> load_cluster_config(const std::filesystem::path& file);

/// read_cluster_config as an expected (`name` for messages), as
/// load_cluster_config.
[[nodiscard]] caf::expected<cluster_config> parse_cluster_config(std::string_view text,
                                                                 const std::string& name);

/// A node's entry as written by hand (tessera node's flags): the
/// [[node]] table's keys; an empty http or metrics is left out.
struct node_entry {
  std::string id;
  std::string address;
  std::vector<std::string> roles;
  int64_t workers = 1;
  std::string http;
  std::string metrics;
};

/// `e` checked as a [[node]] table is (same keys, same checks; `name`
/// starts each problem). Errors (caf::sec::invalid_argument): every
/// problem, one per line.
[[nodiscard]] caf::expected<node_spec> check_node_entry(const node_entry& e, const std::string& name);

/// A node as the TOML text of its [[node]] table's keys (what etcd
/// membership stores under the node's key).
[[nodiscard]] std::string node_entry_text(const node_spec& n);

/// TOML `text` (at most 16 KiB) read as one [[node]] table, with the same
/// checks (`name` starts each problem): how a node read from etcd is
/// validated. Errors as check_node_entry.
[[nodiscard]] caf::expected<node_spec> read_node_entry(std::string_view text, const std::string& name);

/// The top-level keys a config may have.
[[nodiscard]] const std::vector<std::string>& cluster_config_keys();

} // namespace tessera::cluster
