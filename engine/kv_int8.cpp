#include "engine/kv_int8.hpp"

#include <algorithm>
#include <cmath>

namespace tessera::engine {

uint16_t kv_int8_quantize(const float* x, int32_t n, int8_t* out, size_t stride) {
  float max_abs = 0.0f;
  bool finite = true;
  for (int32_t i = 0; i < n; ++i) {
    finite = finite && std::isfinite(x[i]);
    max_abs = std::max(max_abs, std::fabs(x[i]));
  }
  if (!finite) {
    for (int32_t i = 0; i < n; ++i)
      out[static_cast<size_t>(i) * stride] = 0;
    return 0x7e00; // NaN
  }
  const uint16_t h = f32_to_f16(std::min(max_abs / kv_int8_qmax, 65504.0f));
  const float scale = f16_to_f32(h);
  const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
  for (int32_t i = 0; i < n; ++i) {
    const float q = std::nearbyint(x[i] * inv);
    out[static_cast<size_t>(i) * stride] = static_cast<int8_t>(std::clamp(q, -kv_int8_qmax, kv_int8_qmax));
  }
  return h;
}

float kv_int8_scale(uint16_t h) { return f16_to_f32(h); }

std::optional<std::string> check_kv_block(const kv_layout& l, std::span<const std::byte> bytes) {
  if (l.kv_dtype != dtype::i8)
    return std::nullopt;
  if (bytes.size() != l.block_bytes())
    return "the block has " + std::to_string(bytes.size()) + " bytes, its layout " +
           std::to_string(l.block_bytes());
  for (int32_t layer = 0; layer < l.num_layers; ++layer)
    for (int is_v = 0; is_v < 2; ++is_v)
      for (int32_t head = 0; head < l.num_kv_heads; ++head) {
        const std::byte* s = bytes.data() + l.slab_offset(layer, is_v != 0, head) + l.slab_values_bytes();
        for (int32_t t = 0; t < l.block_tokens; ++t) {
          const auto h = static_cast<uint16_t>(static_cast<unsigned>(s[2 * t]) |
                                               static_cast<unsigned>(s[2 * t + 1]) << 8);
          // Negative (sign bit on a non-zero), infinite or NaN (all-ones
          // exponent); -0 is 0.
          if (((h & 0x8000u) != 0 && (h & 0x7fffu) != 0) || (h & 0x7c00u) == 0x7c00u)
            return "int8 KV scale of layer " + std::to_string(layer) + (is_v ? " V" : " K") +
                   " head " + std::to_string(head) + " token " + std::to_string(t) + " is " +
                   std::to_string(f16_to_f32(h)) + " (must be finite and >= 0)";
        }
      }
  return std::nullopt;
}

std::string_view kv_dtype_name(dtype t) {
  switch (t) {
    case dtype::f32: return "f32";
    case dtype::f16: return "f16";
    case dtype::bf16: return "bf16";
    case dtype::i8: return "int8";
  }
  return "?";
}

std::optional<dtype> parse_kv_dtype(std::string_view n) {
  if (n == "int8" || n == "i8")
    return dtype::i8;
  if (n == "bf16" || n == "bfloat16")
    return dtype::bf16;
  if (n == "f16" || n == "float16")
    return dtype::f16;
  if (n == "f32" || n == "float32")
    return dtype::f32;
  return std::nullopt;
}

std::string describe(const kv_layout& l) {
  std::string s{kv_dtype_name(l.kv_dtype)};
  s += l.kv_dtype == dtype::i8 ? " KV (f16 scales), " : " KV, ";
  s += std::to_string(l.block_tokens) + "-token blocks, " + std::to_string(l.num_layers) +
       " layers x " + std::to_string(l.num_kv_heads) + " KV heads x head_dim " +
       std::to_string(l.head_dim);
  return s;
}

} // namespace tessera::engine
