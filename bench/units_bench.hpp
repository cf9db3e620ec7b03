#pragma once
/// @file
/// `tessera bench units`: fits a model's units (engine/model_units.hpp) for
/// one engine. For each point of a grid of input x output lengths it runs
/// `concurrency` requests of that shape together on a fresh engine (prefix
/// caching off) and takes the request's cost as the engine time the batch
/// took divided by the requests in it, in milliseconds: wall time on the
/// CPU engine, modelled GPU time on the sim (which then runs without
/// waiting). One unit is then one millisecond of one worker's time. a, b,
/// c, d come from a non-negative least-squares fit of cost = a * in + c +
/// b * out + d * (in * out + out * (out - 1) / 2) (model_units::cost); the
/// table shows each point measured against predicted, with d and without it
/// (the a, b, c model), and both fits' relative RMS errors; --write stores the fit in the model folder's serving config
/// (tessera_serving.json) under the engine's key ("cpu", "sim-h100").

#include <string>
#include <vector>

#include "engine/factory/backend_factory.hpp"

namespace tessera::bench {

struct units_bench_options {
  /// Model folder (required).
  std::string model;
  /// Where to write the JSON results ("" for none).
  std::string json_path;
  /// Store the fit in the model folder's serving config.
  bool write = false;
  /// Prompt lengths of the grid (>= 2 distinct values).
  std::vector<int> inputs = {32, 128, 384};
  /// Output lengths of the grid (>= 2 distinct values).
  std::vector<int> outputs = {4, 16, 48};
  /// Requests run together at each grid point. Default: 8.
  int concurrency = 8;
  /// CPU threads; <= 0 means all cores.
  int threads = 0;
  /// The backend. Default: cpu.
  engine::backend_choice engine;
};

/// Runs the benchmark; prints the table to stdout (progress to stderr).
/// Returns a process exit code (1: a model, engine or fit error, 2: bad
/// options).
int run_units_bench(const units_bench_options& opts);

} // namespace tessera::bench
