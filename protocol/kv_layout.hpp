#pragma once
/// @file
/// The layout of a KV block, as the protocol describes it (hand-offs,
/// transfers, fetches and the store carry one). engine/backend.hpp makes it
/// engine::kv_layout.

#include <cstddef>
#include <cstdint>

#include "protocol/dtype.hpp"

namespace tessera::protocol {

/// How one KV block is laid out in memory. A block is one contiguous region
/// of block_bytes() bytes, so it moves (export, import, network) as one
/// piece. Inside: for each layer, K then V; each is [kv_heads] slabs;
/// a K slab is [head_dim][block_tokens] (transposed: one vector of
/// block_tokens scores per head dimension), a V slab is
/// [block_tokens][head_dim]. Elements are of type kv_dtype.
///
/// kv_dtype i8 (int8 KV, engine/kv_int8.hpp): each slab's int8 values are
/// followed by block_tokens f16 scales, one per token (that token's
/// max|x| / 127 over the head's head_dim elements), so a token's K or V is
/// value * scale. The scales are part of the block's bytes: export,
/// import, the wire and the store move them with the values, untouched.
struct kv_layout {
  int32_t block_tokens = 16;
  int32_t num_layers = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  dtype kv_dtype = dtype::bf16;

  /// Bytes of the elements of one slab (without i8's scales).
  [[nodiscard]] size_t slab_values_bytes() const {
    return static_cast<size_t>(block_tokens) * head_dim * dtype_size(kv_dtype);
  }
  /// Bytes of one K (or V) slab of one head of one layer (i8: values, then
  /// block_tokens 2-byte scales).
  [[nodiscard]] size_t slab_bytes() const {
    return slab_values_bytes() +
           (kv_dtype == dtype::i8 ? static_cast<size_t>(block_tokens) * 2 : 0);
  }
  /// Bytes of one block (all layers, K and V, all heads).
  [[nodiscard]] size_t block_bytes() const {
    return slab_bytes() * 2 * num_kv_heads * num_layers;
  }
  /// Byte offset of the K (is_v false) or V slab of (layer, head) in a block.
  [[nodiscard]] size_t slab_offset(int32_t layer, bool is_v, int32_t head) const {
    return ((static_cast<size_t>(layer) * 2 + (is_v ? 1 : 0)) * num_kv_heads + head) *
           slab_bytes();
  }
  friend bool operator==(const kv_layout&, const kv_layout&) = default;
};

} // namespace tessera::protocol
