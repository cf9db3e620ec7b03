// AVX-512 (F/BW/VL/DQ) kernels. Built with that ISA's flags; see
// kernels_isa.hpp for why nothing here may be shared with other units.
#include <utility>

#include "engine/cpu/kernels_isa.hpp"
#include "engine/cpu/simd_avx512.hpp"

namespace tessera::engine::cpu::detail {
namespace {

constexpr int64_t lanes = 16;

// GEMM microkernel: gemm_mr rows x gemm_nr columns of zmm accumulators (24 of
// 32 registers), so each weight vector is loaded and widened once per gemm_mr
// rows and each x vector is reused gemm_nr times. One-row tiles (decode GEMV)
// are memory-bound and use gemv_nr columns of gemv_tile (below), which reads
// them as a few sequential streams.
constexpr int gemm_mr = 4;
constexpr int gemm_nr = 6;
constexpr int gemv_nr = 8;
constexpr int max_nr = gemm_nr > gemv_nr ? gemm_nr : gemv_nr;

// Weight panel budget per thread for the GEMM loop: columns are processed in
// panels of about this many bytes, which stay in the 2 MB L2 while every row
// group of x streams past them.
constexpr int64_t panel_bytes = 768 * 1024;

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

inline __mmask16 tail_mask(int64_t n) { return static_cast<__mmask16>((1u << n) - 1u); }

// Four hsum()s at once, bit for bit: at each level the same pairs of lanes
// are added, only gathered from four vectors into one register first, which
// takes about a third of the instructions of four separate reductions.
// Tiles end with 24 reductions over K / 16 steps, so this is worth ~10% at
// K = 768.
inline __m128 hsum4(__m512 v0, __m512 v1, __m512 v2, __m512 v3) {
  // Halves: [v0[i] + v0[i+8], v1[i] + v1[i+8]] (8 lanes each).
  const __m512 h01 = _mm512_add_ps(_mm512_shuffle_f32x4(v0, v1, 0x44), _mm512_shuffle_f32x4(v0, v1, 0xee));
  const __m512 h23 = _mm512_add_ps(_mm512_shuffle_f32x4(v2, v3, 0x44), _mm512_shuffle_f32x4(v2, v3, 0xee));
  // Quarters: 128-bit lane j holds vj's a[i] + a[i+4].
  const __m512 q = _mm512_add_ps(_mm512_shuffle_f32x4(h01, h23, 0x88), _mm512_shuffle_f32x4(h01, h23, 0xdd));
  // Pairs, then the last add; lane 4j ends up with vj's sum.
  const __m512 p = _mm512_add_ps(q, _mm512_permute_ps(q, _MM_SHUFFLE(1, 0, 3, 2)));
  const __m512 r = _mm512_add_ps(p, _mm512_permute_ps(p, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm512_castps512_ps128(_mm512_maskz_compress_ps(0x1111, r));
}

// Weight loaders: 16 weights as f32, exactly (bf16 and f16 embed in f32), so
// every product x*w is the same whatever the stored type's path.
struct load_f32 {
  using elem = float;
  static __m512 full(const float* p) { return _mm512_loadu_ps(p); }
  static __m512 part(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
};

struct load_bf16 {
  using elem = uint16_t;
  static __m512 widen(__m256i h) { return bf16_widen(h); }
  static __m512 full(const uint16_t* p) {
    return widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static __m512 part(const uint16_t* p, __mmask16 m) { return widen(_mm256_maskz_loadu_epi16(m, p)); }
};

struct load_f16 {
  using elem = uint16_t;
  static __m512 full(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static __m512 part(const uint16_t* p, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
  }
};

// The end of every tile: y[r, c] = hsum(acc[r][c]) (+ bias[c]).
template <int MR, int NR>
inline void store_tile(const __m512 (&acc)[MR][NR], const float* bias, float* y, int64_t ldy) {
  float sums[MR * NR];
  int i = 0;
#pragma GCC unroll 8
  for (; i + 4 <= MR * NR; i += 4)
    _mm_storeu_ps(sums + i, hsum4(acc[i / NR][i % NR], acc[(i + 1) / NR][(i + 1) % NR],
                                  acc[(i + 2) / NR][(i + 2) % NR], acc[(i + 3) / NR][(i + 3) % NR]));
#pragma GCC unroll 4
  for (; i < MR * NR; ++i)
    sums[i] = hsum(acc[i / NR][i % NR]);
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int c = 0; c < NR; ++c) {
      float s = sums[r * NR + c];
      if (bias)
        s += bias[c];
      y[r * ldy + c] = s;
    }
}

// One MR x NR block of y: y[r, c] = hsum(sum over k steps of x[r, k:k+16] *
// w[c, k:k+16]) (+ bias[c]). Every tile shape, dot() included, performs
// exactly this per-element sequence (full steps in k order, then one masked
// step, then hsum, then bias), which is what makes results batch-invariant.
// With `Prefetch`, the next tile's weight rows (NR*K elements further on)
// are pulled in while this tile's are consumed. The caller asks for it in the
// first row group of a panel, which streams the weights from memory; later
// row groups find them in L2, and prefetching there only evicts x from L1
// (K = 2048: 24 KB of next-tile weights against 32 KB of x and 24 KB of
// current weights in a 48 KB L1; M = 512, one thread: ~150 GFLOP/s with
// it in every row group, ~220 with it only in the first). Measured on
// this Zen 5 host, 200 MB of bf16 weights, 2 threads: M = 1 went from 37 to
// 48-53 GB/s with it, M = 16 from ~150 to ~175 GFLOP/s; prefetching two
// tiles ahead, or once per cache line, measured the same within noise.
// `Prefetch` is a template argument, not a run-time flag: with a flag GCC
// kept the 16 row pointers of a one-row tile partly in vector registers
// (moved back for every load) and branched inside the loop, ~8% slower.
template <class L, int MR, int NR, bool Prefetch>
void tile(const float* x, int64_t ldx, const typename L::elem* w, int64_t K, const float* bias,
          float* y, int64_t ldy) {
  __m512 acc[MR][NR];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int c = 0; c < NR; ++c)
      acc[r][c] = _mm512_setzero_ps();

  int64_t k = 0;
  for (; k + lanes <= K; k += lanes) {
    __m512 wv[NR];
#pragma GCC unroll 8
    for (int c = 0; c < NR; ++c) {
      if constexpr (Prefetch)
        _mm_prefetch(reinterpret_cast<const char*>(w + (NR + c) * K + k), _MM_HINT_T0);
      wv[c] = L::full(w + c * K + k);
    }
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m512 xv = _mm512_loadu_ps(x + r * ldx + k);
#pragma GCC unroll 8
      for (int c = 0; c < NR; ++c)
        acc[r][c] = _mm512_fmadd_ps(xv, wv[c], acc[r][c]);
    }
  }
  if (k < K) {
    const __mmask16 m = tail_mask(K - k);
    __m512 wv[NR];
#pragma GCC unroll 8
    for (int c = 0; c < NR; ++c)
      wv[c] = L::part(w + c * K + k, m);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m512 xv = _mm512_maskz_loadu_ps(m, x + r * ldx + k);
#pragma GCC unroll 8
      for (int c = 0; c < NR; ++c)
        acc[r][c] = _mm512_fmadd_ps(xv, wv[c], acc[r][c]);
    }
  }
  store_tile<MR, NR>(acc, bias, y, ldy);
}

// Decode's GEMV reads each weight once and is bound by how fast one core
// streams memory, so the one-row tile orders its reads for the hardware:
// rows in groups of gemv_group, each row read one cache line (two k steps)
// at a time, so the tile is gemv_group sequential streams instead of NR
// streams advancing 32 bytes each, and with `Prefetch` each stream asks for
// the line gemv_prefetch_bytes ahead of it (for rows of K = 768 bf16, the
// next group's). The arithmetic per element is tile<L, 1, NR>'s exactly: one
// accumulator per row, the full k steps in order, the masked last step,
// then store_tile. Measured on this host with a standalone copy of both
// kernels, one core streaming 200 MB of bf16 weights (medians of 9
// interleaved rounds): K = 768 20.8 -> 27.8 GB/s, K =
// 2048 22.5 -> 26.2 GB/s, against 27.5-29.6 GB/s for a pure read of the same
// bytes; prefetching 3-4 KB ahead, groups of 2, or one row at a time measured
// at or below that.
constexpr int gemv_group = 4;
constexpr int64_t gemv_prefetch_bytes = 6144;

template <class L, int G, bool Prefetch>
inline void gemv_rows(const float* x, const typename L::elem* w, int64_t K, __m512* acc) {
  using elem = typename L::elem;
  constexpr int64_t step_bytes = lanes * static_cast<int64_t>(sizeof(elem));
  __m512 a[G];
#pragma GCC unroll 4
  for (int g = 0; g < G; ++g)
    a[g] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 2 * lanes <= K; k += 2 * lanes) {
    const __m512 x0 = _mm512_loadu_ps(x + k);
    const __m512 x1 = _mm512_loadu_ps(x + k + lanes);
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) {
      const elem* r = w + g * K + k;
      if constexpr (Prefetch) {
#pragma GCC unroll 2
        for (int64_t b = 0; b < 2 * step_bytes; b += 64)
          _mm_prefetch(reinterpret_cast<const char*>(r) + gemv_prefetch_bytes + b, _MM_HINT_T0);
      }
      a[g] = _mm512_fmadd_ps(x0, L::full(r), a[g]);
      a[g] = _mm512_fmadd_ps(x1, L::full(r + lanes), a[g]);
    }
  }
  if (k + lanes <= K) {
    const __m512 xv = _mm512_loadu_ps(x + k);
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g)
      a[g] = _mm512_fmadd_ps(xv, L::full(w + g * K + k), a[g]);
    k += lanes;
  }
  if (k < K) {
    const __mmask16 m = tail_mask(K - k);
    const __m512 xv = _mm512_maskz_loadu_ps(m, x + k);
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g)
      a[g] = _mm512_fmadd_ps(xv, L::part(w + g * K + k, m), a[g]);
  }
