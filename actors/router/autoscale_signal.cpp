#include "actors/router/autoscale_signal.hpp"

#include <algorithm>

#include "cluster/metrics.hpp"

namespace tessera::actors {

void autoscale_signal::tick(cluster::metrics_registry& reg, const autoscale_options& opts,
                            const per_role<int32_t>& healthy, const per_role<bool>& present, clock::time_point now) {
  const double dt = std::chrono::duration<double>(now - last_tick_).count();
  if (dt < 0.1)
    return;
  last_tick_ = now;
  const double tau = std::max(1.0, static_cast<double>(opts.window.count())) / 1000.0;
  for (size_t r = 0; r < 3; ++r) {
    demanded_[r].tick(dt, tau);
    served_[r].tick(dt, tau);
  }
  auto& ttft = reg.histogram("tessera_time_to_first_token_seconds", "Time from request to first token.",
                             cluster::latency_buckets_seconds());
  auto& itl = reg.histogram("tessera_inter_token_latency_seconds", "Time between tokens of a choice.",
                            cluster::latency_buckets_seconds());
  if (now - window_start_ >= opts.window) {
    auto p90_ms = [](const cluster::metric_histogram& h, const std::vector<uint64_t>& before,
                     const std::vector<uint64_t>& counts) -> std::optional<double> {
      if (auto q = histogram_quantile(h.bounds(), before, counts, 0.9))
        return *q * 1000.0;
      return std::nullopt;
    };
    auto t = ttft.cumulative_counts();
    auto i = itl.cumulative_counts();
    ttft_p90_ms_ = p90_ms(ttft, ttft_before_, t);
    itl_p90_ms_ = p90_ms(itl, itl_before_, i);
    ttft_before_ = std::move(t);
    itl_before_ = std::move(i);
    window_start_ = now;
  }
  for (auto role : {worker_role::prefill, worker_role::decode, worker_role::both}) {
    const auto r = role_index(role);
    if (!present[r])
      continue;
    const cluster::metric_labels labels{{"role", to_string(role)}};
    autoscale_input in;
    in.demanded_per_second = demanded_[r].per_second();
    in.served_per_second = served_[r].per_second();
    in.workers = healthy[r];
    in.ttft_p90_ms = ttft_p90_ms_;
    in.itl_p90_ms = itl_p90_ms_;
    in.ttft_applies = role != worker_role::decode;
    in.itl_applies = role != worker_role::prefill;
    reg.gauge("tessera_units_demanded_per_second",
              "Model units of the requests routed per second (EWMA), by the role of the worker they went to.",
              labels)
      .set(in.demanded_per_second);
    reg.gauge("tessera_units_served_per_second",
              "Model units of work workers did per second (EWMA, from their heartbeats), by role.", labels)
      .set(in.served_per_second);
    reg.gauge("tessera_autoscale_recommended_workers",
              "Workers of the role the demand in model units and the TTFT/ITL SLO call for "
              "(ceil(demanded / (worker capacity x target utilization)), raised above the current "
              "count while the SLO is missed).",
              labels)
      .set(recommended_workers(in, opts));
  }
}

} // namespace tessera::actors
