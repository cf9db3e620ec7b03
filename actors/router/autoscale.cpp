#include "actors/router/autoscale.hpp"

#include <algorithm>
#include <cmath>

namespace tessera::actors {

void ewma_rate::tick(double dt_s, double tau_s) {
  if (!(dt_s > 0) || !(tau_s > 0))
    return;
  const double alpha = 1.0 - std::exp(-dt_s / tau_s);
  rate_ += alpha * (pending_ / dt_s - rate_);
  pending_ = 0;
}

int32_t recommended_workers(const autoscale_input& in, const autoscale_options& opts) {
  const double per_worker = opts.worker_units_per_second > 0 ? opts.worker_units_per_second : 1000.0;
  const double capacity = std::max(1e-9, per_worker * std::clamp(opts.target_utilization, 1e-3, 1.0));
  const double demand = std::isfinite(in.demanded_per_second) ? std::max(0.0, in.demanded_per_second) : 0.0;
  const double raw = std::ceil(demand / capacity - 1e-9);
  int32_t needed = raw >= 1e6 ? 1000000 : std::max<int32_t>(1, static_cast<int32_t>(raw));
  const bool ttft_missed = in.ttft_applies && opts.slo_ttft_ms > 0 && in.ttft_p90_ms && *in.ttft_p90_ms > opts.slo_ttft_ms;
  const bool itl_missed = in.itl_applies && opts.slo_itl_ms > 0 && in.itl_p90_ms && *in.itl_p90_ms > opts.slo_itl_ms;
  if (ttft_missed || itl_missed)
    needed = std::max(needed, std::max(0, in.workers) + 1);
  return needed;
}

std::optional<double> histogram_quantile(std::span<const double> bounds, std::span<const uint64_t> before,
                                         std::span<const uint64_t> now, double q) {
  if (bounds.empty() || now.size() != bounds.size() + 1 || (!before.empty() && before.size() != now.size()))
    return std::nullopt;
  auto delta = [&](size_t i) { return now[i] - (before.empty() ? 0 : std::min(before[i], now[i])); };
  const auto total = delta(bounds.size());
  if (total == 0)
    return std::nullopt;
  const double rank = q * static_cast<double>(total);
  uint64_t prev = 0;
  for (size_t i = 0; i < bounds.size(); ++i) {
    const auto c = delta(i);
    if (static_cast<double>(c) >= rank) {
      const double lo = i == 0 ? 0.0 : bounds[i - 1];
      const double in_bucket = static_cast<double>(c - prev);
      const double frac = in_bucket > 0 ? (rank - static_cast<double>(prev)) / in_bucket : 1.0;
      return lo + (bounds[i] - lo) * std::clamp(frac, 0.0, 1.0);
    }
    prev = c;
  }
  return bounds.back();
}

} // namespace tessera::actors
