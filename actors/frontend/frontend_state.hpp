#pragma once
/// @file
/// The frontend actor's state and the functions its source files share
/// (internal to actors/frontend): frontend.cpp runs completions (jobs,
/// token streams, migration) and the HTTP routing; frontend_endpoints.cpp
/// answers /health, /ready, /metrics and the /admin/* endpoints.

#include <chrono>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "actors/bridge/remote_actor.hpp"
#include "actors/frontend/api_auth.hpp"
#include "actors/frontend/api_error.hpp"
#include "actors/frontend/api_prompt.hpp"
#include "actors/frontend/frontend_actor.hpp"
#include "actors/frontend/openai_response.hpp"
#include "actors/frontend/sdk_gateway.hpp"
#include "actors/frontend/tenant_limits.hpp"
#include "actors/frontend/token_order.hpp"
#include "actors/worker/worker_actor.hpp"

namespace tessera::actors::frontend::detail {

namespace wire = transport::wire;
using clock_type = std::chrono::steady_clock;

/// An HTTP request handed to the actor.
struct http_call {
  http_request request;
  std::shared_ptr<http_response> response;
};

/// A new API key table for the actor (frontend::set_api_keys).
struct api_keys_swap {
  std::shared_ptr<const cluster::api_key_table> keys;
};

} // namespace tessera::actors::frontend::detail

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tessera::actors::frontend::detail::http_call)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tessera::actors::frontend::detail::api_keys_swap)

namespace tessera::actors::frontend::detail {

/// The frontend's interface plus what its HTTP server and its own
/// callbacks send it.
using frontend_impl = token_sink_actor::extend<
  caf::reacts_to<http_atom, http_call>,
  /// The client of job `key` went away.
  caf::reacts_to<closed_atom, uint64_t>,
  /// Node `node` failed (from the bridge): its requests fail now.
  caf::reacts_to<node_down_atom, std::string>,
  /// Graceful stop: take no new completion, reply once every request in
  /// flight finished; at the deadline (ms) fail those left.
  caf::replies_to<drain_atom, int64_t>::with<void>,
  /// The drain's deadline passed.
  caf::reacts_to<expire_atom>,
  /// Time to place choice (key, index) again after its worker failed.
  caf::reacts_to<start_atom, uint64_t, uint64_t>,
  /// Time for the stream watchdog (watch_streams).
  caf::reacts_to<step_atom>,
  /// From now on, check API keys against this table (a reloaded key file).
  caf::reacts_to<load_atom, api_keys_swap>>::extend_with<sdk_gateway_actor>;

/// One choice of a completion: one engine request.
struct job_choice {
  uint64_t engine_id = 0;
  route_answer route;
  choice_output out;
  token_order order;
  bool admitted = false;
  bool done = false;
  /// Times it moved to another worker after its worker failed.
  int32_t migrations = 0;
  /// When its stream last moved on (a chunk arrived, or it was placed):
  /// the stream watchdog's clock.
  clock_type::time_point progress = clock_type::now();
  /// Between a migration and the new worker's acceptance (the watchdog
  /// leaves it alone meanwhile).
  bool moving = false;
  /// The router placed this attempt (engine_id): route says where it is,
  /// so a quiet stream can be asked about (watch_streams).
  bool routed = false;
  /// Consecutive watchdog rounds in which every worker this attempt may
  /// be on said it does not hold it (request_status).
  int32_t unknown_rounds = 0;
  int32_t cached_tokens = 0;
  clock_type::time_point last_token;
};

/// The SDK client a job answers (sdk_gateway.hpp); id 0: an HTTP job.
struct sdk_origin {
  std::string node;
  uint64_t id = 0;
  bool detokenize = true;
};

/// One completion request in flight (HTTP, or an SDK client's: then `sdk`
/// is set and `res` is null).
struct job {
  sdk_origin sdk;
  uint64_t key = 0;
  api_request req;
  std::shared_ptr<http_response> res;
  response_meta meta;
  response_options opts;
  int32_t prompt_tokens = 0;
  /// The prompt's token ids (a migrated choice is routed again with them).
  std::vector<int32_t> prompt;
  std::vector<job_choice> choices;
  size_t admitted = 0;
  size_t finished = 0;
  bool streaming = false;
  /// Stream chunks produced before the stream started (tokens can arrive
  /// before the worker's "accepted" reply).
  std::vector<std::string> backlog;
  clock_type::time_point start;
  /// The tenant of the request's API key (sharing ownership of its key
  /// table, so a reload does not pull it away); null without API keys.
  std::shared_ptr<const cluster::tenant_policy> tenant;
  /// The engine request's cache_salt: the tenant's cache namespace and the
  /// body's cache_salt (compose_cache_salt).
  std::string cache_salt;
  /// The tenant's limits admitted it (tenant_limits::release at its end).
  bool limited = false;
  /// What is left of the output units its tenant's bucket holds for it
  /// (tenant_admission::held less the output charged so far): given back
  /// at its end.
  double held_units = 0;
  /// The engine priority (request_priority: the body's, capped by the
  /// tenant's).
  int32_t priority = 0;
};

/// The frontend's metrics.
struct frontend_metrics {
  explicit frontend_metrics(cluster::metrics_registry& r)
      : registry(r),
        in_flight(r.gauge("tessera_requests_in_flight", "Completion requests being served.")),
        ttft(r.histogram("tessera_time_to_first_token_seconds", "Time from request to first token.",
                         cluster::latency_buckets_seconds())),
        itl(r.histogram("tessera_inter_token_latency_seconds", "Time between tokens of a choice.",
                        cluster::latency_buckets_seconds())),
        duration(r.histogram("tessera_request_duration_seconds", "Time from request to last token.",
                             cluster::latency_buckets_seconds())),
        prompt_tokens(r.counter("tessera_prompt_tokens_total", "Prompt tokens of served requests.")),
        generated(r.counter("tessera_generation_tokens_total", "Tokens generated.")),
        cached(r.counter("tessera_prefix_cache_hit_tokens_total",
                         "Prompt tokens whose KV came from a prefix cache.")),
        workers(r.gauge("tessera_workers_healthy", "Workers the router sees as healthy.")),
        cancelled(r.counter("tessera_requests_cancelled_total",
                            "Requests cancelled because the client went away.")),
        migrated(r.counter("tessera_requests_migrated_total",
                           "Times a request's stream moved to another worker after its worker or "
                           "node failed (it goes on from the tokens already sent).")) {}

