// AVX2 + FMA + F16C kernels. Built with that ISA's flags; see
// kernels_isa.hpp for why nothing here may be shared with other units.
#include <immintrin.h>

#include <cstring>
#include <utility>

#include "engine/cpu/kernels_isa.hpp"

namespace tessera::engine::cpu::detail {
namespace {

constexpr int64_t lanes = 8;

// 16 ymm registers: 4x3 accumulators + 3 weights + 1 x for GEMM tiles; one
// row uses 8 accumulators (8 weight streams in flight). Measured single
// thread, bf16, M=512 K=768 N=2048 (AVX2 peak ~132 GFLOP/s per core): 4x3
// 114 GFLOP/s, 3x3 106, 2x5 100, 2x4 97, and 3x4 61 (17 registers: GCC
// spills an accumulator and the loop waits on store-to-load forwarding).
constexpr int gemm_mr = 4;
constexpr int gemm_nr = 3;
constexpr int gemv_nr = 8;
constexpr int max_nr = gemm_nr > gemv_nr ? gemm_nr : gemv_nr;
constexpr int64_t panel_bytes = 768 * 1024;

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// Lane mask with the first n (0..8) lanes set, for maskload/maskstore.
inline __m256i tail_mask(int64_t n) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), idx);
}

// The one horizontal reduction every output element goes through.
inline float hsum(__m256 v) {
  const __m128 b = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
  return _mm_cvtss_f32(_mm_add_ss(c, _mm_movehdup_ps(c)));
}

// Weight loaders: 8 weights as f32, exactly. AVX2 has no masked 16-bit
// load, so partial vectors of 16-bit types go through a zeroed buffer.
struct load_f32 {
  using elem = float;
  static __m256 full(const float* p) { return _mm256_loadu_ps(p); }
  static __m256 part(const float* p, int64_t n) { return _mm256_maskload_ps(p, tail_mask(n)); }
};

inline __m128i load_u16_part(const uint16_t* p, int64_t n) {
  uint16_t buf[lanes] = {};
  std::memcpy(buf, p, static_cast<size_t>(n) * sizeof(uint16_t));
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(buf));
}

