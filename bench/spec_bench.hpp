#pragma once
/// @file
/// `tessera bench spec`: what speculative decoding (n-gram prompt lookup,
/// engine/speculative.hpp, or with --draft-model a draft model,
/// engine/draft_model.hpp) gains over plain decoding on one CPU engine, at
/// several batch sizes, on two workloads:
///
///   repetitive: each prompt is a random prefix P, the model's own greedy
///     continuation O of P, then P again; continuing it, the model often
///     says O again, which the n-gram drafts copy (the case of code editing
///     or summarisation, where the prompt holds much of the answer);
///   random: random prompts, sampled at temperature 1 (seeded), where
///     drafts are rarely right (no gain expected; the cost of trying must
///     stay small). Greedy output of a random-weight model soon repeats
///     itself, which n-grams predict, so it is not random text.
///
/// Every point runs the same requests on one engine without and with
/// speculation (a per-request setting),
/// interleaved `runs` times (median of each), checks that the outputs are
/// equal token for token (greedy and n-gram seeded; a draft model's
/// sampled output follows the target's distribution but draws differently,
/// so the random workload is not compared then), and reports decode tokens/s (after every request
/// has its first token), the speed-up and the draft acceptance rate.

#include <cstdint>
#include <string>
#include <vector>

#include "engine/factory/backend_factory.hpp"

namespace tessera::bench {

/// Options of `tessera bench spec`.
struct spec_bench_options {
  /// Model folder (required).
  std::string model;
  /// Where to write the JSON results ("" for none).
  std::string json_path;
  /// CPU threads; <= 0 means all cores. Default: 0.
  int threads = 0;
  /// Draft tokens per step (ngram:K or draft:K). Default: 4.
  int32_t num_tokens = 4;
  /// Draft model folder: speculate with method draft (a smaller model with
  /// the same tokenizer) instead of ngram. Default: none.
  std::string draft_model;
  /// Batch sizes (requests run together). Default: 1, 16.
  std::vector<int32_t> batches = {1, 16};
  /// Length of the random prefix P (repetitive) or of the whole prompt
  /// (random). Default: 32.
  int32_t prompt_tokens = 32;
  /// Greedy tokens generated per request (and length of O). Default: 96.
  int32_t generate_tokens = 96;
  /// Interleaved repetitions of plain and speculative runs. Default: 2.
  int runs = 2;
  /// Seeds the random prompts. Default: 0.
  uint64_t seed = 0;
  /// The backend (cpu or sim).
  engine::backend_choice engine;
};

/// Runs the benchmark, prints a table to stdout (progress to stderr) and
/// writes JSON if asked. Returns a process exit code: 1 when a run fails or
/// an output with speculation differs from the plain one.
int run_spec_bench(const spec_bench_options& opts);

} // namespace tessera::bench
