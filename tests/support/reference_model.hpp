#pragma once
/// @file
/// A naive reference forward pass for tests: dense attention, double
/// precision, no KV cache paging, written straight from the Hugging Face
/// Llama / Qwen2 definition, independently of the engine's code.

#include <cstdint>
#include <span>
#include <vector>

#include "engine/weights.hpp"

namespace tessera::test {

/// Reference settings.
struct reference_options {
  /// Round K and V to bf16 before use, as an engine with a bf16 KV cache
  /// stores them. Default: false.
  bool round_kv_to_bf16 = false;
};

/// Logits ([tokens.size()][vocab]) for every position of `tokens`.
std::vector<std::vector<double>> reference_logits(const engine::model_weights& w,
                                                  std::span<const int32_t> tokens,
                                                  const reference_options& opts = {});

/// Greedy continuation of `prompt` by `n` tokens, computed with
/// reference_logits. `margins` (if given) receives, per step, the gap
/// between the best and second-best logit (how robust that argmax is).
std::vector<int32_t> reference_greedy(const engine::model_weights& w,
                                      std::span<const int32_t> prompt, int n,
                                      std::vector<double>* margins = nullptr,
                                      const reference_options& opts = {});

} // namespace tessera::test
