#pragma once
/// @file
/// The requests the engine benchmarks (cpu and sim) run.

#include <cstdint>
#include <vector>

#include "engine/engine.hpp"

namespace tessera::bench {

/// `n` token ids in [0, vocab) from a generator seeded with `seed`.
[[nodiscard]] std::vector<int32_t> random_tokens(int n, int32_t vocab, uint64_t seed);

/// A greedy request that ignores EOS, so it generates exactly max_tokens.
[[nodiscard]] engine::request bench_request(uint64_t id, std::vector<int32_t> prompt, int max_tokens);

} // namespace tessera::bench
