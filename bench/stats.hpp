#pragma once
/// @file
/// Summary statistics of benchmark samples.

#include <algorithm>
#include <cmath>
#include <vector>

namespace tessera::bench {

/// The p-th percentile (p in [0, 100]) of `samples` by the nearest-rank
/// method: the smallest sample with at least p% of the samples at or below
/// it. 0 for no samples.
[[nodiscard]] inline double percentile(std::vector<double> samples, double p) {
  if (samples.empty())
    return 0;
  std::sort(samples.begin(), samples.end());
  const double n = static_cast<double>(samples.size());
  auto rank = static_cast<size_t>(std::ceil(std::clamp(p, 0.0, 100.0) / 100.0 * n));
  return samples[rank == 0 ? 0 : rank - 1];
}

} // namespace tessera::bench
