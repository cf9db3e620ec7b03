#pragma once
/// @file
/// The router's autoscaling signal on /metrics (autoscale.hpp has the
/// formula): the model units routed and served per role, folded into
/// rates, with the TTFT and ITL p90 of the last window, exported as
/// tessera_units_demanded_per_second{role},
/// tessera_units_served_per_second{role} and
/// tessera_autoscale_recommended_workers{role}. The router actor feeds it
/// and ticks it; it keeps no actor state of its own.

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "actors/router/autoscale.hpp"
#include "actors/router/route_types.hpp"

namespace tessera::cluster {
class metrics_registry;
} // namespace tessera::cluster

namespace tessera::actors {

/// Per role (prefill, decode, both), indexed by role_index.
template <class T>
using per_role = std::array<T, 3>;

/// The index of role `r` in a per_role array.
[[nodiscard]] constexpr size_t role_index(worker_role r) { return static_cast<size_t>(r); }

class autoscale_signal {
public:
  using clock = std::chrono::steady_clock;

  /// `units` of work were routed to a worker of role `r`.
  void demanded(worker_role r, double units) { demanded_[role_index(r)].add(units); }
  /// A worker of role `r` reports `units` of work done since its last report.
  void served(worker_role r, double units) { served_[role_index(r)].add(units); }

  /// Folds what was demanded and served since the last tick (at least
  /// 0.1 s ago, else nothing happens) into the rates, reads the TTFT and
  /// ITL histograms the frontend records in `reg` once per `opts.window`,
  /// and sets the gauges of each role `present`, with `healthy` workers.
  void tick(cluster::metrics_registry& reg, const autoscale_options& opts, const per_role<int32_t>& healthy,
            const per_role<bool>& present, clock::time_point now);

private:
  per_role<ewma_rate> demanded_;
  per_role<ewma_rate> served_;
  clock::time_point last_tick_ = clock::now();
  /// The TTFT and ITL histograms at the start of the current window, and
  /// their p90 over the last complete one.
  std::vector<uint64_t> ttft_before_, itl_before_;
  clock::time_point window_start_ = clock::now();
  std::optional<double> ttft_p90_ms_, itl_p90_ms_;
};

} // namespace tessera::actors
