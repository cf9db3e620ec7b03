#pragma once
/// @file
/// Rotary position embedding in the Hugging Face rotate-half convention,
/// with the linear and Llama 3 frequency scalings. Internal to the CPU
/// backend.

#include <cstdint>
#include <vector>

#include "engine/model_config.hpp"

namespace tessera::engine::cpu {

/// The inverse frequencies of a model (head_dim / 2 of them), scaled as
/// config.rope_scaling says, computed in f32 as transformers does.
std::vector<float> rope_inv_freq(const model_config& cfg);

/// Fills cos/sin ([head_dim / 2] each) for position `pos`.
void rope_angles(const std::vector<float>& inv_freq, int32_t pos, float* cos_out, float* sin_out);

/// Rotates `n_heads` heads of `head_dim` values in place:
/// x[i] <- x[i] cos_i - x[i + d/2] sin_i, x[i + d/2] <- x[i + d/2] cos_i + x[i] sin_i.
void rope_apply(float* x, int32_t n_heads, int32_t head_dim, const float* cos_v, const float* sin_v);

} // namespace tessera::engine::cpu
