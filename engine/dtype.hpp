#pragma once
/// @file
/// Element types of weights and KV blocks (protocol/dtype.hpp), and scalar
/// conversions between them. Vectorised conversions live in
/// engine/cpu/kernels.hpp.

#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "protocol/dtype.hpp"

namespace tessera::engine {

using protocol::dtype;
using protocol::dtype_size;
using protocol::parse_dtype;
using protocol::to_safetensors_name;

/// bf16 -> f32, exact.
inline float bf16_to_f32(uint16_t x) { return std::bit_cast<float>(uint32_t{x} << 16); }

/// f32 -> bf16 with round-to-nearest-even; NaN stays NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

/// IEEE half -> f32, exact (subnormals, inf and NaN included).
float f16_to_f32(uint16_t h);

/// f32 -> IEEE half with round-to-nearest-even.
uint16_t f32_to_f16(float f);

/// Reads element `i` of a buffer of type `t` as f32 (i8: the quantized
/// value itself, unscaled).
inline float load_as_f32(const void* data, dtype t, size_t i) {
  switch (t) {
    case dtype::f32: return static_cast<const float*>(data)[i];
    case dtype::f16: return f16_to_f32(static_cast<const uint16_t*>(data)[i]);
    case dtype::bf16: return bf16_to_f32(static_cast<const uint16_t*>(data)[i]);
    case dtype::i8: return static_cast<float>(static_cast<const int8_t*>(data)[i]);
  }
  return 0.0f;
}

/// Writes `v` as element `i` of a buffer of type `t` (rounding to nearest;
/// i8: v itself rounded and clamped to [-127, 127], no scale applied).
inline void store_from_f32(void* data, dtype t, size_t i, float v) {
  switch (t) {
    case dtype::f32: static_cast<float*>(data)[i] = v; break;
    case dtype::f16: static_cast<uint16_t*>(data)[i] = f32_to_f16(v); break;
    case dtype::bf16: static_cast<uint16_t*>(data)[i] = f32_to_bf16(v); break;
    case dtype::i8: {
      const float r = v != v ? 0.0f : __builtin_nearbyintf(v);
      static_cast<int8_t*>(data)[i] = static_cast<int8_t>(r < -127.0f ? -127.0f : r > 127.0f ? 127.0f : r);
      break;
    }
  }
}

} // namespace tessera::engine