  /// Counts a request to `path` (its label bounded by endpoint_label).
  void request(std::string_view path) {
    registry
      .counter("tessera_requests_total", "HTTP requests by endpoint.", {{"endpoint", std::string{endpoint_label(path)}}})
      .inc();
  }
  void error(const std::string& kind) {
    registry.counter("tessera_request_errors_total", "Failed requests by kind.", {{"kind", kind}})
      .inc();
  }

  cluster::metrics_registry& registry;
  cluster::metric_gauge& in_flight;
  cluster::metric_histogram& ttft;
  cluster::metric_histogram& itl;
  cluster::metric_histogram& duration;
  cluster::metric_counter& prompt_tokens;
  cluster::metric_counter& generated;
  cluster::metric_counter& cached;
  cluster::metric_gauge& workers;
  cluster::metric_counter& cancelled;
  cluster::metric_counter& migrated;
};

struct frontend_state {
  static inline const char* name = "frontend";
  frontend_config cfg;
  std::unique_ptr<frontend_metrics> metrics;
  std::unordered_map<uint64_t, job> jobs;
  /// engine request id -> (job key, choice index)
  std::unordered_map<uint64_t, std::pair<uint64_t, size_t>> by_engine_id;
  remote_actor_cache<worker_actor> workers;
  uint64_t next_key = 1;
  uint64_t id_base = 0; // engine ids: id_base + counter, unique across frontends
  uint64_t next_id = 0;
  int64_t created = 0;
  /// Seeds for requests that come without one.
  std::mt19937_64 rng{std::random_device{}()};
  /// The tenants' rate and concurrency limits (API keys only).
  tenant_limits limits;
  /// Draining (graceful stop): new completions get 503, /health says so.
  bool draining = false;
  int64_t drain_timeout_ms = 0;
  /// Answered once no job is left (or at the drain's deadline).
  std::vector<caf::response_promise> drained;
  /// SDK jobs by (client node, client request id).
  std::map<std::pair<std::string, uint64_t>, uint64_t> sdk_jobs;
};

using frontend_pointer = frontend_impl::stateful_pointer<frontend_state>;

extern const std::string json_type;

/// Sends `e` as the response's JSON error body with its status.
void send_error(const std::shared_ptr<http_response>& res, const api_error& e);

/// The API error for a failure the router, a worker or the bridge reported.
[[nodiscard]] api_error to_api_error(const caf::error& err);

/// Why open_job did not start a completion: the error, and for a 429 the
/// Retry-After seconds.
struct job_refusal {
  api_error error;
  int64_t retry_after_s = 0;
};

/// Starts a completion from any door (an HTTP body, an SDK submit): the
/// model, the chat template, the prompt, the tenant's limits, then routes
/// and starts every choice (frontend.cpp). Returns the job's key.
[[nodiscard]] std::variant<uint64_t, job_refusal> open_job(frontend_pointer self, api_request req,
                                                           std::shared_ptr<const cluster::tenant_policy> tenant,
                                                           std::shared_ptr<http_response> res, sdk_origin sdk);

/// Stops every choice of job `key` still running and forgets it; ends it
/// with `e` first (fail_job) (frontend.cpp).
void drop_job(frontend_pointer self, uint64_t key, const std::string& why);
void fail_job(frontend_pointer self, uint64_t key, const api_error& e);

/// The SDK's side of a job (sdk_gateway.cpp): submit, cancel, info, a
/// client node gone, a job forgotten, a chunk to forward, a failure.
void sdk_submit(frontend_pointer self, wire::client_submit m);
void sdk_cancel(frontend_pointer self, const wire::client_cancel& m);
[[nodiscard]] caf::result<wire::cluster_info> sdk_info(frontend_pointer self);
void sdk_node_down(frontend_pointer self, const std::string& node);
void sdk_forget(frontend_state& st, const job& j);
void sdk_forward(frontend_pointer self, const job& j, const wire::token_chunk& out);
void sdk_fail(frontend_pointer self, const job& j, const api_error& e);

/// Moves choice `index` of job `key` to another worker (frontend.cpp).
void migrate(frontend_pointer self, uint64_t key, size_t index, const api_error& why);

/// The worker actor at `at` (frontend.cpp).
[[nodiscard]] worker_actor worker_at(frontend_pointer self, const wire::actor_address& at);

/// One round of the stream watchdog, and the next one scheduled
/// (frontend_watchdog.cpp).
void watch_streams(frontend_pointer self);

/// GET /health (each worker's state; 200 while a complete serving path is
/// healthy, else 503) and GET /ready (200 or 503 alike, a short body).
void health(frontend_pointer self, std::shared_ptr<http_response> res, bool ready_only = false);

/// GET /metrics: the process's series, with the router's healthy count.
void metrics(frontend_pointer self, std::shared_ptr<http_response> res);

/// Whether `call` carries the admin key (frontend_config::admin_key).
[[nodiscard]] bool admin_allowed(const frontend_state& st, const http_call& call);

/// The /admin/* endpoints: 404 without an admin key, 401 without it in
/// the request, else admin_fault or admin_drain (frontend_endpoints.cpp).
void admin(frontend_pointer self, const http_call& call);

/// POST /admin/fault and POST /admin/drain (frontend_endpoints.cpp).
void admin_fault(frontend_pointer self, const http_call& call);
void admin_drain(frontend_pointer self, const http_call& call);

} // namespace tessera::actors::frontend::detail
