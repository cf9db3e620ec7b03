// AVX2 attention over the paged KV cache, for CPUs without AVX-512: the
// AVX-512 path's algorithm on 8 lanes (see attention.hpp for the
// batch-invariance contract: every score a chain of FMAs over head_dim in
// order, in one lane; every output element a chain of FMAs over positions
// in order). f32, bf16 and int8 KV (the int8 pool's per-token f16 scales
// multiply a score once and fold into a position's V weight).
#include <immintrin.h>

#include <type_traits>

#include "engine/cpu/attention_isa.hpp"

namespace tessera::engine::cpu::detail {

namespace {

struct elem_f32 {
  static constexpr size_t size = 4;
  static __m256 load8(const std::byte* p) { return _mm256_loadu_ps(reinterpret_cast<const float*>(p)); }
};
struct elem_bf16 {
  static constexpr size_t size = 2;
  static __m256 load8(const std::byte* p) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
  }
};
struct elem_i8 {
  static constexpr size_t size = 1;
  static __m256 load8(const std::byte* p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
};

// 8 f16 scales at p, as f32.
inline __m256 scales8(const std::byte* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float hmax8(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// e^x (x <= 0 here): the AVX-512 path's range reduction and polynomial,
// 2^n built in the exponent bits (x clamped to [-87, 0]).
inline __m256 exp8(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(0.0f));
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
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

inline int32_t min32(int32_t a, int32_t b) { return a < b ? a : b; }

template <class E>
void attend_t(const attention_avx512_args& args) {
  constexpr bool i8 = std::is_same_v<E, elem_i8>;
  const int32_t hd = args.head_dim, bt = args.block_tokens;
  const size_t es = E::size;
  const int32_t group = args.group;
  const int32_t n_ctx = args.pos + 1;
  const int32_t* table = args.table;
  float* scratch = args.scratch;
  const int32_t n_chunks = (n_ctx + 7) / 8;
  const int32_t chunks_per_block = bt / 8;
  const size_t block_bytes = args.block_bytes;
  auto block_at = [&](int32_t c) {
    return args.pool + static_cast<size_t>(table[c / chunks_per_block]) * block_bytes;
  };
  const size_t k_row = static_cast<size_t>(bt) * es;
  const int32_t d_chunks = hd / 8;
  // Lanes of the last chunk at or before pos.
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const int32_t tail_n = n_ctx - (n_chunks - 1) * 8;
  const __m256 tail = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(tail_n), lane));

  for (int32_t h = 0; h < group; ++h) {
    const float* qh = args.q + static_cast<size_t>(h) * hd;
    float* sc = scratch;
    int32_t c = 0;
    for (; c + 2 <= n_chunks; c += 2) {
      const std::byte* p0 = block_at(c) + args.k_offset + static_cast<size_t>(c % chunks_per_block) * 8 * es;
      const std::byte* p1 = block_at(c + 1) + args.k_offset + static_cast<size_t>((c + 1) % chunks_per_block) * 8 * es;
      __m256 a0 = _mm256_setzero_ps(), a1 = a0;
      for (int32_t d = 0; d < hd; ++d) {
        const __m256 qd = _mm256_set1_ps(qh[d]);
        const size_t o = static_cast<size_t>(d) * k_row;
        a0 = _mm256_fmadd_ps(qd, E::load8(p0 + o), a0);
        a1 = _mm256_fmadd_ps(qd, E::load8(p1 + o), a1);
      }
      if constexpr (i8) {
        a0 = _mm256_mul_ps(a0, scales8(block_at(c) + args.k_offset + args.scales_offset +
                                       static_cast<size_t>(c % chunks_per_block) * 16));
        a1 = _mm256_mul_ps(a1, scales8(block_at(c + 1) + args.k_offset + args.scales_offset +
                                       static_cast<size_t>((c + 1) % chunks_per_block) * 16));
      }
      _mm256_storeu_ps(sc + c * 8, a0);
      _mm256_storeu_ps(sc + (c + 1) * 8, a1);
    }
    for (; c < n_chunks; ++c) {
      const std::byte* p0 = block_at(c) + args.k_offset + static_cast<size_t>(c % chunks_per_block) * 8 * es;
      __m256 a0 = _mm256_setzero_ps();
      for (int32_t d = 0; d < hd; ++d)
        a0 = _mm256_fmadd_ps(_mm256_set1_ps(qh[d]), E::load8(p0 + static_cast<size_t>(d) * k_row), a0);
      if constexpr (i8)
        a0 = _mm256_mul_ps(a0, scales8(block_at(c) + args.k_offset + args.scales_offset +
                                       static_cast<size_t>(c % chunks_per_block) * 16));
      _mm256_storeu_ps(sc + c * 8, a0);
    }

    // Softmax over [0, n_ctx); lanes past pos weigh 0.
    const __m256 neg_inf = _mm256_set1_ps(-__builtin_inff());
    __m256 vmax = neg_inf;
    for (c = 0; c < n_chunks; ++c) {
      __m256 s = _mm256_loadu_ps(sc + c * 8);
      if (c == n_chunks - 1)
        s = _mm256_blendv_ps(neg_inf, s, tail);
      vmax = _mm256_max_ps(vmax, s);
    }
    const __m256 mx = _mm256_set1_ps(hmax8(vmax));
    __m256 vsum = _mm256_setzero_ps();
    for (c = 0; c < n_chunks; ++c) {
      __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(sc + c * 8), mx));
      if (c == n_chunks - 1)
        e = _mm256_and_ps(e, tail);
      _mm256_storeu_ps(sc + c * 8, e);
      vsum = _mm256_add_ps(vsum, e);
    }
    const float inv = 1.0f / hsum8(vsum);

    float* oh = args.out + static_cast<size_t>(h) * hd;
    __m256 acc[32];
    for (int32_t dc = 0; dc < d_chunks; ++dc)
      acc[dc] = _mm256_setzero_ps();
    for (int32_t b = 0; b * bt < n_ctx; ++b) {
      const std::byte* vs = args.pool + static_cast<size_t>(table[b]) * block_bytes + args.v_offset;
      const int32_t jn = min32(bt, n_ctx - b * bt);
      if constexpr (i8) {
        for (int32_t c8 = 0; c8 * 8 < jn; ++c8) {
          float* w = sc + b * bt + c8 * 8;
          _mm256_storeu_ps(w, _mm256_mul_ps(_mm256_loadu_ps(w),
                                            scales8(vs + args.scales_offset + static_cast<size_t>(c8) * 16)));
        }
      }
      for (int32_t j = 0; j < jn; ++j) {
        const __m256 w = _mm256_set1_ps(sc[b * bt + j]);
        const std::byte* vr = vs + static_cast<size_t>(j) * hd * es;
        for (int32_t dc = 0; dc < d_chunks; ++dc)
          acc[dc] = _mm256_fmadd_ps(w, E::load8(vr + static_cast<size_t>(dc) * 8 * es), acc[dc]);
      }
    }
    const __m256 vinv = _mm256_set1_ps(inv);
    for (int32_t dc = 0; dc < d_chunks; ++dc)
      _mm256_storeu_ps(oh + dc * 8, _mm256_mul_ps(acc[dc], vinv));
  }
}

} // namespace

void attend_avx2(const attention_avx512_args& a) {
  if (a.kv_i8)
    attend_t<elem_i8>(a);
  else if (a.kv_bf16)
    attend_t<elem_bf16>(a);
  else
    attend_t<elem_f32>(a);
}

} // namespace tessera::engine::cpu::detail
