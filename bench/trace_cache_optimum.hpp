#pragma once
/// @file
/// The best prefix-cache hit rate a trace allows: with an unbounded cache
/// that keeps every block ever seen, a request reuses the longest prefix of
/// its hash ids that some earlier request (earlier in trace order) began
/// with, block_tokens tokens per id, capped at its input_length (a partial
/// last block counts the tokens it holds). The Mooncake traces' ids are
/// prefix-chained, so this is the longest prefix of ids seen before. A replay's hit rate as a
/// fraction of this says how much of the possible reuse a cache
/// configuration and routing policy achieved. Pure functions.
///
/// On the Mooncake conversation trace (12,031 requests) this is 37.4%:
/// 54.1 M of its 144.8 M input tokens.

#include <cstdint>
#include <vector>

#include "bench/mooncake_trace.hpp"

namespace tessera::bench {

/// Sums of input and optimally reused tokens over a set of requests.
struct prefix_reuse {
  /// Input tokens of the requests.
  int64_t input_tokens = 0;
  /// Of those, tokens an unbounded cache would serve.
  int64_t hit_tokens = 0;
  /// hit_tokens / input_tokens (0 when there is no input).
  [[nodiscard]] double rate() const {
    return input_tokens > 0 ? static_cast<double>(hit_tokens) / static_cast<double>(input_tokens) : 0.0;
  }
};

/// Per request of `requests` (in that order), the tokens an unbounded cache
/// would serve it from blocks of the requests before it.
[[nodiscard]] std::vector<int64_t> optimal_prefix_hits(const std::vector<trace_request>& requests,
                                                       int64_t block_tokens);

/// The sums over `requests` of input tokens and optimal_prefix_hits.
[[nodiscard]] prefix_reuse optimal_prefix_reuse(const std::vector<trace_request>& requests, int64_t block_tokens);

} // namespace tessera::bench
