#pragma once
/// @file
/// `tessera bench tenants`: two tenants on one server, one flooding it.
/// Spawns `tessera serve` with a key file of two tenants and measures
/// whether the tenants' rate limits and priorities (actors/frontend/
/// tenant_limits.hpp) keep the well-behaved one fast:
///
///   calibrate: a server with both tenants unlimited, C closed-loop
///              clients: the capacity in requests/s of the request shape;
///   phase 1:   a fresh server, tenant B ("steady", priority b_priority)
///              alone, Poisson arrivals at b_share x capacity;
///   phase 2:   B as in phase 1, plus tenant A ("flood", priority
///              a_priority, units_per_minute = a_limit_share x capacity
///              in model units) at flood_factor x capacity.
///
/// Prints B's time to first token p50/p90 alone and beside the flood (and
/// their ratio), A's answers (200, 429, timeouts, other errors) and the
/// requests lost (no complete answer: a broken stream or connection, a
/// timeout); writes JSON if asked. Targets (issue 16): B's p50 within 1.5x
/// of B alone, A gets 429s not timeouts, none lost. Progress on stderr.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace tessera::bench {

/// Options of the two-tenant benchmark.
struct tenant_bench_options {
  /// The tessera binary (the CLI passes /proc/self/exe's target). Required.
  std::string server_program;
  /// Model folder of the spawned servers (--model), and where the model's
  /// units (tessera_serving.json) are read to size A's limit. Required.
  std::string model_dir;
  /// Extra arguments of `tessera serve`, e.g. {"--engine", "sim"}. Their
  /// --engine and --sim-gpu also choose the units entry.
  std::vector<std::string> server_args;
  /// The "model" of each request; empty: the first /v1/models lists.
  std::string model_name;
  /// Prompt tokens per request. Default: 128.
  int prompt_tokens = 128;
  /// Tokens generated per request (max_tokens, ignore_eos). Default: 32.
  int output_tokens = 32;
  /// Seconds and closed-loop clients of the capacity run. Defaults: 15, 8.
  double calibrate_s = 15;
  int calibrate_concurrency = 8;
  /// Seconds of each phase. Default: 30.
  double phase_s = 30;
  /// A's offered load, x capacity. Default: 4.
  double flood_factor = 4;
  /// B's offered load, x capacity. Default: 0.1.
  double b_share = 0.1;
  /// A's units_per_minute, x the capacity in model units per minute.
  /// Default: 0.5.
  double a_limit_share = 0.5;
  /// The tenants' priorities in the key file (higher first). Defaults: 0, 10.
  int a_priority = 0;
  int b_priority = 10;
  /// Seeds the prompts and the arrival times. Default: 0.
  uint64_t seed = 0;
  /// Where to write JSON results ("" for none).
  std::string json_path;
  /// Longest wait for any step of a request (then it counts as a timeout).
  /// Default: 120 s.
  std::chrono::milliseconds io_timeout{120'000};
};

/// Runs the benchmark; 0 when it ran (whether or not the targets were
/// met: the table says), 1 when it could not (the server did not start,
/// nothing succeeded in the capacity run, a bad option).
[[nodiscard]] int run_tenant_bench(const tenant_bench_options& opts);

} // namespace tessera::bench
