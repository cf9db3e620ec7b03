// The fork-join pool: coverage of parallel_for and liveness of run().
#include "engine/cpu/thread_pool.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <thread>
#include <vector>

namespace tessera::engine::cpu {
namespace {

TEST(ThreadPoolTest, ParallelForCoversEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3}) {
    thread_pool pool{threads};
    EXPECT_EQ(pool.size(), threads);
    for (int64_t n : {0, 1, 2, 3, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::atomic<int> calls{0};
      pool.parallel_for(n, [&](int64_t begin, int64_t end) {
        EXPECT_LT(begin, end);
        calls.fetch_add(1);
        for (int64_t i = begin; i < end; ++i)
          hits[static_cast<size_t>(i)].fetch_add(1);
      });
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "threads=" << threads << " n=" << n;
      EXPECT_LE(calls.load(), threads);
    }
  }
}

TEST(ThreadPoolTest, RunGivesEachThreadItsIndexOnce) {
  thread_pool pool{3};
  std::vector<std::atomic<int>> seen(3);
  pool.run([&](int i) { seen[static_cast<size_t>(i)].fetch_add(1); });
  for (auto& s : seen)
    EXPECT_EQ(s.load(), 1);
}

TEST(ThreadPoolTest, TenThousandRunsInARowFinish) {
  for (int threads : {2, 3}) {
    thread_pool pool{threads};
    std::atomic<int64_t> total{0};
    std::promise<void> finished;
    auto done = finished.get_future();
    std::thread driver([&] {
      for (int i = 0; i < 10000; ++i)
        pool.run([&](int index) { total.fetch_add(index + 1, std::memory_order_relaxed); });
      finished.set_value();
    });
    if (done.wait_for(std::chrono::seconds(120)) != std::future_status::ready) {
      // A deadlocked pool cannot be joined or destroyed: report and leave.
      std::fprintf(stderr, "thread_pool deadlocked (threads=%d)\n", threads);
      std::_Exit(1);
    }
    driver.join();
    EXPECT_EQ(total.load(), int64_t{10000} * threads * (threads + 1) / 2);
  }
}

} // namespace
} // namespace tessera::engine::cpu