#pragma GCC unroll 4
  for (int g = 0; g < G; ++g)
    acc[g] = a[g];
}

template <class L, int NR, bool Prefetch>
void gemv_tile(const float* x, int64_t /*ldx*/, const typename L::elem* w, int64_t K,
               const float* bias, float* y, int64_t ldy) {
  constexpr int G = NR < gemv_group ? NR : gemv_group;
  constexpr int full = NR / G * G;
  __m512 acc[1][NR];
#pragma GCC unroll 2
  for (int c = 0; c < full; c += G)
    gemv_rows<L, G, Prefetch>(x, w + c * K, K, acc[0] + c);
  if constexpr (full < NR)
    gemv_rows<L, NR - full, Prefetch>(x, w + full * K, K, acc[0] + full);
  store_tile<1, NR>(acc, bias, y, ldy);
}

template <class L>
using tile_fn = void (*)(const float*, int64_t, const typename L::elem*, int64_t, const float*,
                         float*, int64_t);

// f[mr - 1][nr - 1]: the microkernel for an mr x nr block (gemv_tile with
// nr <= gemv_nr for one row, tile with nr <= gemm_nr otherwise).
template <class L>
struct tile_table {
  tile_fn<L> f[2][gemm_mr][max_nr]; // [prefetch][mr - 1][nr - 1]
};

