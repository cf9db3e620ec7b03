#pragma once
/// @file
/// Internal to engine/cpu: the AVX-512 attention entry point. Its unit is
/// compiled with AVX-512 flags, so this interface is plain data and C
/// headers only (see kernels_isa.hpp for why no shared inline code).

#include <cstddef>
#include <cstdint>

namespace tessera::engine::cpu::detail {

/// One attend() call, resolved to raw pointers and sizes.
struct attention_avx512_args {
  const std::byte* pool = nullptr; ///< block 0's first byte
  size_t block_bytes = 0;
  size_t k_offset = 0;  ///< offset of this (layer, kv head)'s K slab in a block
  size_t v_offset = 0;  ///< same for V
  const int32_t* table = nullptr; ///< block table of the sequence
  int32_t block_tokens = 0;       ///< multiple of 16
  int32_t head_dim = 0;           ///< multiple of 16, <= 256
  int32_t group = 0;              ///< query heads sharing the kv head
  int32_t pos = 0;                ///< position of the query token
  bool kv_bf16 = true;            ///< else f32 (or i8)
  bool kv_i8 = false;             ///< int8 values, f16 scale per token
  size_t scales_offset = 0;       ///< i8: bytes from a slab to its scales
  const float* q = nullptr;       ///< [group * head_dim], pre-scaled
  float* out = nullptr;           ///< [group * head_dim]
  float* scratch = nullptr;       ///< >= ceil((pos + 1) / 16) * 16 floats
};

/// AVX-512 attention (see attention.hpp for the contract).
void attend_avx512(const attention_avx512_args& a);

/// AVX2 attention, the same algorithm on 8 lanes: the same arguments, with
/// block_tokens and head_dim multiples of 8 (head_dim <= 256) and scratch
/// of >= ceil((pos + 1) / 8) * 8 floats.
void attend_avx2(const attention_avx512_args& a);

} // namespace tessera::engine::cpu::detail
