#pragma once
/// @file
/// `tessera bench engine`: prefill and decode throughput of one CPU engine,
/// with the machine's memory bandwidth measured in the same run so decode
/// at batch 1 can be reported as a fraction of its roofline. With the sim
/// backend (engine.kind sim) the same loads report the modelled GPU's
/// throughput instead (engine_bench_sim.hpp).

#include <string>
#include <vector>

#include "engine/factory/backend_factory.hpp"

namespace tessera::bench {

/// Options of the engine benchmark.
struct engine_bench_options {
  /// Model folder (required).
  std::string model;
  /// Where to write the JSON results ("" for none).
  std::string json_path;
  /// Where to write an SVG chart of decode throughput ("" for none).
  std::string svg_path;
  /// CPU threads; <= 0 means all cores. Default: 0.
  int threads = 0;
  /// Repetitions of each measurement; the median is reported. Default: 3.
  int runs = 3;
  /// Prompt length of the prefill measurement. Default: 512.
  int prefill_tokens = 512;
  /// Tokens generated per sequence in decode measurements. Default: 128.
  int decode_tokens = 128;
  /// Prompt length of each decode sequence. Default: 16.
  int decode_prompt_tokens = 16;
  /// Concurrencies of the decode measurement. Default: 1, 4, 16, 32.
  std::vector<int> concurrency = {1, 4, 16, 32};
  /// The backend. Default: cpu.
  engine::backend_choice engine;
};

/// Runs the benchmark, prints a table to stdout (progress to stderr) and
/// writes JSON if asked. Returns a process exit code.
int run_engine_bench(const engine_bench_options& opts);

} // namespace tessera::bench