struct load_bf16 {
  using elem = uint16_t;
  static __m256 widen(__m128i h) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static __m256 full(const uint16_t* p) {
    return widen(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static __m256 part(const uint16_t* p, int64_t n) { return widen(load_u16_part(p, n)); }
};

struct load_f16 {
  using elem = uint16_t;
  static __m256 full(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static __m256 part(const uint16_t* p, int64_t n) { return _mm256_cvtph_ps(load_u16_part(p, n)); }
};

// Decode's one-row tiles prefetch the weights gemv_prefetch_bytes ahead of
// the tile in address order, the bytes one k step consumes (NR rows x 8
// weights) each step: an NR-row tile is NR x K contiguous elements, so the
// memory system sees one sequential stream instead of NR short ones (a row
// of K = 768 bf16 is 24 cache lines, too short for the hardware prefetcher
// to learn each). Measured on a Zen 3 host (AVX2 only) with a standalone
// copy of the kernel, one core streaming 200 MB of bf16 weights, medians of
// 15 interleaved rounds against a pure read of the same bytes: K = 768 0.73
// -> 0.86 of the read, K = 2048 0.76 -> 0.88 (prefetching each row's next
// tile instead, as GEMM tiles do, was the 0.73; 6 and 18 KB ahead, 4-row
// tiles, and 4 rows read a cache line at a time as kernels_avx512.cpp does
// measured at or below 12 KB).
constexpr int64_t gemv_prefetch_bytes = 12288;

// One MR x NR block of y; the per-element sequence (full 8-wide steps in k
// order, one zero-padded partial step, hsum, bias) is the same for every
// tile shape and for dot(), hence batch invariance. `Prefetch` pulls in the
// next tile's weights (one-row tiles: see gemv_prefetch_bytes); see
// kernels_avx512.cpp for when it pays.
template <class L, int MR, int NR, bool Prefetch>
void tile(const float* x, int64_t ldx, const typename L::elem* w, int64_t K, const float* bias,
          float* y, int64_t ldy) {
  __m256 acc[MR][NR];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int c = 0; c < NR; ++c)
      acc[r][c] = _mm256_setzero_ps();

  constexpr int64_t step_bytes = NR * lanes * static_cast<int64_t>(sizeof(typename L::elem));
  // 16-bit weights only: with f32 (twice the bytes a step) it measured
  // slower than the per-row prefetch.
  constexpr bool linear = Prefetch && MR == 1 && sizeof(typename L::elem) == 2;
  const char* ahead = reinterpret_cast<const char*>(w) + gemv_prefetch_bytes;
  int64_t k = 0;
  for (; k + lanes <= K; k += lanes) {
    __m256 wv[NR];
#pragma GCC unroll 8
    for (int c = 0; c < NR; ++c) {
      if constexpr (Prefetch && !linear)
        _mm_prefetch(reinterpret_cast<const char*>(w + (NR + c) * K + k), _MM_HINT_T0);
      wv[c] = L::full(w + c * K + k);
    }
    if constexpr (linear) {
#pragma GCC unroll 4
      for (int64_t b = 0; b < step_bytes; b += 64)
        _mm_prefetch(ahead + b, _MM_HINT_T0);
      ahead += step_bytes;
    }
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m256 xv = _mm256_loadu_ps(x + r * ldx + k);
#pragma GCC unroll 8
      for (int c = 0; c < NR; ++c)
        acc[r][c] = _mm256_fmadd_ps(xv, wv[c], acc[r][c]);
    }
  }
  if (k < K) {
    const int64_t rest = K - k;
    __m256 wv[NR];
#pragma GCC unroll 8
    for (int c = 0; c < NR; ++c)
      wv[c] = L::part(w + c * K + k, rest);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m256 xv = _mm256_maskload_ps(x + r * ldx + k, tail_mask(rest));
#pragma GCC unroll 8
      for (int c = 0; c < NR; ++c)
        acc[r][c] = _mm256_fmadd_ps(xv, wv[c], acc[r][c]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int c = 0; c < NR; ++c) {
      float s = hsum(acc[r][c]);
      if (bias)
        s += bias[c];
      y[r * ldy + c] = s;
    }
}

template <class L>
using tile_fn = void (*)(const float*, int64_t, const typename L::elem*, int64_t, const float*,
                         float*, int64_t);

template <class L>
struct tile_table {
  tile_fn<L> f[2][gemm_mr][max_nr]; // [prefetch][mr - 1][nr - 1]
};

template <class L, int MR, int... NR>
constexpr void fill_row(tile_fn<L>* row, tile_fn<L>* row_prefetch, std::integer_sequence<int, NR...>) {
  ((row[NR] = &tile<L, MR, NR + 1, false>), ...);
  ((row_prefetch[NR] = &tile<L, MR, NR + 1, true>), ...);
}

template <class L, int... MR>
constexpr tile_table<L> make_tile_table(std::integer_sequence<int, MR...>) {
  tile_table<L> t{};
  (fill_row<L, MR + 1>(t.f[0][MR], t.f[1][MR],
                       std::make_integer_sequence<int, MR == 0 ? gemv_nr : gemm_nr>{}),
   ...);
  return t;
}

template <class L>
constexpr tile_table<L> tiles = make_tile_table<L>(std::make_integer_sequence<int, gemm_mr>{});

template <class L>
void matmul_range_t(const float* x, int64_t M, int64_t K, int64_t ldx, const void* wv,
                    int64_t n_begin, int64_t n_end, const float* bias, float* y, int64_t ldy) {
  const auto* w = static_cast<const typename L::elem*>(wv);
  const auto& t = tiles<L>;
  const int64_t row_bytes = K * static_cast<int64_t>(sizeof(typename L::elem));
  int64_t panel = row_bytes > 0 ? panel_bytes / row_bytes / gemm_nr * gemm_nr : n_end - n_begin;
  if (panel < gemm_nr || M < gemm_mr)
    panel = n_end - n_begin;
  for (int64_t p0 = n_begin; p0 < n_end; p0 += panel) {
    const int64_t p1 = min64(n_end, p0 + panel);
    for (int64_t m0 = 0; m0 < M; m0 += gemm_mr) {
      const int64_t mr = min64(gemm_mr, M - m0);
      const int64_t step = mr == 1 ? gemv_nr : gemm_nr;
      for (int64_t n = p0; n < p1; n += step) {
        const int64_t nr = min64(step, p1 - n);
        t.f[m0 == 0][mr - 1][nr - 1](x + m0 * ldx, ldx, w + n * K, K, bias ? bias + n : nullptr,
                                     y + m0 * ldy + n, ldy);
      }
    }
  }
}

void avx2_matmul_range(const float* x, int64_t M, int64_t K, int64_t ldx, const void* w,
                       dtype wt, int64_t n_begin, int64_t n_end, const float* bias, float* y,
                       int64_t ldy) {
  switch (wt) {
    case dtype::f32: return matmul_range_t<load_f32>(x, M, K, ldx, w, n_begin, n_end, bias, y, ldy);
    case dtype::bf16: return matmul_range_t<load_bf16>(x, M, K, ldx, w, n_begin, n_end, bias, y, ldy);
    case dtype::f16: return matmul_range_t<load_f16>(x, M, K, ldx, w, n_begin, n_end, bias, y, ldy);
    case dtype::i8: break; // KV only (kv_int8.hpp): never a weight or an activation
  }
}

float avx2_dot(const float* a, const void* b, dtype bt, int64_t n) {
  float y = 0.0f;
  switch (bt) {
    case dtype::f32: tile<load_f32, 1, 1, false>(a, n, static_cast<const float*>(b), n, nullptr, &y, 1); break;
    case dtype::bf16: tile<load_bf16, 1, 1, false>(a, n, static_cast<const uint16_t*>(b), n, nullptr, &y, 1); break;
    case dtype::f16: tile<load_f16, 1, 1, false>(a, n, static_cast<const uint16_t*>(b), n, nullptr, &y, 1); break;
    case dtype::i8: break; // KV only (kv_int8.hpp): never a weight or an activation
  }
  return y;
}

// ---------------------------------------------------------------------------
// Element-wise kernels: the last partial vector runs through the same vector
// code (zero-padded), so an element's result never depends on its position.

void avx2_rmsnorm(const float* x, const float* w, float eps, int64_t n, float* out) {
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const __m256 v = _mm256_loadu_ps(x + i);
    acc = _mm256_fmadd_ps(v, v, acc);
  }
  if (i < n) {
    const __m256 v = _mm256_maskload_ps(x + i, tail_mask(n - i));
    acc = _mm256_fmadd_ps(v, v, acc);
  }
  const float inv = 1.0f / __builtin_sqrtf(hsum(acc) / static_cast<float>(n) + eps);
  const __m256 s = _mm256_set1_ps(inv);
  for (i = 0; i < n; i += lanes) {
    const __m256i m = tail_mask(min64(lanes, n - i));
    const __m256 v = _mm256_mul_ps(_mm256_mul_ps(_mm256_maskload_ps(x + i, m), s),
                                   _mm256_maskload_ps(w + i, m));
    _mm256_maskstore_ps(out + i, m, v);
  }
}

// e^x: the AVX-512 version's reduction and polynomial; 2^n is built in the
// exponent field, so x is clamped to where that stays a normal float.
inline __m256 exp_ps(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.3f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  // n is in [-126, 127] after the clamp, so 2^n is a normal float.
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

void avx2_silu_mul(const float* gate, const float* up, int64_t n, float* out) {
  const __m256 one = _mm256_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += lanes) {
    const __m256i m = tail_mask(min64(lanes, n - i));
    const __m256 g = _mm256_maskload_ps(gate + i, m);
    const __m256 e = exp_ps(_mm256_sub_ps(_mm256_setzero_ps(), g));
    const __m256 v = _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)),
                                   _mm256_maskload_ps(up + i, m));
    _mm256_maskstore_ps(out + i, m, v);
  }
}

