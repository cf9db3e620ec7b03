#pragma once
/// @file
/// The frontend: the OpenAI-compatible HTTP API in front of the cluster.
/// For each completion it parses and validates the body, applies the chat
/// template, tokenizes, asks the router where to run each choice, starts it
/// on the chosen worker (with the decode worker named when the router
/// disaggregates), and streams the tokens that come back (it is the
/// requests' token sink) as server-sent events or one JSON body. A client
/// that goes away cancels its request on every worker.
///
///   HTTP --> parse --> prompt --> route (router) --> generate (worker)
///        <-- SSE / JSON <-- token chunks (in order) <-- worker(s)
///
/// Endpoints: POST /v1/completions, POST /v1/chat/completions,
/// GET /v1/models, GET /health (each worker's state and the reason, from
/// the router's heartbeats and canaries; 200 while a complete serving path
/// is healthy, else 503), GET /ready (200 or 503 alike, short), GET /live,
/// GET /metrics (Prometheus text); with an admin key and fault injection
/// on, POST /admin/fault {"worker": "decode-0", "fault": "crash"} (a worker
/// of this node) for chaos drills.
///
/// With an API key table (frontend_config::api_keys) every /v1/* request
/// needs "Authorization: Bearer <key>" (401 otherwise) and runs as the
/// key's tenant: its prefix-cache namespace salts the request's block
/// hashes (api_auth.hpp), so tenants never hit each other's cache unless
/// the key file shares it. /health, /ready, /live and /metrics stay open
/// (/metrics needs a key with protect_metrics). /admin/* needs the admin
/// key and is 404 without one.

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include <caf/all.hpp>

#include "actors/bridge/bridge_actor.hpp"
#include "actors/common/token_sink.hpp"
#include "actors/frontend/chat_template.hpp"
#include "actors/frontend/http_server.hpp"
#include "actors/frontend/openai_request.hpp"
#include "actors/router/router_actor.hpp"
#include "cluster/api_keys.hpp"
#include "cluster/metrics.hpp"
#include "engine/model_units.hpp"
#include "engine/tokenizer.hpp"

namespace tessera::actors::frontend {

/// How the frontend runs.
struct frontend_config {
  /// This node's id and the frontend's published name: workers send the
  /// tokens there. Required / default "frontend".
  std::string node;
  std::string name = "frontend";
  bridge_actor bridge;
  router_local_actor router;
  /// The served model's tokenizer. Required.
  std::shared_ptr<const engine::tokenizer> tokenizer;
  /// Chat template (resolve_chat_template at start-up); nullopt: chat
  /// requests get a 400 naming the problem.
  std::optional<chat_template> chat;
  /// Why there is no chat template (for that 400).
  std::string chat_error;
  /// The name clients pass as "model".
  std::string model_name;
  /// Longest prompt + output, in tokens.
  int32_t max_model_len = 0;
  /// The served model's units (a, b, c): what the tenants' rate limits
  /// charge (a * prompt tokens + c at admission, b per output token).
  /// Default: 1 unit per token either way, none per request.
  engine::model_units units;
  api_limits limits;
  http_server_options http;
  /// Where the counters go (shared with the workers of this process).
  std::shared_ptr<cluster::metrics_registry> metrics;
  /// How long a choice may wait for the router and its worker to accept
  /// it. Default: 30 s.
  std::chrono::milliseconds admit_timeout{30000};
  /// How often one choice may move to another worker after its worker
  /// failed mid-stream (migration) before the request fails. Default: 6.
  int32_t max_migrations = 6;
  /// The stream watchdog, every `watch_interval`: a running stream whose
  /// worker the router reports unhealthy (heartbeats stopped, a failed
  /// canary, a drained node), whose chunks wait behind one that never came
  /// for `gap_timeout`, or that got no chunk for `stall_timeout`, moves to
  /// another worker (migration). Defaults: 500 ms, 2 s, 60 s.
  std::chrono::milliseconds watch_interval{500};
  std::chrono::milliseconds gap_timeout{2000};
  std::chrono::milliseconds stall_timeout{60000};
  /// A placed stream with no chunk for `probe_after` is asked about on its
  /// worker(s) every watch_interval (request_status); when they say twice
  /// in a row that they do not hold it (its request or its last chunk was
  /// lost on the way), it moves. Default: 1.5 s.
  std::chrono::milliseconds probe_after{1500};
  /// A worker the router reports only late (health_fault::late: its node
  /// connected, no canary failed, but a heartbeat or canary overdue) keeps
  /// its streams while its last heartbeat is younger than `late_grace`, and
  /// while the router routes new requests to it in panic (no worker that
  /// can decode is healthy): a busy host runs workers late, and moving
  /// their streams only recomputes them elsewhere on the same host, and on
  /// a saturated host failed requests that had nowhere better to go
  /// (issue 14). A stopped or hung worker's streams move once the grace is
  /// over (about heartbeat_timeout + late_grace after its last heartbeat).
  /// Default: 3 s.
  std::chrono::milliseconds late_grace{3000};
  /// The admin key: set, POST /admin/drain (and /admin/fault with a
  /// supervisor) is served and every /admin/* endpoint needs
  /// "Authorization: Bearer <key>" (401 otherwise); empty, every /admin/*
  /// endpoint is 404. Default: empty.
  std::string admin_key;
  /// The API keys and their tenants; null: no authentication, every
  /// request runs without a tenant. Replaced at run time by
  /// frontend::set_api_keys. Default: null.
  std::shared_ptr<const cluster::api_key_table> api_keys;
  /// With api_keys: GET /metrics needs a key too. Default: false.
  bool protect_metrics = false;
  /// The node's worker supervisor (actors/node/worker_supervisor.hpp):
  /// set, POST /admin/fault is served; null, it is 404.
  caf::actor supervisor;
  /// A JSON object GET /health reports as "kv_store" (e.g. that the disk
  /// tier was reset at start-up); empty: no such field.
  std::string health_kv_store;
};

/// A running frontend: the actor and its HTTP server.
class frontend {
public:
  /// Spawns the actor and starts listening. Errors: the HTTP server's
  /// (e.g. the port is in use).
  [[nodiscard]] static caf::expected<std::unique_ptr<frontend>> start(caf::actor_system& sys,
                                                                      frontend_config cfg);
  /// Stops the HTTP server (open streams are closed), then the actor.
  ~frontend();
  frontend(const frontend&) = delete;
  frontend& operator=(const frontend&) = delete;

  [[nodiscard]] std::string url() const { return server_->url(); }
  [[nodiscard]] uint16_t port() const { return server_->port(); }
  /// The actor (publish it on the bridge under frontend_config::name).
  [[nodiscard]] const token_sink_actor& actor() const { return actor_; }

  /// Replaces the API key table (a reloaded key file; null turns
  /// authentication off). Requests from then on are checked against
  /// `keys`; requests in flight go on as their tenant. Thread-safe: the
  /// actor takes the table in its own turn.
  void set_api_keys(std::shared_ptr<const cluster::api_key_table> keys);

  /// Graceful stop: from now on new completions get 503
  /// ("shutting_down") and /health 503 {"status":"draining"}; returns once
  /// every request in flight finished, or at `timeout`, when those left
  /// end with an error (an error event and [DONE] on a started stream, a
  /// 503 before it). Blocks; not from an actor.
  void drain(std::chrono::milliseconds timeout);

private:
  frontend() = default;
  token_sink_actor actor_;
  std::unique_ptr<http_server> server_;
};

} // namespace tessera::actors::frontend
