#pragma once
/// @file
/// ASCII-only case folding for protocol tokens (HTTP header names, auth
/// schemes): locale-free, so "I" never folds to a dotless i.

#include <cstddef>
#include <string_view>

namespace tessera {

/// `a` and `b` equal ignoring the case of ASCII letters.
[[nodiscard]] constexpr bool ascii_iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size())
    return false;
  auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  for (std::size_t i = 0; i < a.size(); ++i)
    if (lower(a[i]) != lower(b[i]))
      return false;
  return true;
}

} // namespace tessera