// Loads min(8, n) elements of type t at p + i as f32 (the rest zero).
inline __m256 load_any(const void* p, dtype t, int64_t i, int64_t n) {
  switch (t) {
    case dtype::f32: {
      const float* q = static_cast<const float*>(p) + i;
      return n >= lanes ? load_f32::full(q) : load_f32::part(q, n);
    }
    case dtype::bf16: {
      const uint16_t* q = static_cast<const uint16_t*>(p) + i;
      return n >= lanes ? load_bf16::full(q) : load_bf16::part(q, n);
    }
    case dtype::f16: {
      const uint16_t* q = static_cast<const uint16_t*>(p) + i;
      return n >= lanes ? load_f16::full(q) : load_f16::part(q, n);
    }
    case dtype::i8: break; // KV only (kv_int8.hpp): never a weight or an activation
  }
  return _mm256_setzero_ps();
}

void avx2_axpy(float a, const void* x, dtype xt, int64_t n, float* y) {
  const __m256 av = _mm256_set1_ps(a);
  for (int64_t i = 0; i < n; i += lanes) {
    const int64_t rest = min64(lanes, n - i);
    const __m256i m = tail_mask(rest);
    const __m256 v = _mm256_fmadd_ps(av, load_any(x, xt, i, rest), _mm256_maskload_ps(y + i, m));
    _mm256_maskstore_ps(y + i, m, v);
  }
}

