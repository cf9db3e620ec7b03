#pragma once
/// @file
/// `tessera bench kv-int8 --pool`: the engine's own KV pool as int8
/// (--kv-dtype int8, engine/kv_int8.hpp) against bf16, on one model:
///
///   logprob error  teacher-forced log-probability of each next token of a
///                  random `logprob_tokens`-token text, int8 pool against
///                  bf16 pool (mean and max |difference|)
///   bytes/token    block_bytes / block_tokens of each layout
///   capacity       blocks of a `pool_mib` pool (the CPU backend's own
///                  count) and the `capacity_seq_tokens`-token sequences
///                  they hold
///   decode tok/s   batched decode steps at each of `batches` sequences of
///                  `decode_context` tokens, and at `long_batch` sequences of
///                  `long_context` tokens; the context is random KV written
///                  straight into the pool (decode cost does not depend on
///                  the values); rounds alternate bf16 and int8 so both see
///                  the same machine state, the median round counts
///
/// One backend per dtype, built by the CPU backend factory.

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::bench {

/// Options of the pool benchmark.
struct kv_pool_bench_options {
  /// Model folder (required).
  std::string model;
  /// Where to write the JSON results ("" for none).
  std::string json_path;
  /// CPU threads; <= 0 means all cores. Default: 0.
  int threads = 0;
  /// Tokens of the teacher-forced logprob comparison. Default: 2048.
  int32_t logprob_tokens = 2048;
  /// Sequences per decode measurement. Default: 16, 32.
  std::vector<int32_t> batches = {16, 32};
  /// Context of each sequence in those. Default: 512.
  int32_t decode_context = 512;
  /// The long-context measurement: sequences and context. Defaults: 4, 4096.
  int32_t long_batch = 4;
  int32_t long_context = 4096;
  /// Timed decode steps per round, and rounds. Defaults: 8, 3.
  int32_t steps = 8;
  int32_t rounds = 3;
  /// Pool size and sequence length of the capacity count. Defaults: 1024
  /// MiB, 2048 tokens.
  int64_t pool_mib = 1024;
  int32_t capacity_seq_tokens = 2048;
  /// Seeds the text and the random KV. Default: 0.
  uint64_t seed = 0;
};

/// Runs it, prints a table to stdout (progress to stderr) and writes JSON
/// if asked. Returns a process exit code (1 when a logit is not finite).
int run_kv_pool_bench(const kv_pool_bench_options& opts);

} // namespace tessera::bench
