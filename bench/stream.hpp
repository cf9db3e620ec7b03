#pragma once
/// @file
/// STREAM-style memory bandwidth measurement, the yardstick for the
/// memory-bound kernels (decode GEMV): what fraction of the machine's
/// attainable bandwidth does a kernel reach.

#include <cstddef>
#include <vector>

namespace tessera::engine::cpu {
class thread_pool;
}

namespace tessera::bench {

/// Rates in GB/s (1e9 bytes/s) of `repetitions` STREAM triads
/// a[i] = b[i] + s * c[i] over three f32 arrays of `array_bytes` each, run on
/// every thread of `pool` (each thread its contiguous slice, first-touched
/// by that thread). Counts 3 * array_bytes per triad (the STREAM
/// convention: write-allocate traffic is not counted). The arrays should be
/// much larger than the last-level cache. Default: 256 MiB arrays, 5 runs.
std::vector<double> measure_triad_samples_gb_s(engine::cpu::thread_pool& pool,
                                               size_t array_bytes = 256u << 20,
                                               int repetitions = 5);

/// The best of measure_triad_samples_gb_s (best, as STREAM reports it: the
/// run least disturbed by other work on a shared host).
double measure_triad_bandwidth_gb_s(engine::cpu::thread_pool& pool,
                                    size_t array_bytes = 256u << 20, int repetitions = 5);

} // namespace tessera::bench
