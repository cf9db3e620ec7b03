#include "kvstore/heap_retention.hpp"

#include <sys/resource.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

namespace tessera::kvstore {
namespace {

constexpr size_t block_bytes = 192 << 10; // a `small` model block
constexpr size_t blocks = 320;            // 60 MiB
constexpr size_t page = 4096;

long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  return u.ru_minflt;
}

// Allocates `blocks` block-sized buffers and writes every page of each, as
// a disk read decoding blocks does; returns the minor page faults it took.
// The buffers are freed before returning.
long faults_of_a_read() {
  std::vector<void*> bufs;
  bufs.reserve(blocks);
  const long before = minor_faults();
  for (size_t i = 0; i < blocks; ++i) {
    void* p = std::malloc(block_bytes);
    if (!p)
      std::abort();
    std::memset(p, static_cast<int>(i), block_bytes);
    bufs.push_back(p);
  }
  const long took = minor_faults() - before;
  for (void* p : bufs)
    std::free(p);
  return took;
}

constexpr long pages_touched = static_cast<long>(blocks * block_bytes / page);

#if defined(__GLIBC__)
// Runs first (gtest keeps file order; ctest runs each test alone): with
// glibc's defaults, the second read of the same amount faults its pages in
// again, which is what retain_freed_heap is for. Without this the next
// test would pass whatever the allocator did.
TEST(HeapRetentionTest, WithGlibcsDefaultsFreedBlocksAreFaultedInAgain) {
  (void)faults_of_a_read();
  const long second = faults_of_a_read();
  EXPECT_GT(second, pages_touched / 2) << "glibc kept the freed blocks by default: the next test proves nothing";
}

TEST(HeapRetentionTest, FreedBlocksAreReusedWithoutPageFaults) {
  const auto r = retain_freed_heap(uint64_t{256} << 20);
  ASSERT_TRUE(r.applied);
  EXPECT_EQ(r.trim_threshold_bytes, uint64_t{256} << 20);
  EXPECT_EQ(r.mmap_threshold_bytes, uint64_t{32} << 20);
  (void)faults_of_a_read(); // the heap grows to hold them once
  const long second = faults_of_a_read();
  EXPECT_LT(second, pages_touched / 20) << "of " << pages_touched << " pages";
}

TEST(HeapRetentionTest, ASmallerAskKeepsTheLargestAndBoundsAreClamped) {
  const auto first = retain_freed_heap(uint64_t{64} << 20);
  ASSERT_TRUE(first.applied);
  EXPECT_GE(first.trim_threshold_bytes, uint64_t{64} << 20); // more if an earlier test asked more
  EXPECT_EQ(retain_freed_heap(uint64_t{8} << 20).trim_threshold_bytes, first.trim_threshold_bytes)
      << "a second store's smaller ask must not shrink the first's";
  EXPECT_EQ(retain_freed_heap(0).trim_threshold_bytes, first.trim_threshold_bytes);
  const auto most = retain_freed_heap(UINT64_MAX);
  EXPECT_TRUE(most.applied);
  EXPECT_EQ(most.trim_threshold_bytes, static_cast<uint64_t>(INT_MAX)) << "mallopt takes an int";
}
#endif

} // namespace
} // namespace tessera::kvstore
