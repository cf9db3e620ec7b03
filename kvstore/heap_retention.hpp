#pragma once
/// @file
/// Keeps the memory a kv store's process frees in its heap, for the next
/// blocks, instead of handing it back to the kernel.
///
/// Why: a store's reads allocate block-sized buffers (RocksDB's blob read
/// buffer, then the decoded payload) and its evictions free them. glibc
/// serves blocks of 128 KiB and more with mmap at first, and once freed
/// memory lies at the top of a heap it trims it back to the kernel; the
/// next read faults every page in again. In a VM page faults are dear:
/// 2,560 blocks of 192 KiB read from disk cost ~1 ms per block that way
/// against ~60 us with the memory kept (bench/kv_fetch_bench, bench/README
/// "kv_fetch_bench"). A pool of block buffers would cover the decoded
/// payloads only, not RocksDB's read buffers nor the blocks the workers
/// hand the store, so the heap itself is told to keep what it has.
///
/// Cost: freed memory stays resident. At the top of each malloc heap up to
/// `trim_threshold_bytes` are kept (glibc's M_TRIM_THRESHOLD); memory
/// inside a heap was never returned anyway. Callers pass what the store may
/// hold at once (host capacity + spill queue), so the process's peak is
/// what the store could reach anyway; what changes is that its RSS does not
/// fall back after a burst. A heap that becomes wholly free may still be
/// unmapped by glibc (non-main arenas). Allocations of more than
/// `mmap_threshold_bytes` (32 MiB, glibc's largest) still get their own
/// mapping and go back on free.

#include <cstdint>

namespace tessera::kvstore {

/// What retain_freed_heap set (or would have).
struct heap_retention {
  /// Whether the allocator took the settings (false: not glibc, or mallopt
  /// refused them).
  bool applied = false;
  /// The trim threshold in force: the largest asked for so far in this
  /// process, at most INT32_MAX (mallopt takes an int).
  uint64_t trim_threshold_bytes = 0;
  /// Allocations larger than this are mmapped (and unmapped on free).
  uint64_t mmap_threshold_bytes = 0;
};

/// Tells the process's allocator to keep up to `trim_threshold_bytes`
/// (clamped to [1 MiB, INT32_MAX]) of freed memory at the top of each heap,
/// and to serve allocations up to 32 MiB from its heaps. Process-wide and
/// idempotent: a smaller value than an earlier call's changes nothing, so
/// several stores in one process keep the largest. Call once per store,
/// before it is used. Thread-safe.
heap_retention retain_freed_heap(uint64_t trim_threshold_bytes);

} // namespace tessera::kvstore
