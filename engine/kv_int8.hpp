#pragma once
/// @file
/// The int8 KV pool (`--kv-dtype int8`, kv_layout::kv_dtype == dtype::i8):
/// how a token's K or V of one head becomes int8 values and a scale, how a
/// block's scales are checked, and how a KV dtype and a layout are named.
///
/// Scheme (the kv store's, kvstore/block_quant.hpp, with the same
/// constants): symmetric absmax, scale = max|x| / 127, q = round(x / scale)
/// clamped to [-127, 127]; x is read back as q * scale. The store keeps one
/// scale per (block, layer, K|V, head) because it quantizes whole, finished
/// blocks; the pool writes a block token by token, so it keeps one scale per
/// (block, layer, K|V, head, token). A per-token scale never changes once
/// written: a position's dequantized K/V depends on that token alone, so
/// prefill, chunked prefill, decode, speculative verification (whose
/// rejected tokens are rolled back) and the prefix cache all read the same
/// values, and tokens of one block can be written in parallel. A shared
/// per-block scale would grow as the open tail block fills and change
/// values earlier positions were already attended with. Cost: 2 bytes of
/// f16 scale per head_dim int8 values (head_dim 64: 66 bytes per token and
/// head instead of bf16's 128, 1.94x the tokens per pool).
///
/// The scale is rounded to f16 before the values are quantized with it, so
/// q * scale is what was meant; a scale above f16's largest (65504,
/// max|x| > 8.3e6) is clamped there and the values saturate.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "engine/backend.hpp"

namespace tessera::engine {

/// The largest quantized magnitude (kvstore's int8 codec uses the same).
inline constexpr float kv_int8_qmax = 127.0f;

/// Quantizes `n` floats x[0], x[1], ... into out[0], out[stride], ...
/// (int8) and returns their scale as f16 bits. A non-finite x gives a NaN
/// scale (the attention then yields NaN, as a bf16 pool would carry the
/// NaN itself).
uint16_t kv_int8_quantize(const float* x, int32_t n, int8_t* out, size_t stride);

/// The scale of f16 bits `h`, as f32.
float kv_int8_scale(uint16_t h);

/// Checks the scales of an int8 block (layout `l`, `bytes` of
/// l.block_bytes()): each must be finite and >= 0. Returns what is wrong,
/// naming the layer, K or V, head and token, or nullopt when the block is
/// fine or the layout is not int8.
[[nodiscard]] std::optional<std::string> check_kv_block(const kv_layout& l,
                                                        std::span<const std::byte> bytes);

/// The --kv-dtype / kv_dtype spelling of a KV dtype: "f32", "f16", "bf16",
/// "int8".
[[nodiscard]] std::string_view kv_dtype_name(dtype t);
/// Parses a --kv-dtype value ("bf16", "int8", also "f32", "f16"), or nullopt.
[[nodiscard]] std::optional<dtype> parse_kv_dtype(std::string_view name);

/// A layout for messages: "int8 KV (f16 scales), 16-token blocks, 12 layers
/// x 4 KV heads x head_dim 64".
[[nodiscard]] std::string describe(const kv_layout& l);

} // namespace tessera::engine
