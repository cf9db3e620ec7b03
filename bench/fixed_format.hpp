#pragma once
/// @file
/// One number printed with a printf format ("%.1f%%"), for the benchmarks'
/// tables and messages.

#include <cstdio>
#include <string>

namespace tessera::bench {

/// `v` printed with `fmt` (one double conversion; at most 63 characters).
[[nodiscard]] inline std::string fixed(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

} // namespace tessera::bench
