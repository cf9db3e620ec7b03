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

#include <caf/expected.hpp>

#include "engine/sampling_params.hpp"
#include "protocol/request.hpp"

namespace tessera::engine {

using protocol::sampled_token;
using protocol::token_logprob;

/// Sampling scratch memory, reused across calls to avoid allocations.
/// Not thread-safe: one per thread.
struct sampler_scratch {
  std::vector<float> probs;   // [vocab] unnormalised probabilities, by token id
  std::vector<int32_t> ids;   // not used by the current implementation
  std::vector<float> logits;  // [vocab] penalised, temperature-scaled logits
  /// Candidates as (logit order, token id) keys, best first once sorted;
  /// and the radix sort's second buffer. [<= vocab] each.
  std::vector<uint64_t> sort_keys;
  std::vector<uint64_t> sort_tmp;
  /// [vocab] per-token counters for the penalties. All zero between calls
  /// (the sampler resets only the entries it touched).
  std::vector<int32_t> token_counts;
};

/// Samples the token at output position `step` (0 for the first generated
/// token) from `logits` ([vocab], not modified). `prompt` and `output` are
/// the tokens so far (penalties). The random draw is a function of
/// (seed, step) only: `seed` is the request's (params.seed when set, else
/// one the engine chose), params.seed itself is not read. Greedy
/// (temperature below 1e-5, as vLLM, or top_k 1) ignores seed and picks the
/// lowest id among equal maxima of the penalised logits. Sampling orders
/// candidates by penalised logit (that is, probability) descending, lower id
/// first among equals, and walks them in that order, so the same inputs give
/// the same token on any machine.
/// Errors (engine_errc::bad_logits, the message naming the first bad token
/// id): logits containing NaN or +inf, or with no finite value. Such logits
/// come from a corrupt KV cache or weights, never from a request, so the
/// caller fails that one sequence and goes on.
/// Preconditions (checked, abort if broken): logits is non-empty; every id
/// in prompt and output is >= 0.
/// Cost: greedy two passes over the vocab; sampling O(vocab) (a radix sort
/// of the candidates, or a selection when top_k is set). The NaN check is
/// part of the first pass.
[[nodiscard]] caf::expected<sampled_token> sample(std::span<const float> logits,
                                                  const sampling_params& params, uint64_t seed,
                                                  uint64_t step, std::span<const int32_t> prompt,
                                                  std::span<const int32_t> output,
                                                  sampler_scratch& scratch);

/// Whether sample() picks the argmax for `params` (temperature below 1e-5,
/// as vLLM, or top_k 1) rather than drawing.
[[nodiscard]] bool sampling_is_greedy(const sampling_params& params);

/// The distribution sample() draws from at these inputs, normalised, by
/// token id, into `probs` ([logits.size()]): penalties, temperature, top-k,
/// softmax, top-p and min-p exactly as sample() applies them (zero outside
/// the kept candidates); one-hot at sample()'s pick when greedy.
/// Speculative decoding's rejection rule needs it (speculative.hpp). Errors
/// as sample().
[[nodiscard]] caf::error sampling_distribution(std::span<const float> logits,
                                               const sampling_params& params,
                                               std::span<const int32_t> prompt,
                                               std::span<const int32_t> output,
                                               sampler_scratch& scratch, std::vector<float>& probs);

/// What sample() reports for `token` when it picks it from `logits`: its
/// raw logprob and the top logprobs params.logprobs asks for (the same
/// values, bit for bit). For a token chosen by another rule (speculative
/// rejection sampling). Errors as sample().
[[nodiscard]] caf::expected<sampled_token> token_logprobs(std::span<const float> logits,
                                                          const sampling_params& params,
                                                          int32_t token, sampler_scratch& scratch);

/// exp(x) as the sampler computes probabilities, for x <= 0 (larger x give
/// 1): Cephes' polynomial from basic IEEE operations, within about 2 ulp,
/// independent of libm, and 0 below -87.3 (where exp is subnormal).
/// Exposed so tests can reproduce the sampler's arithmetic exactly.
[[nodiscard]] float sampler_exp(float x);

/// The uniform number in [0, 1) the sampler draws at (seed, step):
/// (mix(seed ^ mix(step)) >> 11) * 2^-53, where mix is SplitMix64's step
/// (add the golden gamma 0x9e3779b97f4a7c15, then its finaliser). Stateless:
/// any call order gives the same values. Exposed so tests can check it.
[[nodiscard]] double sampler_uniform(uint64_t seed, uint64_t step);

} // namespace tessera::engine
