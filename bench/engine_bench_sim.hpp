#pragma once
/// @file
/// `tessera bench engine --engine sim`: the engine benchmark's loads (one
/// prefill, decode at each concurrency) on the sim backend, reporting the
/// modelled GPU's throughput (tokens / modelled seconds), each step's
/// modelled time and regime (memory- or compute-bound), and the host CPU
/// time the sim itself spends per step. It runs without waiting (time
/// scale 0): modelled time does not depend on it.

#include "bench/engine_bench.hpp"

namespace tessera::bench {

/// Runs the benchmark on the sim backend of `opts.engine`; prints a table,
/// writes JSON if asked. Returns a process exit code.
int run_sim_engine_bench(const engine_bench_options& opts);

} // namespace tessera::bench
