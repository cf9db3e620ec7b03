#pragma once
/// @file
/// Speculative decoding's pure parts: the prompt-lookup (n-gram) proposer
/// and the rejection rule that keeps the target's distribution (Leviathan
/// et al. 2023, Chen et al. 2023). The engine (engine.cpp) appends the
/// proposed drafts to a decoding sequence, the target computes the last
/// token and the drafts in one forward step with a logits row each, and
/// the drafts are verified row by row.
///
/// Verification of n-gram drafts needs no function here: a draft is a
/// point mass q = delta(d), for which the rejection rule is "accept d with
/// probability p(d), else draw from p with d removed and renormalised".
/// The engine draws the target's own token with sample() at the same
/// (seed, step) plain decoding would use and accepts d when they are
/// equal: P(accept) = p(d), and a rejection leaves exactly that
/// renormalised distribution. So a seeded request gives the same tokens
/// with n-gram speculation as without, and greedy is exact.

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include <caf/expected.hpp>

#include "engine/sampling_params.hpp"

namespace tessera::engine {

/// The speculative setting's parser (protocol/sampling_params.hpp).
using protocol::parse_speculative;

/// Longest n-gram the proposer matches.
inline constexpr int32_t ngram_max_n = 3;
/// Shortest n-gram the proposer matches.
inline constexpr int32_t ngram_min_n = 1;

/// Prompt-lookup drafting, as vLLM's n-gram proposer: for n from `max_n`
/// down to `min_n`, looks for the most recent earlier occurrence of the
/// last n tokens of `tokens` (prompt and output) and proposes the up to `k`
/// tokens that followed it. Appends them to `out` and returns how many
/// (0 when nothing matches, k <= 0, or `tokens` is shorter than min_n + 1).
/// Cost: O(len(tokens) * max_n) per n tried.
int32_t ngram_propose(std::span<const int32_t> tokens, int32_t k, std::vector<int32_t>& out,
                      int32_t max_n = ngram_max_n, int32_t min_n = ngram_min_n);

/// The outcome of one draft token's verification.
struct rejection_result {
  /// The draft was accepted (`token` is then the draft).
  bool accepted = false;
  /// The token to emit: the draft, or the replacement drawn on rejection.
  int32_t token = 0;
};

/// The rejection rule for a draft `draft` drawn from `q` against the
/// target's `p` (both probability vectors over the same vocabulary, each
/// summing to ~1): accept with probability min(1, p[draft] / q[draft])
/// (decided by `u_accept` in [0, 1)); otherwise draw from
/// norm(max(0, p - q)) by inverse CDF with `u_resample` in [0, 1) (lowest
/// id first). The emitted token is then distributed exactly as p. When
/// p - q has no positive mass (p == q, where rejection cannot happen up to
/// rounding), the draw is from p.
/// Preconditions (checked, abort): p and q have the same non-zero size,
/// draft indexes them, q[draft] > 0.
[[nodiscard]] rejection_result rejection_sample(std::span<const float> p,
                                                std::span<const float> q, int32_t draft,
                                                double u_accept, double u_resample);

} // namespace tessera::engine
