#pragma once
/// @file
/// `tessera bench serve`: a closed-loop load generator for the
/// OpenAI-compatible HTTP API. C clients (keep-alive connections driven on
/// one thread) each stream a /v1/completions request, and send the next as
/// soon as the previous one ends. Every request has the same shape: a
/// prompt of exactly N token ids (load_prompt), max_tokens M with
/// ignore_eos (so it generates exactly M tokens), greedy sampling, and
/// stream_options.include_usage (the usage chunk gives the token count).
///
/// Per concurrency level it reports requests, errors, time to first token
/// and inter-token latency p50/p90/p99, requests/s and output tokens/s;
/// optionally beside the same load run on the engine alone in this process
/// (engine_load.hpp), with the ratio. Prints a table, progress lines on
/// stderr, and writes JSON and an SVG chart if asked.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/factory/backend_factory.hpp"

namespace tessera::bench {

/// Options of the serve benchmark.
struct serve_bench_options {
  /// The server, "http://host:port". Required unless spawn_server.
  std::string url;
  /// The "model" of each request; empty: the first model /v1/models lists.
  std::string model_name;
  /// Concurrency levels, run in this order. Default: 1, 16, 64.
  std::vector<int> concurrency = {1, 16, 64};
  /// Prompt tokens per request. Default: 128.
  int prompt_tokens = 128;
  /// Tokens generated per request. Default: 128.
  int output_tokens = 128;
  /// Requests per level; 0: 4 x concurrency, at least 8. Ignored when
  /// duration_s > 0. Default: 0.
  int requests = 0;
  /// > 0: each level sends requests for this many seconds (then waits for
  /// those in flight) instead of a request count. Default: 0.
  double duration_s = 0;
  /// Requests sent one at a time before the first level, not measured
  /// (pages the weights in, warms the allocators). Default: 1.
  int warmup_requests = 1;
  /// Seeds the prompts. Default: 0.
  uint64_t seed = 0;
  /// Where to write JSON results ("" for none).
  std::string json_path;
  /// Where to write an SVG chart of output tokens/s per level ("" for none).
  std::string svg_path;
  /// Longest wait for any step of a request (connect, write, next bytes).
  /// Default: 300 s.
  std::chrono::milliseconds io_timeout{300'000};

  /// Start `server_program serve --port 0 [--model model_dir] server_args...`
  /// afresh for each level, wait for /health, send the warm-up requests,
  /// run the level, stop it (SIGTERM): the engine-alone level that follows
  /// has the cores to itself.
  bool spawn_server = false;
  /// The tessera binary (the CLI passes /proc/self/exe).
  std::string server_program;
  /// Extra arguments of `tessera serve`, e.g. {"--mode", "agg", "--decode", "1"}.
  std::vector<std::string> server_args;
  /// Model folder: passed to a spawned server as --model (empty: its
  /// built-in demo model) and loaded by the engine baseline.
  std::string model_dir;

  /// Also run every level on the engine alone (engine_load.hpp) with the
  /// model in model_dir (required then), right after the server's run of
  /// the level, with the same requests.
  bool engine_baseline = false;
  /// Threads of the baseline engine; <= 0: all cores. Default: 0.
  int engine_threads = 0;
  /// KV pool of the baseline engine; match the server's --kv-cache-mb.
  /// Default: 256 MiB (the server's default).
  size_t engine_kv_cache_bytes = size_t{256} << 20;
  /// Backend of the baseline engine; match the server's --engine and
  /// --sim-* (the CLI's --engine / --sim-* set this; give the spawned
  /// server the same in --server-args). Default: cpu.
  engine::backend_choice engine_backend;

  /// --sdk HOST:PORT: also run every level over the native client SDK
  /// (serve_sdk_level.hpp) at this frontend node's cluster address, right
  /// after its HTTP run, with requests of the same shape (prompts of their
  /// own, so the prefix cache favours neither); the table and JSON show
  /// both. Needs a `tessera node` cluster (--url its frontend's HTTP), not
  /// --spawn-server (whose `tessera serve` has no cluster wire).
  std::string sdk_address;
  /// Its cluster secret file.
  std::string sdk_secret_file;
  /// With sdk_address: a blocking thread per in-flight request instead of
  /// the SDK's callbacks (serve_sdk_level.hpp).
  bool sdk_threads = false;
  /// The tenant's API key when the server has keys: sent with every HTTP
  /// request (Authorization: Bearer) and every SDK request.
  std::string api_key;
  /// With --sdk: each level runs this many times over each transport, in
  /// ABBA order (HTTP, SDK, SDK, HTTP, ...; serve_rounds.hpp); the table
  /// gives the median, min and max, the JSON every round. Default: 1.
  int rounds = 1;
};

/// Runs the benchmark. Returns a process exit code: 0; 1 when a request
/// failed (the table, JSON and SVG are still written) or the set-up did
/// (server start, /health, model files: nothing is written); 2 for bad
/// options.
int run_serve_bench(const serve_bench_options& opts);

} // namespace tessera::bench
