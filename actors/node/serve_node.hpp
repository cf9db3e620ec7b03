#pragma once
/// @file
/// A whole serving cluster in one process (`tessera serve`): a bridge (on
/// the in-process loopback transport), the router, the workers and the
/// frontend, wired exactly as they are across processes — every message
/// between them goes through the bridge's (node, actor) addressing, so the
/// same actors run split over nodes.
///
///   mode disagg: P prefill workers + D decode workers (the router decides
///                per request whether to disaggregate)
///   mode agg:    D workers that do both

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include <caf/all.hpp>

#include "actors/frontend/openai_request.hpp"
#include "actors/router/router_actor.hpp"
#include "engine/factory/backend_factory.hpp"

namespace tessera::actors {

/// What `tessera serve` runs.
struct serve_options {
  /// A Hugging Face model folder. Required.
  std::filesystem::path model_dir;
  /// The name clients pass as "model". Default: the folder's name.
  std::string model_name;
  /// "disagg" or "agg". Default: "disagg".
  std::string mode = "disagg";
  /// Prefill workers (disagg only). Default: 1.
  int prefill_workers = 1;
  /// Decode workers (or, with agg, workers). Default: 1.
  int decode_workers = 1;
  /// Compute threads per worker; 0: the machine's cores shared out
  /// (at least 1 each). Default: 0.
  int threads_per_worker = 0;
  /// KV pool per worker; with the sim, the modelled GPU's KV capacity; 0:
  /// the backend's default (engine::backend_options). Default: 256 MiB.
  size_t kv_cache_bytes = size_t{256} << 20;
  /// Every worker's KV pool element type (--kv-dtype). Default: bf16.
  engine::dtype kv_dtype = engine::dtype::bf16;
  /// Every worker's backend (cpu or sim) and the sim's settings.
  engine::backend_choice engine;
  /// With the sim: the GPU preset each worker models, in turn within its
  /// role (the k-th prefill worker, and the k-th decode worker, model
  /// entry k modulo the list's length): a fleet of mixed devices. Each
  /// worker prices its work in the units fitted for its own device (the
  /// model's serving config, `tessera bench units --sim-gpu G --write`).
  /// Empty: every worker models engine.sim.gpu.
  std::vector<std::string> sim_worker_gpus;
  /// Longest prompt + output; 0: the model's max_position_embeddings.
  int32_t max_model_len = 0;
  /// Speculative decoding for requests that do not ask for their own
  /// (engine_config::speculative; --speculative). Default: none.
  engine::speculative_params speculative;
  /// Draft model folder for speculative method draft (--draft-model): a
  /// smaller model with the target's tokenizer, loaded once and attached to
  /// every worker's engine (decode workers draft). Empty: none.
  std::filesystem::path draft_model_dir;
  /// The routing policy and its options.
  router_config router;
  /// --chat-template: a family name, a file, or a template; empty: the
  /// model's own.
  std::string chat_template;
  /// HTTP listen address. Default: 127.0.0.1:8000.
  std::string host = "127.0.0.1";
  uint16_t port = 8000;
  /// HTTP I/O threads. Default: 1.
  int http_threads = 1;
  /// frontend_config::late_grace (--late-grace-ms). Default: 3 s.
  std::chrono::milliseconds late_grace{3000};
  frontend::api_limits limits;
  /// The node's kv store (cross-turn KV reuse): host memory, LRU; 0 turns
  /// it off. Default: 1 GiB.
  size_t kv_store_host_bytes = size_t{1} << 30;
  /// Its disk tier (RocksDB) directory; empty: host memory only.
  std::filesystem::path kv_store_disk_dir;
  /// The disk tier's capacity. Default: 16 GiB.
  uint64_t kv_store_disk_bytes = uint64_t{16} << 30;
  /// Keep the kv store's blocks as int8 (per-head scales) in both tiers:
  /// about twice the blocks per byte for bf16 KV, at the logit error
  /// bench/README.md measures. Default: false (exact).
  bool kv_store_int8 = false;
  /// Most bytes of finished sequences' blocks each worker has on their way
  /// to the kv store (worker_config::offer_max_bytes); more is dropped and
  /// counted. Default: 64 MiB.
  uint64_t kv_offer_max_bytes = uint64_t{64} << 20;
  /// Chaos drills: workers obey injected faults, and the frontend takes
  /// POST /admin/fault {"worker": name, "fault": "crash"}. Default: off.
  bool fault_injection = false;
  /// The admin key's file (frontend_config::admin_key; chmod 600, at least
  /// 16 bytes). Empty: none. Default: empty.
  std::filesystem::path admin_key_file;
  /// The API key file (cluster/api_keys.hpp): set, every /v1/* request
  /// needs a key and runs as its tenant. Empty: no authentication.
  /// Default: empty.
  std::filesystem::path api_keys_file;
  /// With api_keys_file: GET /metrics needs a key too. Default: false.
  bool protect_metrics = false;
  /// Progress lines while loading (may be empty).
  std::function<void(const std::string&)> progress;
};

/// A running single-process cluster.
class serve_node {
public:
  /// Loads the model, starts every actor and the HTTP server; returns once
  /// the workers have joined the router (so /health is 200). Errors name
  /// what failed (model folder, port in use, bad option).
  [[nodiscard]] static caf::expected<std::unique_ptr<serve_node>> start(caf::actor_system& sys,
                                                                        serve_options opts);
  /// Stops the HTTP server, the actors and the bridge.
  ~serve_node();
  serve_node(const serve_node&) = delete;
  serve_node& operator=(const serve_node&) = delete;

  /// "http://127.0.0.1:8000".
  [[nodiscard]] std::string url() const;

  /// Graceful stop, before destruction: new requests get 503 and every
  /// request in flight may finish for up to `timeout`; those left then end
  /// with an error (frontend::drain). Blocks.
  void drain(std::chrono::milliseconds timeout);
  /// Reads api_keys_file again and hands its table to the frontend
  /// (SIGHUP); requests in flight go on. Errors: no key file configured,
  /// or the file's problems (the old table stays).
  [[nodiscard]] caf::error reload_api_keys();
  /// The served model name.
  [[nodiscard]] const std::string& model_name() const;
  /// One line describing the workers, e.g. "1 prefill + 1 decode worker(s), cpu avx512 x1".
  [[nodiscard]] const std::string& description() const;

  struct impl;

private:
  explicit serve_node(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

} // namespace tessera::actors
