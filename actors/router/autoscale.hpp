#pragma once
/// @file
/// The autoscaling signal: how many workers of a role the demand in model
/// units (engine/model_units.hpp) needs. Plain functions and a rate
/// estimator; the router actor feeds them and exports the results on
/// /metrics as tessera_units_demanded_per_second{role},
/// tessera_units_served_per_second{role} and
/// tessera_autoscale_recommended_workers{role}.
///
/// The formula:
///
///   capacity  = worker_units_per_second * target_utilization
///   needed    = ceil(demanded_per_second / capacity), at least 1
///   if the SLO is missed (TTFT p90 > slo_ttft_ms for prefill and both,
///   ITL p90 > slo_itl_ms for decode and both, over the last window):
///     needed  = max(needed, workers + 1)
///
/// worker_units_per_second is what one worker serves per wall second when
/// busy all the time: fitted units are milliseconds of one worker's time
/// (`tessera bench units`), so 1000; on the sim, whose modelled second
/// takes time_scale wall seconds, 1000 / time_scale (serve and node derive
/// it when it is 0). With unfitted units (a = b = 1, c = 0: tokens) it is
/// the worker's tokens per second, which the operator must give. Demand
/// and service are exponentially weighted rates with time constant
/// `window` (10 s), so a burst shows within seconds and one slow request
/// does not.

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>

namespace tessera::actors {

struct autoscale_options {
  /// TTFT SLO in ms; 0: none.
  double slo_ttft_ms = 0;
  /// Inter-token latency SLO in ms; 0: none.
  double slo_itl_ms = 0;
  /// Units one worker serves per wall second when always busy; 0: 1000
  /// (serve and node: 1000 / the sim's time scale). Default: 0.
  double worker_units_per_second = 0;
  /// Fraction of that capacity a worker should run at, in (0, 1]. Default:
  /// 0.8 (headroom for bursts before latency climbs).
  double target_utilization = 0.8;
  /// Time constant of the rates and the latency window. Default: 10 s.
  std::chrono::milliseconds window{10000};
};

/// An exponentially weighted rate of units per second.
class ewma_rate {
public:
  /// Units arrived (demand) or done (service) since the last tick.
  void add(double units) { pending_ += units; }
  /// Folds what was added in the last `dt_s` seconds into the rate with
  /// time constant `tau_s` (both > 0).
  void tick(double dt_s, double tau_s);
  [[nodiscard]] double per_second() const { return rate_; }

private:
  double pending_ = 0;
  double rate_ = 0;
};

/// What the recommendation for one role is computed from.
struct autoscale_input {
  double demanded_per_second = 0;
  double served_per_second = 0;
  /// Healthy workers of the role now.
  int32_t workers = 0;
  /// p90 over the last window; nullopt: no observation.
  std::optional<double> ttft_p90_ms;
  std::optional<double> itl_p90_ms;
  /// Whether the TTFT and the ITL SLO apply to the role (prefill: TTFT,
  /// decode: ITL, both: both).
  bool ttft_applies = true;
  bool itl_applies = true;
};

/// Workers needed (see the file comment); >= 1.
[[nodiscard]] int32_t recommended_workers(const autoscale_input& in, const autoscale_options& opts);

/// The q-quantile (0 < q < 1) of the observations made between two
/// snapshots of a histogram's cumulative counts (metric_histogram::
/// cumulative_counts: one per bound, then the total), linearly
/// interpolated inside the bucket; nullopt when nothing was observed. An
/// observation past the last bound counts as the last bound.
[[nodiscard]] std::optional<double> histogram_quantile(std::span<const double> bounds,
                                                       std::span<const uint64_t> before,
                                                       std::span<const uint64_t> now, double q);

} // namespace tessera::actors
