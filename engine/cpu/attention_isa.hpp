#pragma once
/// @file
/// Per-ISA attention entry points (internal to attention.cpp's dispatch).

#include "engine/cpu/attention.hpp"

namespace tessera::engine::cpu::detail {

/// AVX-512 version; requires block_tokens % 16 == 0 and head_dim % 16 == 0.
void attend_avx512(const attention_shape& s, std::span<const kv_block_id> table,
                   int32_t kv_head, int32_t pos, const float* q, float* out, float* scratch);

} // namespace tessera::engine::cpu::detail
