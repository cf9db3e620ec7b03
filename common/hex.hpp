#pragma once
/// @file
/// Hexadecimal digits, for the few places that read them (key files,
/// escapes, byte tokens).

namespace tessera {

/// The value of hex digit `c` (0-9, a-f, A-F), or -1.
[[nodiscard]] constexpr int hex_digit_value(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

} // namespace tessera
