#include "kvstore/heap_retention.hpp"

#include <algorithm>
#include <climits>
#include <mutex>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace tessera::kvstore {
namespace {

// glibc's largest mmap threshold on 64-bit (HEAP_MAX_SIZE / 2): setting it
// also turns off the dynamic threshold, which would otherwise move with
// every mmapped block freed.
constexpr uint64_t mmap_threshold = uint64_t{32} << 20;
constexpr uint64_t least_trim = uint64_t{1} << 20;

std::mutex mutex;
heap_retention current;

} // namespace

heap_retention retain_freed_heap(uint64_t trim_threshold_bytes) {
  const uint64_t want = std::clamp<uint64_t>(trim_threshold_bytes, least_trim, INT_MAX);
  std::lock_guard guard{mutex};
  if (current.applied && want <= current.trim_threshold_bytes)
    return current;
#if defined(__GLIBC__)
  const bool mmap_ok = mallopt(M_MMAP_THRESHOLD, static_cast<int>(mmap_threshold)) == 1;
  const bool trim_ok = mallopt(M_TRIM_THRESHOLD, static_cast<int>(want)) == 1;
  if (mmap_ok && trim_ok)
    current = heap_retention{true, want, mmap_threshold};
  else
    return heap_retention{false, want, mmap_threshold};
#else
  return heap_retention{false, want, 0};
#endif
  return current;
}

} // namespace tessera::kvstore
