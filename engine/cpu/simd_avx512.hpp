#pragma once
/// @file
/// Internal to engine/cpu's *_avx512.cpp units (compiled with AVX-512 flags,
/// and only they may include this): small vector helpers they share. All
/// of it has internal linkage (an anonymous namespace), so no out-of-line
/// AVX-512 copy can be picked by the linker for code running elsewhere
/// (see kernels_isa.hpp).

// GCC 12.2's AVX-512 headers trip -Wuninitialized on their own
// _mm*_undefined_*() pass-through operands once inlined (GCC bug 105593,
// fixed in 12.3). The state is location-based, so this covers only the
// header's lines, not ours.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

namespace tessera::engine::cpu::detail {
namespace {

// The one horizontal reduction every output element goes through: halves,
// then quarters, then pairs. Any change here changes every result's bits.
inline float hsum(__m512 v) {
  const __m256 lo = _mm512_castps512_ps256(v);
  const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
  const __m256 a = _mm256_add_ps(lo, hi);
  const __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
  return _mm_cvtss_f32(_mm_add_ss(c, _mm_movehdup_ps(c)));
}

// Horizontal max (exact in any order).
inline float hmax(__m512 v) {
  const __m256 a = _mm256_max_ps(_mm512_castps512_ps256(v),
                                 _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
  __m128 b = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  b = _mm_max_ps(b, _mm_movehl_ps(b, b));
  return _mm_cvtss_f32(_mm_max_ss(b, _mm_movehdup_ps(b)));
}

// 16 bf16 values widened to f32, exactly: the 16 bits become the high half.
inline __m512 bf16_widen(__m256i h) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// e^x for x in f32 range: Cephes-style range reduction x = n ln2 + r, a
// degree-6 polynomial for e^r, then scalef by 2^n (handles overflow and
// underflow without integer tricks). About 2 ulp.
inline __m512 exp_ps(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-103.0f)), _mm512_set1_ps(88.8f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, n);
}

} // namespace
} // namespace tessera::engine::cpu::detail
