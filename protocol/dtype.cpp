#include "protocol/dtype.hpp"

namespace tessera::protocol {

std::string_view to_safetensors_name(dtype t) {
  switch (t) {
    case dtype::f32: return "F32";
    case dtype::f16: return "F16";
    case dtype::bf16: return "BF16";
    case dtype::i8: return "I8";
  }
  return "?";
}

std::optional<dtype> parse_dtype(std::string_view n) {
  if (n == "F32" || n == "float32" || n == "f32" || n == "float")
    return dtype::f32;
  if (n == "F16" || n == "float16" || n == "f16" || n == "half")
    return dtype::f16;
  if (n == "BF16" || n == "bfloat16" || n == "bf16")
    return dtype::bf16;
  return std::nullopt;
}

} // namespace tessera::protocol