void avx2_to_f32(const void* src, dtype t, int64_t n, float* dst) {
  for (int64_t i = 0; i < n; i += lanes) {
    const int64_t rest = min64(lanes, n - i);
    _mm256_maskstore_ps(dst + i, tail_mask(rest), load_any(src, t, i, rest));
  }
}

// 8 x u32 (each <= 0xffff) -> 8 x u16.
inline __m128i narrow(__m256i v) {
  return _mm_packus_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
}

// f32 -> bf16 exactly as dtype.hpp's f32_to_bf16 (integer round to nearest
// even, NaN kept quiet with its top payload bits).
inline __m128i to_bf16(__m256 v) {
  const __m256i u = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i rounded =
      _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb), 16);
  const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
  const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  return narrow(_mm256_blendv_epi8(rounded, quiet, nan));
}

// f32 -> f16 by F16C (round to nearest even); NaNs become sign | 0x7e00 as
// dtype.hpp's f32_to_f16 makes them.
inline __m128i to_f16(__m256 v) {
  const __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256i u = _mm256_castps_si256(v);
  const __m256i nan_bits = _mm256_or_si256(
      _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x8000)), _mm256_set1_epi32(0x7e00));
  const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  return _mm_blendv_epi8(h, narrow(nan_bits), _mm_packs_epi32(_mm256_castsi256_si128(nan),
                                                               _mm256_extracti128_si256(nan, 1)));
}

void avx2_from_f32(const float* src, int64_t n, dtype t, void* dst) {
  for (int64_t i = 0; i < n; i += lanes) {
    const int64_t rest = min64(lanes, n - i);
    const __m256i m = tail_mask(rest);
    const __m256 v = _mm256_maskload_ps(src + i, m);
    if (t == dtype::f32) {
      _mm256_maskstore_ps(static_cast<float*>(dst) + i, m, v);
      continue;
    }
    const __m128i h = t == dtype::bf16 ? to_bf16(v) : to_f16(v);
    uint16_t* out = static_cast<uint16_t*>(dst) + i;
    if (rest == lanes) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out), h);
    } else {
      uint16_t buf[lanes];
      _mm_storeu_si128(reinterpret_cast<__m128i*>(buf), h);
      std::memcpy(out, buf, static_cast<size_t>(rest) * sizeof(uint16_t));
    }
  }
}

} // namespace

const kernel_table avx2_kernels = {
    "avx2",        gemv_nr,
    &avx2_matmul_range, &avx2_dot, &avx2_rmsnorm, &avx2_silu_mul,
    &avx2_axpy,    &avx2_to_f32, &avx2_from_f32,
};

} // namespace tessera::engine::cpu::detail
