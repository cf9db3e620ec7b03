#pragma once
/// @file
/// Whether a worker is healthy, and whether the cluster can serve, from the
/// evidence the router collects: each worker's heartbeats (liveness), its
/// node's connection (the bridge's node_down), and a canary request the
/// router sends it about once a second at the engine's top priority (it
/// runs ahead of user work, so a full queue does not make a healthy worker
/// look dead; a stuck engine or a worker that cannot compute does). Plain
/// classes over a clock passed in; no actors.
///
/// One worker:
///
///   heartbeat / join -----> last_seen = now; node up again
///   node_down ------------> unhealthy ("node 'n' disconnected") until a
///                           heartbeat arrives
///   canary sent ----------> outstanding (one at a time)
///     token back ---------> passed: outstanding cleared, failure cleared
///     error / failed -----> failed: unhealthy with the error until a
///                           canary passes
///     none by timeout ----> late: unhealthy at once (check()); expire()
///                           turns it into a failure so the next one goes
///                           (a timed-out one, still counted as lateness)
///
/// check() says unhealthy, with the first reason that holds, in this
/// order: node down, no heartbeat for heartbeat_timeout, canary late,
/// canary failed. Detection after a worker's process dies or stops is
/// therefore at most heartbeat_timeout (or the bridge's node_down, when
/// the connection fails first).
///
/// The verdict also says what kind of fault it is (health_fault), the
/// worst that holds: node_down, then canary_failed (a canary ended with an
/// error), then late (a heartbeat or a canary's answer did not come in
/// time: a stopped process, or one a saturated host did not run in time;
/// nothing failed). Panic routing (router_policy.hpp) uses late workers
/// when no worker that can decode is healthy; never the other two.

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "actors/router/route_types.hpp"

namespace tessera::actors {

/// How the router judges workers.
struct health_options {
  /// A worker without a heartbeat (or join) for this long is unhealthy.
  /// Workers beat every 300 ms (worker_config::heartbeat_interval) from
  /// their engine's thread, between steps, so this allows three lost
  /// beats, or one beat late behind an engine step of up to ~0.9 s, and
  /// leaves room under the 2 s in which /ready must tell. Default: 1.2 s.
  std::chrono::milliseconds heartbeat_timeout{1200};
  /// How often each worker gets a canary (a 1-token prompt, max_tokens 1,
  /// at canary_priority); 0: never (heartbeats only). Default: 1 s.
  std::chrono::milliseconds canary_interval{1000};
  /// How long a canary may take, from sending to its token; past it the
  /// worker is unhealthy. Default: 1.5 s.
  std::chrono::milliseconds canary_timeout{1500};
};

/// What kind of unhealthy a worker is, from mildest to worst.
enum class health_fault : uint8_t {
  /// Healthy.
  none,
  /// Only late: its node is connected and no canary failed with an error,
  /// but a heartbeat is older than heartbeat_timeout or a canary went
  /// unanswered past canary_timeout. A stopped process and one whose host
  /// is too busy to run it in time look alike here.
  late,
  /// A canary failed with an error (the worker refused it, or its engine
  /// failed it): the worker cannot compute.
  canary_failed,
  /// The bridge lost the connection to its node.
  node_down,
};

/// "none", "late", "canary_failed", "node_down".
const char* to_string(health_fault f);

/// A worker's health as check() sees it.
struct health_verdict {
  bool healthy = false;
  /// Why it is unhealthy; empty when healthy.
  std::string reason;
  /// The worst fault that holds; none exactly when healthy.
  health_fault fault = health_fault::none;
};

/// The evidence about one worker. Thread-compatible.
class worker_health {
public:
  using clock = std::chrono::steady_clock;

  /// A worker first heard of at `now` (its join counts as a heartbeat).
  explicit worker_health(clock::time_point now) : last_seen_(now) {}

  /// A heartbeat or join arrived: the worker is alive, its node is up.
  void heard(clock::time_point now);
  /// The bridge lost the connection to the worker's node `node`.
  void node_down(const std::string& node, clock::time_point now);

