#pragma once
/// @file
/// Causal GQA attention of one token over the paged KV cache, and the KV
/// write that precedes it. Internal to the CPU backend.
///
/// Batch invariance: a query's result depends only on its own q vector and
/// the K/V bytes of positions 0..pos: scores accumulate over head_dim in
/// order, softmax and the V sum run over positions in order. So prefill,
/// chunked prefill and decode give bitwise-identical outputs.

#include <cstddef>
#include <cstdint>
#include <span>

#include "engine/backend.hpp"

namespace tessera::engine::cpu {

/// Where one layer's KV lives and how heads are grouped.
struct attention_shape {
  const kv_layout* layout = nullptr;
  std::byte* pool = nullptr; ///< block 0's first byte; block i at i*block_bytes
  int32_t layer = 0;
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;
};

/// Stores one token's K and V (f32, [n_kv_heads*head_dim] each, RoPE
/// already applied to k) at position `pos` of the sequence whose blocks are
/// `table`, converting to the layout's dtype (int8: quantized with the
/// token's own scale per head, engine/kv_int8.hpp).
void kv_store(const attention_shape& s, std::span<const kv_block_id> table, int32_t pos,
              const float* k, const float* v);

/// Scratch floats attend() needs for a context of `n_ctx` positions.
size_t attention_scratch_floats(const attention_shape& s, int32_t n_ctx);

/// Attention of the group of query heads that share kv head `kv_head`, for
/// the token at position `pos`: q and out point at that group's first head
/// ([group * head_dim], q already scaled by 1/sqrt(head_dim)). Reads K/V of
/// positions 0..pos through `table`.
void attend(const attention_shape& s, std::span<const kv_block_id> table, int32_t kv_head,
            int32_t pos, const float* q, float* out, float* scratch);

} // namespace tessera::engine::cpu
