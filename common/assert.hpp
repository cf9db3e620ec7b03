#pragma once
/// @file
/// TESSERA_ASSERT: a broken invariant is a bug, not an input. It aborts with
/// the condition, the place and a message, in every build type (as GGML_ASSERT).

#include <cstdio>
#include <cstdlib>

namespace tessera::detail {
[[noreturn]] inline void assert_fail(const char* cond, const char* file, int line,
                                     const char* msg) {
  std::fprintf(stderr, "tessera: assertion failed: %s (%s:%d)%s%s\n", cond, file,
               line, msg[0] ? ": " : "", msg);
  std::fflush(stderr);
  std::abort();
}
} // namespace tessera::detail

/// Aborts with a message when `cond` is false. Always on.
#define TESSERA_ASSERT(cond, ...)                                              \
  do {                                                                         \
    if (!(cond)) [[unlikely]]                                                  \
      ::tessera::detail::assert_fail(#cond, __FILE__, __LINE__, "" __VA_ARGS__); \
  } while (false)
