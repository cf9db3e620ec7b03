#include "engine/weights_check.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "engine/engine_errc.hpp"

namespace tessera::engine {

namespace {

// IEEE layout of one element type: a value is NaN or infinite exactly when
// its exponent field is all ones, and NaN when its mantissa is then not 0.
template <class Bits, Bits Exponent, Bits Mantissa, Bits Sign>
struct ieee_format {
  using bits = Bits;
  static constexpr Bits exponent = Exponent;
  static constexpr Bits mantissa = Mantissa;
  static constexpr Bits sign = Sign;
};

using f32_format = ieee_format<uint32_t, 0x7f800000u, 0x007fffffu, 0x80000000u>;
using f16_format = ieee_format<uint16_t, 0x7c00u, 0x03ffu, 0x8000u>;
using bf16_format = ieee_format<uint16_t, 0x7f80u, 0x007fu, 0x8000u>;

// Bytes tested per chunk: small enough that finding the exact element
// re-reads little, large enough that the per-chunk branch costs nothing.
constexpr size_t chunk_bytes = size_t{64} << 10;

template <class F>
typename F::bits load(const std::byte* p, size_t i) {
  typename F::bits u;
  std::memcpy(&u, p + i * sizeof(u), sizeof(u)); // any alignment
  return u;
}

// Whether any of the n elements is non-finite. No early exit and an OR of
// 0/1 lanes: GCC and Clang vectorise it into compares and ORs.
template <class F>
bool any_non_finite(const std::byte* p, size_t n) {
  typename F::bits any = 0;
  for (size_t i = 0; i < n; ++i)
    any |= static_cast<typename F::bits>((load<F>(p, i) & F::exponent) == F::exponent);
  return any != 0;
}

template <class F>
std::optional<non_finite_element> find_in(const std::byte* data, size_t numel) {
  constexpr size_t per_chunk = chunk_bytes / sizeof(typename F::bits);
  for (size_t start = 0; start < numel; start += per_chunk) {
    const size_t n = std::min(per_chunk, numel - start);
    const std::byte* p = data + start * sizeof(typename F::bits);
    if (!any_non_finite<F>(p, n)) [[likely]]
      continue;
    for (size_t i = 0; i < n; ++i) {
      const auto u = load<F>(p, i);
      if ((u & F::exponent) == F::exponent)
        return non_finite_element{start + i, (u & F::mantissa) != 0, (u & F::sign) != 0};
    }
  }
  return std::nullopt;
}

// "[i, j, ...]": the row-major multi-index of flat element `index`.
std::string index_text(size_t index, const std::vector<int64_t>& shape) {
  std::vector<size_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    const auto extent = static_cast<size_t>(std::max<int64_t>(shape[d], 1));
    idx[d] = index % extent;
    index /= extent;
  }
  std::string s = "[";
  for (size_t d = 0; d < idx.size(); ++d)
    s += (d ? ", " : "") + std::to_string(idx[d]);
  return s + "]";
}

} // namespace

std::optional<non_finite_element> find_non_finite(const std::byte* data, size_t numel, dtype type) {
  switch (type) {
    case dtype::f32: return find_in<f32_format>(data, numel);
    case dtype::f16: return find_in<f16_format>(data, numel);
    case dtype::bf16: return find_in<bf16_format>(data, numel);
    case dtype::i8: return std::nullopt; // every int8 is finite
  }
  return std::nullopt;
}

caf::error check_finite(const tensor_view& t, const std::filesystem::path& file) {
  const auto bad = find_non_finite(t.data, static_cast<size_t>(t.numel()), t.type);
  if (!bad)
    return {};
  std::string what = bad->nan ? "NaN" : bad->negative ? "-inf" : "+inf";
  std::string where = "element " + std::to_string(bad->index);
  if (t.shape.size() > 1)
    where += " (index " + index_text(bad->index, t.shape) + ")";
  return make_engine_error(engine_errc::bad_weights, file.string() + ": tensor '" + t.name +
                                                       "' contains " + what + " at " + where);
}

} // namespace tessera::engine
