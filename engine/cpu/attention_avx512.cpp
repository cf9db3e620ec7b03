// AVX-512 attention over the paged KV cache. See attention.hpp for the
// batch-invariance contract: every (query, position) score is a chain of
// FMAs over head_dim in order, in one lane; every output element a chain of
// FMAs over positions in order.
#include "engine/cpu/attention_isa.hpp"
#include "engine/cpu/simd_avx512.hpp"

#include <type_traits>

namespace tessera::engine::cpu::detail {

namespace {

// Element kinds of the KV pool: 16 elements at p widened to f32.
struct elem_f32 {
  static constexpr size_t size = 4;
  static __m512 load16(const std::byte* p) { return _mm512_loadu_ps(reinterpret_cast<const float*>(p)); }
};
struct elem_bf16 {
  static constexpr size_t size = 2;
  static __m512 load16(const std::byte* p) {
    return bf16_widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
};
struct elem_i8 {
  static constexpr size_t size = 1;
  static __m512 load16(const std::byte* p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
};

// 16 f16 scales at p, as f32.
inline __m512 scales16(const std::byte* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

inline int32_t min32(int32_t a, int32_t b) { return a < b ? a : b; }

// For int8 KV (E = elem_i8) a score is (q . k) * k_scale and a position's
// V weight e * v_scale: the scales multiply once per position, outside the
// FMA chains, which stay in the same order as for the other element types.
template <class E>
void attend_t(const attention_avx512_args& args) {
  constexpr bool i8 = std::is_same_v<E, elem_i8>;
  const int32_t hd = args.head_dim, bt = args.block_tokens;
  const size_t es = E::size;
  const int32_t group = args.group;
  const int32_t n_ctx = args.pos + 1;
  const int32_t* table = args.table;
  const float* q = args.q;
  float* out = args.out;
  float* scratch = args.scratch;
  const int32_t n_chunks = (n_ctx + 15) / 16;
  const int32_t chunks_per_block = bt / 16;
  const size_t block_bytes = args.block_bytes;
  const size_t k_off = args.k_offset;
  const size_t v_off = args.v_offset;
  auto k_chunk = [&](int32_t c) {
    return args.pool + static_cast<size_t>(table[c / chunks_per_block]) * block_bytes + k_off +
           static_cast<size_t>(c % chunks_per_block) * 16 * es;
  };
  // The 16 f16 scales of key chunk c (int8 KV only).
  auto k_scales = [&](int32_t c) {
    return args.pool + static_cast<size_t>(table[c / chunks_per_block]) * block_bytes + k_off +
           args.scales_offset + static_cast<size_t>(c % chunks_per_block) * 16 * 2;
  };
  const size_t k_row = static_cast<size_t>(bt) * es; // bytes between head dims
  const int32_t d_chunks = hd / 16;
  const __mmask16 tail = static_cast<__mmask16>(n_ctx % 16 == 0 ? 0xffff : (1u << (n_ctx % 16)) - 1);

  for (int32_t h = 0; h < group; ++h) {
    const float* qh = q + static_cast<size_t>(h) * hd;
    float* sc = scratch; // [n_chunks * 16]
    // Scores, four key chunks at a time so four FMA chains overlap.
    int32_t c = 0;
    for (; c + 4 <= n_chunks; c += 4) {
      const std::byte* p0 = k_chunk(c);
      const std::byte* p1 = k_chunk(c + 1);
      const std::byte* p2 = k_chunk(c + 2);
      const std::byte* p3 = k_chunk(c + 3);
      __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
      for (int32_t d = 0; d < hd; ++d) {
        const __m512 qd = _mm512_set1_ps(qh[d]);
        const size_t o = static_cast<size_t>(d) * k_row;
        a0 = _mm512_fmadd_ps(qd, E::load16(p0 + o), a0);
        a1 = _mm512_fmadd_ps(qd, E::load16(p1 + o), a1);
        a2 = _mm512_fmadd_ps(qd, E::load16(p2 + o), a2);
        a3 = _mm512_fmadd_ps(qd, E::load16(p3 + o), a3);
      }
      if constexpr (i8) {
        a0 = _mm512_mul_ps(a0, scales16(k_scales(c)));
        a1 = _mm512_mul_ps(a1, scales16(k_scales(c + 1)));
        a2 = _mm512_mul_ps(a2, scales16(k_scales(c + 2)));
        a3 = _mm512_mul_ps(a3, scales16(k_scales(c + 3)));
      }
      _mm512_storeu_ps(sc + c * 16, a0);
      _mm512_storeu_ps(sc + (c + 1) * 16, a1);
      _mm512_storeu_ps(sc + (c + 2) * 16, a2);
      _mm512_storeu_ps(sc + (c + 3) * 16, a3);
    }
    for (; c < n_chunks; ++c) {
      const std::byte* p0 = k_chunk(c);
      __m512 a0 = _mm512_setzero_ps();
      for (int32_t d = 0; d < hd; ++d)
        a0 = _mm512_fmadd_ps(_mm512_set1_ps(qh[d]), E::load16(p0 + static_cast<size_t>(d) * k_row), a0);
      if constexpr (i8)
        a0 = _mm512_mul_ps(a0, scales16(k_scales(c)));
      _mm512_storeu_ps(sc + c * 16, a0);
    }

    // Softmax over positions [0, n_ctx); later lanes of the last chunk are
    // positions past `pos` (masked to weight 0).
    const __m512 neg_inf = _mm512_set1_ps(-__builtin_inff());
    __m512 vmax = neg_inf;
    for (c = 0; c < n_chunks; ++c) {
      __mmask16 m = c == n_chunks - 1 ? tail : 0xffff;
      vmax = _mm512_max_ps(vmax, _mm512_mask_loadu_ps(neg_inf, m, sc + c * 16));
    }
    const __m512 mx = _mm512_set1_ps(hmax(vmax));
    __m512 vsum = _mm512_setzero_ps();
    for (c = 0; c < n_chunks; ++c) {
      __mmask16 m = c == n_chunks - 1 ? tail : 0xffff;
      __m512 e = _mm512_maskz_mov_ps(m, exp_ps(_mm512_sub_ps(_mm512_loadu_ps(sc + c * 16), mx)));
      _mm512_storeu_ps(sc + c * 16, e);
      vsum = _mm512_add_ps(vsum, e);
    }
    const float inv = 1.0f / hsum(vsum);

    // out = sum_j e_j * v_j / sum, over positions in order.
    float* oh = out + static_cast<size_t>(h) * hd;
    __m512 acc[16];
    for (int32_t dc = 0; dc < d_chunks; ++dc)
      acc[dc] = _mm512_setzero_ps();
    for (int32_t b = 0; b * bt < n_ctx; ++b) {
      const std::byte* vs = args.pool + static_cast<size_t>(table[b]) * block_bytes + v_off;
      const int32_t jn = min32(bt, n_ctx - b * bt);
      if constexpr (i8) {
        // Fold each position's V scale into its weight (whole chunks: the
        // lanes past n_ctx are not read below).
        for (int32_t c16 = 0; c16 * 16 < jn; ++c16) {
          float* w = sc + b * bt + c16 * 16;
          _mm512_storeu_ps(w, _mm512_mul_ps(_mm512_loadu_ps(w),
                                            scales16(vs + args.scales_offset + static_cast<size_t>(c16) * 32)));
        }
      }
      for (int32_t j = 0; j < jn; ++j) {
        const __m512 w = _mm512_set1_ps(sc[b * bt + j]);
        const std::byte* vr = vs + static_cast<size_t>(j) * hd * es;
        for (int32_t dc = 0; dc < d_chunks; ++dc)
          acc[dc] = _mm512_fmadd_ps(w, E::load16(vr + static_cast<size_t>(dc) * 16 * es), acc[dc]);
      }
    }
    const __m512 vinv = _mm512_set1_ps(inv);
    for (int32_t dc = 0; dc < d_chunks; ++dc)
      _mm512_storeu_ps(oh + dc * 16, _mm512_mul_ps(acc[dc], vinv));
  }
}

} // namespace

void attend_avx512(const attention_avx512_args& a) {
  if (a.kv_i8)
    attend_t<elem_i8>(a);
  else if (a.kv_bf16)
    attend_t<elem_bf16>(a);
  else
    attend_t<elem_f32>(a);
}

} // namespace tessera::engine::cpu::detail
