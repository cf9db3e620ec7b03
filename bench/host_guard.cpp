#include "bench/host_guard.hpp"

#include <nlohmann/json.hpp>

#include "bench/fixed_format.hpp"

namespace tessera::bench {

namespace {

/// What `s` grew by for `worker` (0 where either side lacks it).
double grew(const worker_series& s, const std::string& worker) {
  const auto a = s.before.find(worker);
  const auto b = s.after.find(worker);
  return a != s.before.end() && b != s.after.end() ? b->second - a->second : 0;
}

} // namespace

host_guard_verdict judge_host(const host_guard_input& in, const host_guard_limits& limits) {
  host_guard_verdict v;
  double asked = 0, taken = 0, delayed = 0;
  for (const auto& [worker, _] : in.asked_s.after) {
    const double a = grew(in.asked_s, worker);
    if (a <= 0)
      continue; // not a sim worker, or idle over the replay
    const double busy = grew(in.busy_s, worker);
    const double delay = grew(in.delay_s, worker);
    asked += a;
    taken += busy + delay;
    delayed += delay;
    v.workers[worker] = {{"asked_s", a}, {"busy_s", busy}, {"delay_s", delay}, {"stretch", (busy + delay) / a}};
  }
  if (asked > 0) {
    v.stretch = taken / asked;
    v.delay_share = delayed / asked;
  }
  if (v.stretch > limits.max_stretch)
    v.reason = "the workers' steps took " + fixed("%.2f", v.stretch) + "x the wall time the model asked for (limit " +
               fixed("%.2f", limits.max_stretch) + ")";
  else if (v.delay_share > limits.max_delay_share)
    v.reason = "the workers' steps waited " + fixed("%.1f%%", 100 * v.delay_share) +
               " of the modelled wall time to start (limit " + fixed("%.1f%%", 100 * limits.max_delay_share) + ")";
  else if (in.send_lag_p99_ms > limits.max_send_lag_p99_ms)
    v.reason = "the client sent requests up to " + fixed("%.0f", in.send_lag_p99_ms) +
               " ms late (p99; limit " + fixed("%.0f", limits.max_send_lag_p99_ms) + " ms)";
  v.host_bound = !v.reason.empty();
  return v;
}

nlohmann::json host_guard_json(const host_guard_verdict& v, const host_guard_input& in) {
  return {{"host_bound", v.host_bound},           {"stretch", v.stretch}, {"delay_share", v.delay_share},
          {"reason", v.reason},                   {"host_cpu_busy", in.host_cpu_busy},
          {"send_lag_p99_ms", in.send_lag_p99_ms}, {"workers", v.workers}};
}

} // namespace tessera::bench
