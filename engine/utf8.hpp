#pragma once
/// @file
/// UTF-8 validation and repair for decoded token bytes. Ill-formed
/// sequences are replaced by U+FFFD one maximal subpart at a time, as
/// Python's `bytes.decode(errors="replace")`, Rust's `from_utf8_lossy` and
/// the WHATWG decoder do, so streaming and one-shot decoding agree.

#include <cstddef>
#include <string>
#include <string_view>

namespace tessera::engine {

/// U+FFFD REPLACEMENT CHARACTER in UTF-8.
inline constexpr std::string_view utf8_replacement = "\xEF\xBF\xBD";

/// Appends the well-formed UTF-8 of `bytes` to `out`, each ill-formed
/// subsequence replaced by U+FFFD. When `final` is false, a trailing
/// sequence that is incomplete but may still become valid is left
/// unconsumed; when true it becomes U+FFFD. Returns the number of bytes of
/// `bytes` consumed (always `bytes.size()` when `final`).
size_t utf8_append_valid(std::string_view bytes, std::string& out, bool final);

/// Returns `bytes` with every ill-formed subsequence replaced by U+FFFD.
[[nodiscard]] std::string utf8_sanitize(std::string_view bytes);

/// True if `bytes` is well-formed UTF-8 (no surrogates, no overlongs).
[[nodiscard]] bool utf8_is_valid(std::string_view bytes);

/// Number of trailing bytes of `bytes` that start a well-formed but
/// incomplete character (0..3): the bytes a streaming decoder must hold.
[[nodiscard]] size_t utf8_incomplete_tail(std::string_view bytes);

} // namespace tessera::engine
