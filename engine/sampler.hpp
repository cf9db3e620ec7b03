#pragma once
/// @file
/// Turns one row of logits into the next token, following sampling_params:
/// penalties, temperature, top-k, top-p, min-p, then a seeded draw; plus
/// the log-probabilities the request asked for. A pure function of its
/// inputs: no hidden state, so it is unit-tested without a model.

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "engine/sampling_params.hpp"

namespace tessera::engine {

/// A token with its log-probability.
struct token_logprob {
  int32_t token = 0;
  float logprob = 0.0f;
};

/// What the sampler chose.
struct sampled_token {
  int32_t token = 0;
  /// log p(token) under the raw model distribution (log-softmax of the
  /// unmodified logits). Always filled.
  float logprob = 0.0f;
  /// The params.logprobs most likely tokens under that distribution, most
  /// likely first (ties: lower id first). Empty unless asked.
  std::vector<token_logprob> top_logprobs;
};

/// Sampling scratch memory, reused across calls to avoid allocations.
/// Not thread-safe: one per thread.
struct sampler_scratch {
  std::vector<float> probs;
  std::vector<int32_t> ids;
  std::vector<float> logits;
};

/// Samples the token at output position `step` (0 for the first generated
/// token) from `logits` ([vocab], not modified). `prompt` and `output` are
/// the tokens so far (penalties). The random draw is a function of
/// (seed, step) only. Greedy (temperature 0) ignores seed and picks the
/// lowest id among equal maxima.
[[nodiscard]] sampled_token sample(std::span<const float> logits,
                                   const sampling_params& params, uint64_t seed,
                                   uint64_t step, std::span<const int32_t> prompt,
                                   std::span<const int32_t> output,
                                   sampler_scratch& scratch);

/// The uniform number in [0, 1) the sampler draws at (seed, step).
/// Exposed so tests can check the stream is stateless.
[[nodiscard]] double sampler_uniform(uint64_t seed, uint64_t step);

} // namespace tessera::engine
