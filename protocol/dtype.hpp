#pragma once
/// @file
/// Element types of weights and KV blocks, as the protocol names them (a
/// KV layout on the wire carries one). Scalar conversions between them are
/// the engine's (engine/dtype.hpp).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tessera::protocol {

/// Element type of a tensor. i8 is for KV blocks only (an int8 KV pool:
/// each element is a quantized value whose scale lives beside it, see
/// engine/kv_int8.hpp); no weight is i8 and parse_dtype never returns it.
enum class dtype : uint8_t { f32, f16, bf16, i8 };

/// Bytes per element of `t`.
constexpr size_t dtype_size(dtype t) { return t == dtype::f32 ? 4 : t == dtype::i8 ? 1 : 2; }

/// The safetensors / config.json spelling: "F32", "F16", "BF16" ("I8").
std::string_view to_safetensors_name(dtype t);

/// Parses "F32" / "F16" / "BF16" (safetensors) or "float32" / "float16" /
/// "bfloat16" (config.json torch_dtype, also accepted as "f32", "bf16" ...).
std::optional<dtype> parse_dtype(std::string_view name);

} // namespace tessera::protocol
