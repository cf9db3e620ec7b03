#include "engine/cpu/attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/cpu/attention_isa.hpp"
#include "engine/cpu/kernels.hpp"

namespace tessera::engine::cpu {

namespace {

std::byte* slab(const attention_shape& s, kv_block_id block, bool is_v, int32_t head) {
  const auto& l = *s.layout;
  return s.pool + static_cast<size_t>(block) * l.block_bytes() + l.slab_offset(s.layer, is_v, head);
}

// Portable attention: same math as the AVX-512 path, scalar.
void attend_generic(const attention_shape& s, std::span<const kv_block_id> table, int32_t kv_head,
                    int32_t pos, const float* q, float* out, float* scratch) {
  const auto& l = *s.layout;
  const int32_t hd = l.head_dim, bt = l.block_tokens;
  const int32_t group = s.n_heads / s.n_kv_heads;
  const int32_t n_ctx = pos + 1;
  for (int32_t h = 0; h < group; ++h) {
    const float* qh = q + static_cast<size_t>(h) * hd;
    float* sc = scratch;
    for (int32_t j = 0; j < n_ctx; ++j) {
      const std::byte* k = slab(s, table[j / bt], false, kv_head);
      float acc = 0.0f;
      for (int32_t d = 0; d < hd; ++d)
        acc = std::fma(qh[d], load_as_f32(k, l.kv_dtype, static_cast<size_t>(d) * bt + j % bt), acc);
      sc[j] = acc;
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
      for (int32_t d = 0; d < hd; ++d)
        oh[d] = std::fma(sc[j], load_as_f32(v, l.kv_dtype, static_cast<size_t>(j % bt) * hd + d), oh[d]);
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
  if (kernel_isa() == "avx512" && l.block_tokens % 16 == 0 && l.head_dim % 16 == 0 &&
      l.head_dim <= 256 && l.kv_dtype != dtype::f16) {
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
    a.q = q;
    a.out = out;
    a.scratch = scratch;
    detail::attend_avx512(a);
  } else {
    attend_generic(s, table, kv_head, pos, q, out, scratch);
  }
}

} // namespace tessera::engine::cpu
