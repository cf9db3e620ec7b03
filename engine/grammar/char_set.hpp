#pragma once
/// @file
/// Sets of Unicode scalar values (code points without surrogates) as sorted
/// ranges, and their UTF-8 encoding as byte-range sequences, for the regex
/// and string parts of the grammar compiler.

#include <array>
#include <cstdint>
#include <functional>
#include <vector>

namespace tessera::engine::grammar {

/// The largest Unicode scalar value.
constexpr uint32_t max_code_point = 0x10FFFF;

/// A closed range of code points [lo, hi].
struct code_range {
  uint32_t lo = 0;
  uint32_t hi = 0;
  friend bool operator==(const code_range&, const code_range&) = default;
  friend auto operator<=>(const code_range&, const code_range&) = default;
};

/// A set of Unicode scalar values: sorted, disjoint, non-adjacent ranges.
/// Surrogates (U+D800..U+DFFF) are never members. A value type.
class char_set {
public:
  char_set() = default;
  /// The set of [lo, hi] (minus surrogates).
  static char_set range(uint32_t lo, uint32_t hi);
  /// Every scalar value.
  static char_set any();
  /// One code point.
  static char_set single(uint32_t c) { return range(c, c); }

  void add(uint32_t lo, uint32_t hi);
  void add(const char_set& other);
  [[nodiscard]] char_set complement() const;
  [[nodiscard]] char_set intersect(const char_set& other) const;
  [[nodiscard]] bool contains(uint32_t c) const;
  [[nodiscard]] bool empty() const { return ranges_.empty(); }
  [[nodiscard]] const std::vector<code_range>& ranges() const { return ranges_; }
  friend bool operator==(const char_set&, const char_set&) = default;

private:
  void normalise();
  std::vector<code_range> ranges_;
};

/// One step of a UTF-8 byte sequence: bytes lo..hi.
struct byte_range {
  uint8_t lo = 0;
  uint8_t hi = 0;
};

/// Calls `emit` with sequences of 1..4 byte ranges whose concatenations are
/// exactly the UTF-8 encodings of the code points in `set` (each encoding
/// in exactly one sequence).
void utf8_sequences(const char_set& set,
                    const std::function<void(const byte_range*, size_t)>& emit);

} // namespace tessera::engine::grammar
