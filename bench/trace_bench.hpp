#pragma once
/// @file
/// `tessera bench trace`: replays a Mooncake-format request trace
/// (mooncake_trace.hpp) against a running cluster, open loop at the trace's
/// arrival times (optionally sped up), and reports how much of the trace's
/// prefix sharing the cluster's caches turned into hits: the token-level
/// hit rate beside the unbounded-cache optimum of the same requests
/// (trace_cache_optimum.hpp), the prefill tokens computed, TTFT and
/// inter-token latency p50/p90/p99, throughput and errors. Prints a table
/// row, progress lines on stderr, and writes JSON (with per-window time
/// series) and an SVG chart of hit rate and TTFT over trace time if asked.
/// One run measures one configuration (the server at --url, or one it
/// spawns with --server-args); `compare` prints the rows of several runs'
/// JSON files side by side.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "bench/trace_prompt.hpp"

namespace tessera::bench {

/// Options of the trace benchmark.
struct trace_bench_options {
  /// The trace file (JSON lines). Required unless `compare` is given.
  std::string trace_path;
  /// The server, "http://host:port". Required unless spawn_server or
  /// optimum_only.
  std::string url;
  /// The other nodes' metrics endpoints, "http://host:port" (a cluster
  /// whose workers run on nodes of their own: their engine series are on
  /// those nodes, not the frontend's): the host guard, worker busy, KV
  /// fetches, preemptions and tokens computed read them too.
  std::vector<std::string> metrics_urls;
  /// The "model" of each request; empty: the first /v1/models lists.
  std::string model_name;
  /// Names this configuration in the table and JSON. Default: the server
  /// arguments, or the URL.
  std::string label;
  /// Trace time / replay time. Default: 1.
  double speedup = 1;
  /// > 0: only the requests of the first `minutes` of the trace. Default: 0.
  double minutes = 0;
  /// > 0: only the first this many requests (after `minutes`). Default: 0.
  size_t max_requests = 0;
  /// > 0: skip requests with more input tokens (a model's context limit).
  /// Default: 0.
  int64_t max_input_tokens = 0;
  /// > 0: max_tokens = min(output_length, max_output). Default: 0.
  int64_t max_output = 0;
  /// Tokens per hash id. Default: 512 (the Mooncake traces').
  int64_t block_tokens = 512;
  /// Token ids blocks are drawn from. Default: 8..263 (demo byte tokens).
  token_range tokens;
  /// Seeds the blocks' tokens. Default: 0.
  uint64_t seed = 0;
  /// Window of trace time for the time series, seconds. Default: 30.
  double window_s = 30;
  /// Where to write JSON results ("" for none).
  std::string json_path;
  /// Also write one record per request into the JSON ("per_request").
  /// Default: false.
  bool per_request_json = false;
  /// Report TTFT and ITL in the table even when the host-saturation guard
  /// (host_guard.hpp) finds the host, not the modelled GPUs, bound the run.
  bool allow_host_bound = false;
  /// Where to write the SVG chart ("" for none).
  std::string svg_path;
  /// Longest wait for any step of a request. Default: 300 s.
  std::chrono::milliseconds io_timeout{300'000};
  /// Only compute and print the trace's optimum (no server).
  bool optimum_only = false;
  /// Result JSON files to print as one table (nothing is replayed).
  std::vector<std::string> compare;

  /// Start `server_program serve --port 0 [--model model_dir] server_args...`
  /// for the run and stop it after.
  bool spawn_server = false;
  /// The tessera binary (the CLI passes /proc/self/exe's target).
  std::string server_program;
  /// Extra arguments of `tessera serve`.
  std::vector<std::string> server_args;
  /// Model folder for a spawned server (empty: its built-in demo model).
  std::string model_dir;
};

/// Runs the benchmark. Returns a process exit code: 0; 1 when a request
/// failed (the table, JSON and SVG are still written) or the set-up did
/// (server start, /health, writing results); 2 for bad options or a bad
/// trace file (the message names the file, line and field).
int run_trace_bench(const trace_bench_options& opts);

} // namespace tessera::bench