  /// Whether to send a canary now: none is outstanding, the node is not
  /// known to be down, and canary_interval passed since the last one.
  [[nodiscard]] bool canary_due(clock::time_point now, const health_options& opts) const;
  /// Canary `id` was sent at `now` (it becomes the outstanding one).
  void canary_sent(uint64_t id, clock::time_point now);
  /// Canary `id` finished with a token at `now`. Returns false (and changes
  /// nothing) when `id` is not the outstanding canary.
  bool canary_passed(uint64_t id, clock::time_point now);
  /// Canary `id` failed (`why` names how). Returns false (and changes
  /// nothing) when `id` is not the outstanding canary.
  bool canary_failed(uint64_t id, std::string why, clock::time_point now);
  /// Canary `id` timed out on its way (its admission was not answered in
  /// time, `why` says so): unhealthy with `why` until a canary passes, as
  /// canary_failed, but the fault is lateness (health_fault::late).
  /// Returns false (and changes nothing) when `id` is not outstanding.
  bool canary_timed_out(uint64_t id, std::string why, clock::time_point now);
  /// The outstanding canary, if it is past canary_timeout, becomes a
  /// failure (so the next one can be sent) whose fault is lateness;
  /// returns its id, else nullopt.
  std::optional<uint64_t> expire_canary(clock::time_point now, const health_options& opts);

  /// Healthy, or unhealthy with the reason (see the file comment).
  [[nodiscard]] health_verdict check(clock::time_point now, const health_options& opts) const;

  [[nodiscard]] clock::time_point last_seen() const { return last_seen_; }
  /// The outstanding canary's id.
  [[nodiscard]] std::optional<uint64_t> outstanding_canary() const { return canary_id_; }
  /// How long the last canary that passed took; nullopt before one did.
  [[nodiscard]] std::optional<std::chrono::milliseconds> last_canary_latency() const {
    return canary_latency_;
  }

private:
  clock::time_point last_seen_;
  /// Set while the bridge says the node is disconnected: its name and since when.
  std::optional<std::string> down_node_;
  clock::time_point down_since_;
  std::optional<uint64_t> canary_id_;
  clock::time_point canary_sent_at_;
  bool canary_ever_sent_ = false;
  /// The last finished canary's failure; empty once one passes.
  std::string canary_error_;
  /// Whether that failure was a timeout (lateness), not an error.
  bool canary_error_late_ = false;
  std::optional<std::chrono::milliseconds> canary_latency_;
};

/// Sets `w.healthy` and `w.late` (route_types.hpp) from verdict `v`: a
/// worker an operator drained is neither (drains are never overridden).
void set_health(worker_load& w, const health_verdict& v, bool drained);

/// One worker's state, as /health reports it.
struct worker_status {
  /// The worker's published name and node (its join's address).
  std::string name;
  std::string node;
  worker_role role = worker_role::both;
  bool healthy = false;
  /// Why it is unhealthy; empty when healthy.
  std::string reason;
  /// What kind of unhealthy (health_verdict::fault). A drained worker is
  /// unhealthy with its own fault, often none (drains are no fault).
  health_fault fault = health_fault::none;
  /// Milliseconds since its last heartbeat or join.
  int64_t last_seen_ms = 0;
  /// The last passed canary's round trip; -1 before one passed.
  int64_t canary_ms = -1;
};

/// The cluster's state for /health and /ready.
enum class serving_status : uint8_t {
  /// No worker has joined yet.
  starting,
  /// Every worker is healthy (and there is a serving path).
  ok,
  /// A serving path exists but some worker is unhealthy.
  degraded,
  /// Workers joined but no complete serving path is healthy.
  unavailable,
};

/// "starting", "ok", "degraded", "unavailable".
const char* to_string(serving_status s);

/// What assess_serving() concluded.
struct serving_health {
  serving_status status = serving_status::starting;
  /// At least one complete serving path is healthy (/ready 200, /health 200).
  bool ready = false;
  /// Healthy workers.
  size_t healthy = 0;
  /// Why the cluster is not ready, or what is degraded; empty when ok.
  std::string reason;
};

/// Whether `workers` hold a complete serving path: a healthy worker that
/// can decode (role decode or both). It is what router_policy needs to
/// place a request: a decode worker prefills its own prompts when no
/// prefill worker is healthy, and a prefill worker alone serves nothing.
[[nodiscard]] serving_health assess_serving(std::span<const worker_status> workers);

} // namespace tessera::actors
