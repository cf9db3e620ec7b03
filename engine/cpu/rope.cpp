#include "engine/cpu/rope.hpp"

#include <cmath>
#include <numbers>

namespace tessera::engine::cpu {

std::vector<float> rope_inv_freq(const model_config& cfg) {
  const int32_t half = cfg.head_dim / 2;
  std::vector<float> f(half);
  for (int32_t i = 0; i < half; ++i)
    f[i] = 1.0f / std::pow(cfg.rope_theta, static_cast<float>(2 * i) / static_cast<float>(cfg.head_dim));
  const auto& rs = cfg.rope_scaling;
  if (rs.type == "linear") {
    for (auto& x : f)
      x /= rs.factor;
  } else if (rs.type == "llama3") {
    const float old_len = static_cast<float>(rs.original_max_position_embeddings);
    const float low_wavelen = old_len / rs.low_freq_factor;
    const float high_wavelen = old_len / rs.high_freq_factor;
    for (auto& x : f) {
      const float wavelen = 2.0f * std::numbers::pi_v<float> / x;
      if (wavelen > low_wavelen) {
        x = x / rs.factor;
      } else if (wavelen >= high_wavelen) {
        const float smooth = (old_len / wavelen - rs.low_freq_factor) /
                             (rs.high_freq_factor - rs.low_freq_factor);
        x = (1.0f - smooth) * x / rs.factor + smooth * x;
      }
    }
  }
  return f;
}

void rope_angles(const std::vector<float>& inv_freq, int32_t pos, float* cos_out, float* sin_out) {
  for (size_t i = 0; i < inv_freq.size(); ++i) {
    const float a = static_cast<float>(pos) * inv_freq[i];
    cos_out[i] = std::cos(a);
    sin_out[i] = std::sin(a);
  }
}

void rope_apply(float* x, int32_t n_heads, int32_t head_dim, const float* cos_v, const float* sin_v) {
  const int32_t half = head_dim / 2;
  for (int32_t h = 0; h < n_heads; ++h) {
    float* v = x + static_cast<size_t>(h) * head_dim;
    for (int32_t i = 0; i < half; ++i) {
      const float a = v[i], b = v[i + half];
      v[i] = a * cos_v[i] - b * sin_v[i];
      v[i + half] = b * cos_v[i] + a * sin_v[i];
    }
  }
}

} // namespace tessera::engine::cpu
