#pragma once
/// @file
/// Optional int8 quantization of KV blocks, to hold more blocks per byte in
/// the lower tiers. tiered_block_store keeps blocks this way when its
/// tier_codec is int8 (under a namespace of its own, so an int8 block is
/// never served where an exact one was asked for) and dequantizes on get().
///
/// Scheme: symmetric, per block and per head. Each (layer, K|V, head) slab
/// of the block ([block_tokens, head_dim] elements) gets one f32 scale,
/// max|x| / 127, and each element becomes round(x / scale) in [-127, 127].
/// The error of an element is at most scale / 2 before the result is
/// rounded back to the block's dtype. Size: 1 byte per element plus 4 per
/// slab, so a bf16 block shrinks to ~50% (f32: ~25%).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "kvstore/block.hpp"

namespace tessera::kvstore {

/// A block quantized to int8 with one scale per slab.
struct quantized_block {
  /// Layout of the original block (its dtype is what dequantize returns).
  engine::kv_layout layout;
  /// One per (layer, K|V, head), in slab order ([layer][K|V][head]).
  std::vector<float> scales;
  /// One per element, in the payload's element order.
  std::vector<int8_t> values;

  /// Bytes of scales + values.
  [[nodiscard]] size_t bytes() const { return scales.size() * sizeof(float) + values.size(); }
};

/// Quantizes `b`; nullopt when the payload holds a NaN or an infinity (no
/// scale represents them), does not match its layout, or is an int8 pool
/// block already (kv_dtype i8, engine/kv_int8.hpp: kept as it is).
[[nodiscard]] std::optional<quantized_block> quantize_int8(const stored_block& b);

/// The payload `q` stands for, in q.layout's dtype (rounded to nearest).
[[nodiscard]] std::vector<std::byte> dequantize_int8(const quantized_block& q);

/// `b` (an exact block) encoded for a tier: meta.codec int8, the same layout
/// and token count, payload = the scales (f32, little-endian, slab order)
/// then the values (int8), encoded_payload_bytes(layout, int8) bytes, and
/// meta.checksum over those bytes. nullopt where quantize_int8 refuses `b`
/// or `b` is not exact.
[[nodiscard]] std::optional<stored_block> encode_int8_block(const stored_block& b);

/// The exact block an int8-encoded `b` stands for: dequantized to
/// b.meta.layout's dtype, codec exact, checksum of the new bytes. nullopt
/// when `b` is not int8, its payload has the wrong size, or a scale is not
/// finite and non-negative. Does not verify b's checksum (the tiers do).
[[nodiscard]] std::optional<stored_block> decode_int8_block(const stored_block& b);

/// What quantizing a block costs and saves.
struct quantization_report {
  /// 1 - quantized bytes / original bytes.
  double saved_fraction = 0;
  /// Largest |x - dequantize(quantize(x))|.
  double max_abs_error = 0;
  /// Root mean square of the error.
  double rms_error = 0;
  /// rms_error / root mean square of x (0 when x is all zeros).
  double rms_relative_error = 0;
};

/// Quantizes and dequantizes `b` and measures the result; nullopt where
/// quantize_int8 refuses the block.
[[nodiscard]] std::optional<quantization_report> measure_int8(const stored_block& b);

} // namespace tessera::kvstore
