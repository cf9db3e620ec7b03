#pragma once
/// @file
/// `tessera bench hash`: what naming KV blocks costs (engine/block_hash.hpp).
///
///   per block (block_tokens tokens): the keyed SipHash-2-4-128 link of the
///   chain (engine::kv_hash_block), against XXH3-64 over the same bytes
///   (the unkeyed 64-bit link it replaced, one-shot: a lower bound on it)
///
///   per prefill step: the hashes of one prompt's blocks (as the engine, the
///   router and the kv store each compute them) against the time the CPU
///   backend takes to prefill that prompt on `model` (median of `steps`)
///
/// The target (issue 16): the keyed chain of a prefill step's blocks costs
/// under 2% of that step.

#include <cstdint>
#include <string>

#include <caf/expected.hpp>

namespace tessera::bench {

/// Nanoseconds per block of each link, over `blocks` chained blocks of
/// `block_tokens` tokens (median of `reps` passes).
struct hash_cost {
  int32_t block_tokens = 16;
  double siphash128_ns_per_block = 0;
  double xxh3_64_ns_per_block = 0;
};

/// Times both links (no model needed).
[[nodiscard]] hash_cost measure_hash_cost(int32_t block_tokens, int32_t blocks = 4096, int reps = 31);

/// Options of `tessera bench hash`.
struct hash_bench_options {
  /// Model folder: the prefill step is timed on it; "" skips that part.
  std::string model;
  /// Tokens of the prefilled prompt. Default: 512.
  int32_t prompt_tokens = 512;
  /// Prefill steps timed (the median counts). Default: 5.
  int steps = 5;
  /// CPU threads (0: all cores).
  int threads = 0;
  /// Where to write the JSON results ("" for none).
  std::string json_path;
};

/// Runs the benchmark, prints a table; 0 when it ran, 1 on an error.
int run_hash_bench(const hash_bench_options& o);

} // namespace tessera::bench