template <class L, int MR, int... NR>
constexpr void fill_row(tile_fn<L>* row, tile_fn<L>* row_prefetch, std::integer_sequence<int, NR...>) {
  if constexpr (MR == 1) {
    ((row[NR] = &gemv_tile<L, NR + 1, false>), ...);
    ((row_prefetch[NR] = &gemv_tile<L, NR + 1, true>), ...);
  } else {
    ((row[NR] = &tile<L, MR, NR + 1, false>), ...);
    ((row_prefetch[NR] = &tile<L, MR, NR + 1, true>), ...);
  }
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

// Five or six rows (a decode step of 5-6 sequences, or a few sequences
// with speculative drafts) in one row group: with gemm_mr rows per group
// they took two passes over every weight, the second from L2, and a
// decode step of 5 sequences cost 1.5x one of 4 (`tessera bench engine`,
// `small`, 2 threads: 6.3 against 4.3 ms). Only while the rows of x fit
// L1 beside the weights (wide_x_bytes): every tile reads all of them. Not
// 7 or 8 rows: GCC then folds the x loads into the FMAs (one per column),
// and the one pass took longer than two (gemm_bench --batch 8, one thread,
// lm_head: 5.2-6.0 ms against 3.2-3.4); with x held in registers by force,
// no faster than two (3.2-3.4 ms).
// Columns per tile: as many as fit the 32 registers beside MR x NR
// accumulators, NR weights and one x.
constexpr int wide_mr_min = gemm_mr + 1;
constexpr int wide_mr_max = 6;
constexpr int64_t wide_x_bytes = 40 * 1024;
constexpr int wide_nr(int mr) { return mr == 5 ? 5 : 4; }
constexpr int wide_nr_max = wide_nr(wide_mr_min);

template <class L>
struct wide_table {
  tile_fn<L> f[wide_mr_max - gemm_mr][wide_nr_max]; // [mr - wide_mr_min][nr - 1], prefetching
};

template <class L, int MR, int... NR>
constexpr void fill_wide(tile_fn<L>* row, std::integer_sequence<int, NR...>) {
  ((row[NR] = &tile<L, MR, NR + 1, true>), ...);
}

template <class L, int... I>
constexpr wide_table<L> make_wide_table(std::integer_sequence<int, I...>) {
  wide_table<L> t{};
  (fill_wide<L, wide_mr_min + I>(t.f[I], std::make_integer_sequence<int, wide_nr(wide_mr_min + I)>{}), ...);
  return t;
}

template <class L>
constexpr wide_table<L> wide_tiles =
  make_wide_table<L>(std::make_integer_sequence<int, wide_mr_max - gemm_mr>{});

template <class L>
void matmul_range_t(const float* x, int64_t M, int64_t K, int64_t ldx, const void* wv,
                    int64_t n_begin, int64_t n_end, const float* bias, float* y, int64_t ldy) {
  const auto* w = static_cast<const typename L::elem*>(wv);
  if (M >= wide_mr_min && M <= wide_mr_max && M * K * int64_t{sizeof(float)} <= wide_x_bytes) {
    // One pass, streaming the weights from memory (so prefetching).
    const auto* f = wide_tiles<L>.f[M - wide_mr_min];
    const int64_t step = wide_nr(static_cast<int>(M));
    for (int64_t n = n_begin; n < n_end; n += step) {
      const int64_t nr = min64(step, n_end - n);
      f[nr - 1](x, ldx, w + n * K, K, bias ? bias + n : nullptr, y + n, ldy);
    }
    return;
  }
  const auto& t = tiles<L>;
  // Panel of columns whose weights stay in L2 while all row groups pass.
  const int64_t row_bytes = K * static_cast<int64_t>(sizeof(typename L::elem));
  int64_t panel = row_bytes > 0 ? panel_bytes / row_bytes / gemm_nr * gemm_nr : n_end - n_begin;
  if (panel < gemm_nr || M < gemm_mr)
    panel = n_end - n_begin;
  for (int64_t p0 = n_begin; p0 < n_end; p0 += panel) {
    const int64_t p1 = min64(n_end, p0 + panel);
    for (int64_t m0 = 0; m0 < M; m0 += gemm_mr) {
      const int64_t mr = min64(gemm_mr, M - m0);
      const int64_t step = mr == 1 ? gemv_nr : gemm_nr;
      const float* xm = x + m0 * ldx;
      float* ym = y + m0 * ldy;
      for (int64_t n = p0; n < p1; n += step) {
        const int64_t nr = min64(step, p1 - n);
        t.f[m0 == 0][mr - 1][nr - 1](xm, ldx, w + n * K, K, bias ? bias + n : nullptr, ym + n, ldy);
      }
    }
  }
}

void avx512_matmul_range(const float* x, int64_t M, int64_t K, int64_t ldx, const void* w,
                         dtype wt, int64_t n_begin, int64_t n_end, const float* bias, float* y,
                         int64_t ldy) {
  switch (wt) {
    case dtype::f32: return matmul_range_t<load_f32>(x, M, K, ldx, w, n_begin, n_end, bias, y, ldy);
    case dtype::bf16: return matmul_range_t<load_bf16>(x, M, K, ldx, w, n_begin, n_end, bias, y, ldy);
    case dtype::f16: return matmul_range_t<load_f16>(x, M, K, ldx, w, n_begin, n_end, bias, y, ldy);
    case dtype::i8: break; // KV only (kv_int8.hpp): never a weight or an activation
  }
}

float avx512_dot(const float* a, const void* b, dtype bt, int64_t n) {
  // The 1x1 tile: the same element arithmetic as every matmul tile.
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
// Element-wise kernels. The last partial vector goes through the same code
// under a mask, so an element's result never depends on its position or n.

void avx512_rmsnorm(const float* x, const float* w, float eps, int64_t n, float* out) {
  __m512 acc = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const __m512 v = _mm512_loadu_ps(x + i);
    acc = _mm512_fmadd_ps(v, v, acc);
  }
  if (i < n) {
    const __m512 v = _mm512_maskz_loadu_ps(tail_mask(n - i), x + i);
    acc = _mm512_fmadd_ps(v, v, acc);
  }
  const float inv = 1.0f / __builtin_sqrtf(hsum(acc) / static_cast<float>(n) + eps);
  const __m512 s = _mm512_set1_ps(inv);
  for (i = 0; i < n; i += lanes) {
    const __mmask16 m = n - i >= lanes ? __mmask16(0xffff) : tail_mask(n - i);
    const __m512 v = _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), s),
                                   _mm512_maskz_loadu_ps(m, w + i));
    _mm512_mask_storeu_ps(out + i, m, v);
  }
}

