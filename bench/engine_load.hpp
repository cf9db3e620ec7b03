#pragma once
/// @file
/// The engine-alone baseline of `tessera bench serve`: the same closed-loop
/// load (C requests in flight, each replaced as soon as it finishes, the
/// same prompts, max_tokens and greedy sampling with ignore_eos) run on one
/// engine in this process, configured as a `tessera serve` worker is (the
/// model's tokenizer, the default engine_config, the same KV pool), with no
/// actors and no HTTP. Served throughput divided by this is what the actor
/// pipeline and HTTP keep of the engine.
///
/// Unlike `tessera bench engine`, which times decode only (after every
/// sequence has its first token), this times what a client sees: prefill
/// included, from the first request's start to the last one's end.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "bench/load_stats.hpp"
#include "engine/factory/backend_factory.hpp"

namespace tessera::engine {
class engine;
}

namespace tessera::bench {

/// How the baseline engine is set up.
struct engine_load_options {
  /// Model folder (required).
  std::string model;
  /// CPU threads; <= 0: all cores. Default: 0.
  int threads = 0;
  /// KV pool (backend_options::kv_cache_bytes: 0 is the backend's
  /// default). Default: 256 MiB (a `tessera serve` worker's cpu default).
  size_t kv_cache_bytes = size_t{256} << 20;
  /// The backend (match the server's --engine). Default: cpu.
  engine::backend_choice engine;
};

/// One level of a closed-loop load.
struct load_level {
  /// Requests in flight at once. >= 1.
  int concurrency = 1;
  /// Requests in all (when duration_s is 0).
  int requests = 1;
  /// > 0: start new requests for this long instead of a count, then let
  /// those in flight finish. Default: 0.
  double duration_s = 0;
  /// Prompt tokens per request (load_prompt).
  int prompt_tokens = 128;
  /// Tokens generated per request (max_tokens, ignore_eos).
  int output_tokens = 128;
  /// Seeds the prompts; the first request is load_prompt(seed, first_index).
  uint64_t seed = 0;
  uint64_t first_index = 0;
};

/// Called with a progress line now and then (may be empty).
using progress_fn = std::function<void(const std::string&)>;

/// An engine loaded once and run level after level. Not thread-safe.
class engine_load {
public:
  /// Loads the model and its tokenizer and builds the engine. Errors name
  /// the folder or the option at fault.
  [[nodiscard]] static caf::expected<std::unique_ptr<engine_load>> open(const engine_load_options& opts);
  ~engine_load();
  engine_load(const engine_load&) = delete;
  engine_load& operator=(const engine_load&) = delete;

  /// "cpu avx512 x2 threads, bf16 KV, ..." (the backend's description).
  [[nodiscard]] const std::string& description() const { return description_; }

  /// Runs one level to the end and returns every request, times in seconds
  /// from the level's start (token_gaps_s between consecutive tokens).
  [[nodiscard]] std::vector<request_sample> run(const load_level& level, const progress_fn& progress);

private:
  engine_load() = default;
  std::unique_ptr<engine::engine> engine_;
  std::string description_;
  uint64_t next_id_ = 1;
};

} // namespace tessera::bench
