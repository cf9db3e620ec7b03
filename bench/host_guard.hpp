#pragma once
/// @file
/// The host-saturation guard of `bench trace`: whether a replay against the
/// sim engine measured the modelled GPUs or this machine's CPUs.
///
/// The sim engine's figures are the model's only while the host keeps up:
/// each step is asked to last its modelled time x time_scale
/// (tessera_sim_step_wall_seconds_total); the worker counts the wall time
/// its steps took (tessera_engine_busy_seconds_total) and how long each
/// waited to start after it was due (tessera_engine_step_delay_seconds_total).
/// On a host that keeps up, busy + delay exceeds the asked time only by a
/// step's fixed bookkeeping; on starved cores steps overrun and wait, and
/// every latency the replay reports grows with the host's load, not the
/// model's. The client's own send lag (how late it sent requests against
/// the trace's schedule) is the same question asked of the load generator.
///
/// The verdict: host_bound when the workers' steps took more than
/// max_stretch times the wall time the model asked for (summed over the
/// sim workers: a step's own bookkeeping on a host that keeps up is part of
/// it, about 1.26x for decode-heavy replays at time_scale 0.1 here, so the
/// limit sits above that), when steps waited to start for more than
/// max_delay_share of the asked time (cores busy elsewhere), or when the
/// client's send lag p99 exceeded max_send_lag_p99_ms. The limits were set
/// from three replays of one workload (bench/README.md), not calibrated
/// across machines.
/// `bench trace` then leaves TTFT and ITL out of its table unless
/// --allow-host-bound (the JSON keeps them, with host_bound: true).

#include <map>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace tessera::bench {

/// A metric's per-worker values (metric_by_label), before and after.
struct worker_series {
  std::map<std::string, double> before;
  std::map<std::string, double> after;
};

/// What the guard reads.
struct host_guard_input {
  worker_series busy_s;   // tessera_engine_busy_seconds_total
  worker_series delay_s;  // tessera_engine_step_delay_seconds_total
  worker_series asked_s;  // tessera_sim_step_wall_seconds_total
  /// The client's send lag p99, ms.
  double send_lag_p99_ms = 0;
  /// The machine's busy share over the replay (cpu_busy_share), 0..1.
  double host_cpu_busy = 0;
};

/// Its thresholds.
struct host_guard_limits {
  /// Steps may take this many times the asked wall time (the fixed cost
  /// of a step's scheduling and sampling on a host that keeps up stays
  /// under it).
  double max_stretch = 1.3;
  /// Steps may wait to start this share of the asked wall time.
  double max_delay_share = 0.05;
  double max_send_lag_p99_ms = 100;
};

/// The verdict.
struct host_guard_verdict {
  bool host_bound = false;
  /// Sum of (busy + delay) over sum of asked, over the sim workers (0
  /// where no worker asked for time: a non-sim engine, whose figures are
  /// the host's by design).
  double stretch = 0;
  /// Sum of the step delays over sum of asked.
  double delay_share = 0;
  /// Why it is host-bound ("" if not).
  std::string reason;
  /// Per worker: asked_s, busy_s, delay_s, stretch.
  std::map<std::string, std::map<std::string, double>> workers;
};

[[nodiscard]] host_guard_verdict judge_host(const host_guard_input& in, const host_guard_limits& limits = {});

/// The verdict as JSON: host_bound, stretch, reason, host_cpu_busy,
/// send_lag_p99_ms, workers.
[[nodiscard]] nlohmann::json host_guard_json(const host_guard_verdict& v, const host_guard_input& in);

} // namespace tessera::bench