void avx512_silu_mul(const float* gate, const float* up, int64_t n, float* out) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += lanes) {
    const __mmask16 m = n - i >= lanes ? __mmask16(0xffff) : tail_mask(n - i);
    const __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
    const __m512 e = exp_ps(_mm512_sub_ps(_mm512_setzero_ps(), g));
    const __m512 v = _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, e)),
                                   _mm512_maskz_loadu_ps(m, up + i));
    _mm512_mask_storeu_ps(out + i, m, v);
  }
}

// Loads 16 (or the masked first few) elements of type t at p + i as f32.
inline __m512 load_any(const void* p, dtype t, int64_t i, __mmask16 m) {
  switch (t) {
    case dtype::f32: return load_f32::part(static_cast<const float*>(p) + i, m);
    case dtype::bf16: return load_bf16::part(static_cast<const uint16_t*>(p) + i, m);
    case dtype::f16: return load_f16::part(static_cast<const uint16_t*>(p) + i, m);
    case dtype::i8: break; // KV only (kv_int8.hpp): never a weight or an activation
  }
  return _mm512_setzero_ps();
}

void avx512_axpy(float a, const void* x, dtype xt, int64_t n, float* y) {
  const __m512 av = _mm512_set1_ps(a);
  for (int64_t i = 0; i < n; i += lanes) {
    const __mmask16 m = n - i >= lanes ? __mmask16(0xffff) : tail_mask(n - i);
    const __m512 v = _mm512_fmadd_ps(av, load_any(x, xt, i, m), _mm512_maskz_loadu_ps(m, y + i));
    _mm512_mask_storeu_ps(y + i, m, v);
  }
}

