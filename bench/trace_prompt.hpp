#pragma once
/// @file
/// Turning a trace request into the token ids a replay sends: each hash id
/// becomes a deterministic block of `block_tokens` token ids (a generator
/// seeded by the id and a replay seed), the last block cut to the request's
/// input_length. Equal ids always give equal tokens and different ids
/// different ones (with overwhelming probability), so requests that share
/// their first k ids share exactly their first k * block_tokens prompt
/// tokens and differ right after: an engine's own chained block hashes see
/// the sharing the trace describes, whatever its block size divides.
/// Pure functions; the generator is specified here (splitmix64 and a
/// multiply-shift range reduction), so prompts are the same on every
/// platform and standard library.

#include <cstdint>
#include <string_view>
#include <vector>

#include <caf/expected.hpp>

#include "bench/mooncake_trace.hpp"

namespace tessera::bench {

/// Token ids a replay draws from, lo..hi inclusive. The default, 8..263, is
/// the 256 byte tokens of the demo tokenizer: valid for the demo models
/// (vocabularies of 512 and up) and for any larger vocabulary (Llama 3's
/// 128256).
struct token_range {
  int32_t lo = 8;
  int32_t hi = 263;
};

/// Parses "LO:HI" (0 <= LO <= HI < 2^31, both inclusive). Errors
/// (caf::sec::invalid_argument) quote the text and say what is wrong.
[[nodiscard]] caf::expected<token_range> parse_token_range(std::string_view text);

/// Appends the first `count` tokens of the block named `hash_id` (count <=
/// the block size; a block's tokens do not depend on the block size, so a
/// shorter block is a prefix of a longer one).
void append_block_tokens(int64_t hash_id, uint64_t seed, const token_range& range, int64_t count,
                         std::vector<int32_t>& out);

/// The prompt of `r`: its blocks' tokens in order, `block_tokens` each,
/// the last cut so that the prompt has exactly r.input_length tokens.
[[nodiscard]] std::vector<int32_t> trace_prompt(const trace_request& r, int64_t block_tokens, uint64_t seed,
                                                const token_range& range);

} // namespace tessera::bench
