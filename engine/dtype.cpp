#include "engine/dtype.hpp"

#include <cstring>

namespace tessera::engine {

float f16_to_f32(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else { // subnormal: normalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      bits = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (mant & 0x3ffu) << 13;
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | mant << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  return std::bit_cast<float>(bits);
}

uint16_t f32_to_f16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u)
    return static_cast<uint16_t>(sign | 0x7e00u); // NaN
  if (abs >= 0x477ff000u)                         // rounds to >= 65520: inf
    return static_cast<uint16_t>(sign | 0x7c00u);
  if (abs < 0x38800000u) { // below the smallest normal half: subnormal
    if (abs < 0x33000000u) // below half of the smallest subnormal
      return static_cast<uint16_t>(sign);
    uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    int shift = 126 - static_cast<int>(abs >> 23); // 14..24
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u)))
      ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t r = abs + 0xfffu + ((abs >> 13) & 1u); // round to nearest even
  return static_cast<uint16_t>(sign | ((r - 0x38000000u) >> 13));
}

} // namespace tessera::engine