void avx512_to_f32(const void* src, dtype t, int64_t n, float* dst) {
  for (int64_t i = 0; i < n; i += lanes) {
    const __mmask16 m = n - i >= lanes ? __mmask16(0xffff) : tail_mask(n - i);
    _mm512_mask_storeu_ps(dst + i, m, load_any(src, t, i, m));
  }
}

// f32 -> bf16 exactly as dtype.hpp's f32_to_bf16: round to nearest even by
// integer add, NaN kept quiet with its top payload bits. (vcvtneps2bf16
// would flush subnormal inputs to zero, so it is not used.)
inline __m256i to_bf16(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i rounded =
      _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb), 16);
  const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan, rounded, quiet));
}

// f32 -> f16 by F16C with round-to-nearest-even; NaNs become the canonical
// quiet NaN with the input's sign, as dtype.hpp's f32_to_f16 makes them.
inline __m256i to_f16(__m512 v) {
  const __m256i h = _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512i u = _mm512_castps_si512(v);
  const __m512i nan_bits = _mm512_or_si512(
      _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x8000)), _mm512_set1_epi32(0x7e00));
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  return _mm256_mask_blend_epi16(nan, h, _mm512_cvtepi32_epi16(nan_bits));
}

void avx512_from_f32(const float* src, int64_t n, dtype t, void* dst) {
  for (int64_t i = 0; i < n; i += lanes) {
    const __mmask16 m = n - i >= lanes ? __mmask16(0xffff) : tail_mask(n - i);
    const __m512 v = _mm512_maskz_loadu_ps(m, src + i);
    switch (t) {
      case dtype::f32: _mm512_mask_storeu_ps(static_cast<float*>(dst) + i, m, v); break;
      case dtype::bf16: _mm256_mask_storeu_epi16(static_cast<uint16_t*>(dst) + i, m, to_bf16(v)); break;
      case dtype::f16: _mm256_mask_storeu_epi16(static_cast<uint16_t*>(dst) + i, m, to_f16(v)); break;
      case dtype::i8: break; // KV only (kv_int8.hpp): never a weight or an activation
    }
  }
}

} // namespace

const kernel_table avx512_kernels = {
    // Thread ranges in whole GEMV tiles: M = 1 is the common memory-bound case
    // and every N of the model is a multiple of 8.
    "avx512",        gemv_nr,
    &avx512_matmul_range, &avx512_dot, &avx512_rmsnorm, &avx512_silu_mul,
    &avx512_axpy,    &avx512_to_f32, &avx512_from_f32,
};

} // namespace tessera::engine::cpu::detail
