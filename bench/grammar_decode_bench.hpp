#pragma once
/// @file
/// grammar_bench --decode-model DIR: the cost of constrained decoding in
/// the engine, per generated token, against unconstrained decoding of the
/// same model at the same batch sizes.

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::bench {

/// Options of the decode mode of grammar_bench.
struct grammar_decode_options {
  /// Model folder (config.json, weights, tokenizer).
  std::string model_dir;
  /// CPU threads; <= 0 means all cores. Default: 0.
  int threads = 0;
  /// Batch sizes. Default: 1 and 16.
  std::vector<int32_t> batches = {1, 16};
  /// Timed decode steps per run. Default: 96.
  int steps = 96;
  /// Rounds; each runs every mode once, in turn. Default: 3.
  int rounds = 3;
  /// max_tokens of each request. Default: 256.
  int32_t max_tokens = 256;
  /// JSON results file; empty: none.
  std::string json_path;
};

/// Runs it; prints a table. Returns the process exit code.
int run_grammar_decode_bench(const grammar_decode_options& o);

} // namespace tessera::bench
