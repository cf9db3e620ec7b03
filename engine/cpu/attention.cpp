#include "engine/cpu/attention.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "engine/cpu/attention_isa.hpp"
#include "engine/cpu/kernels.hpp"
#include "engine/kv_int8.hpp"

namespace tessera::engine::cpu {

namespace {

std::byte* slab(const attention_shape& s, kv_block_id block, bool is_v, int32_t head) {
  const auto& l = *s.layout;
  return s.pool + static_cast<size_t>(block) * l.block_bytes() + l.slab_offset(s.layer, is_v, head);
}

// The int8 pool's scale of token `slot` of a slab (kv_int8.hpp).
float token_scale(const kv_layout& l, const std::byte* slab_start, int32_t slot) {
  uint16_t h;
  std::memcpy(&h, slab_start + l.slab_values_bytes() + 2 * static_cast<size_t>(slot), 2);
  return kv_int8_scale(h);
}

// Portable attention: same math as the AVX-512 path, scalar. For int8 KV a
// score is (q . k_int8) * k_scale and a position's V weight e * v_scale.
void attend_generic(const attention_shape& s, std::span<const kv_block_id> table, int32_t kv_head,
                    int32_t pos, const float* q, float* out, float* scratch) {
  const auto& l = *s.layout;
  const int32_t hd = l.head_dim, bt = l.block_tokens;
  const int32_t group = s.n_heads / s.n_kv_heads;
  const int32_t n_ctx = pos + 1;
  const bool i8 = l.kv_dtype == dtype::i8;
  for (int32_t h = 0; h < group; ++h) {
    const float* qh = q + static_cast<size_t>(h) * hd;
    float* sc = scratch;
    for (int32_t j = 0; j < n_ctx; ++j) {
      const std::byte* k = slab(s, table[j / bt], false, kv_head);
      float acc = 0.0f;
      for (int32_t d = 0; d < hd; ++d)
        acc = std::fma(qh[d], load_as_f32(k, l.kv_dtype, static_cast<size_t>(d) * bt + j % bt), acc);
      sc[j] = i8 ? acc * token_scale(l, k, j % bt) : acc;
    }
    float m = -std::numeric_limits<float>::infinity();
    for (int32_t j = 0; j < n_ctx; ++j)
      m = std::max(m, sc[j]);
    float sum = 0.0f;
    for (int32_t j = 0; j < n_ctx; ++j) {
      sc[j] = std::exp(sc[j] - m);
      sum += sc[j];
    }
    float* oh = out + static_cast<size_t>(h) * hd;
    std::fill(oh, oh + hd, 0.0f);
    for (int32_t j = 0; j < n_ctx; ++j) {
      const std::byte* v = slab(s, table[j / bt], true, kv_head);
      const float w = i8 ? sc[j] * token_scale(l, v, j % bt) : sc[j];
      for (int32_t d = 0; d < hd; ++d)
        oh[d] = std::fma(w, load_as_f32(v, l.kv_dtype, static_cast<size_t>(j % bt) * hd + d), oh[d]);
    }
    const float inv = 1.0f / sum;
    for (int32_t d = 0; d < hd; ++d)
      oh[d] *= inv;
  }
}

} // namespace

void kv_store(const attention_shape& s, std::span<const kv_block_id> table, int32_t pos,
              const float* k, const float* v) {
  const auto& l = *s.layout;
  const int32_t hd = l.head_dim, bt = l.block_tokens;
  const kv_block_id block = table[pos / bt];
  const int32_t slot = pos % bt;
  for (int32_t h = 0; h < l.num_kv_heads; ++h) {
    std::byte* ks = slab(s, block, false, h);
    std::byte* vs = slab(s, block, true, h);
    const float* kh = k + static_cast<size_t>(h) * hd;
    if (l.kv_dtype == dtype::i8) {
      // One scale per token: what this slot reads back never depends on the
      // block's other tokens (kv_int8.hpp).
      const uint16_t k_scale = kv_int8_quantize(kh, hd, reinterpret_cast<int8_t*>(ks) + slot, bt);
      const uint16_t v_scale = kv_int8_quantize(v + static_cast<size_t>(h) * hd, hd,
                                                reinterpret_cast<int8_t*>(vs) + static_cast<size_t>(slot) * hd, 1);
      std::memcpy(ks + l.slab_values_bytes() + 2 * static_cast<size_t>(slot), &k_scale, 2);
      std::memcpy(vs + l.slab_values_bytes() + 2 * static_cast<size_t>(slot), &v_scale, 2);
      continue;
    }
    for (int32_t d = 0; d < hd; ++d)
      store_from_f32(ks, l.kv_dtype, static_cast<size_t>(d) * bt + slot, kh[d]);
    from_f32(v + static_cast<size_t>(h) * hd, hd, l.kv_dtype,
             vs + static_cast<size_t>(slot) * hd * dtype_size(l.kv_dtype));
  }
}

size_t attention_scratch_floats(const attention_shape& s, int32_t n_ctx) {
  const int32_t bt = s.layout->block_tokens;
  const size_t padded = static_cast<size_t>((n_ctx + bt - 1) / bt) * bt;
  return padded * static_cast<size_t>(s.n_heads / s.n_kv_heads) + 64;
}

void attend(const attention_shape& s, std::span<const kv_block_id> table, int32_t kv_head,
            int32_t pos, const float* q, float* out, float* scratch) {
  const auto& l = *s.layout;
  const std::string_view isa = kernel_isa();
  const bool avx512 = isa == "avx512" && l.block_tokens % 16 == 0 && l.head_dim % 16 == 0;
  const bool avx2 = isa == "avx2" && l.block_tokens % 8 == 0 && l.head_dim % 8 == 0;
  if ((avx512 || avx2) && l.head_dim <= 256 && l.kv_dtype != dtype::f16) {
    detail::attention_avx512_args a;
    a.pool = s.pool;
    a.block_bytes = l.block_bytes();
    a.k_offset = l.slab_offset(s.layer, false, kv_head);
    a.v_offset = l.slab_offset(s.layer, true, kv_head);
    a.table = table.data();
    a.block_tokens = l.block_tokens;
    a.head_dim = l.head_dim;
    a.group = s.n_heads / s.n_kv_heads;
    a.pos = pos;
    a.kv_bf16 = l.kv_dtype == dtype::bf16;
    a.kv_i8 = l.kv_dtype == dtype::i8;
    a.scales_offset = l.slab_values_bytes();
    a.q = q;
    a.out = out;
    a.scratch = scratch;
    if (avx512)
      detail::attend_avx512(a);
    else
      detail::attend_avx2(a);
  } else {
    attend_generic(s, table, kv_head, pos, q, out, scratch);
  }
}

} // namespace tessera::engine::cpu
