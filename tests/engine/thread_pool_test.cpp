// The fork-join pool: coverage of parallel_for and liveness of run().
#include "engine/cpu/thread_pool.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
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

TEST(ThreadPoolTest, RunChunksRunsEveryChunkExactlyOnce) {
  for (int threads : {1, 2, 3}) {
    thread_pool pool{threads};
    for (int64_t n : {0, 1, 2, 3, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.run_chunks(n, [&](int64_t c) {
        ASSERT_GE(c, 0);
        ASSERT_LT(c, n);
        hits[static_cast<size_t>(c)].fetch_add(1);
      });
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "threads=" << threads << " n=" << n;
    }
  }
}

// Per-thread scratch is safe only if a thread index never runs two chunks
// at once: each chunk marks its thread busy and fails if it already was.
TEST(ThreadPoolTest, RunChunksWithThreadIndexNeverSharesAnIndex) {
  for (int threads : {1, 2, 3}) {
    thread_pool pool{threads};
    for (int64_t n : {1, 2, 7, 2000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::vector<std::atomic<int>> busy(static_cast<size_t>(threads));
      std::atomic<int> overlaps{0}, bad_index{0};
      pool.run_chunks(n, [&](int64_t c, int t) {
        if (t < 0 || t >= threads) {
          bad_index.fetch_add(1);
          return;
        }
        if (busy[static_cast<size_t>(t)].exchange(1) != 0)
          overlaps.fetch_add(1);
        hits[static_cast<size_t>(c)].fetch_add(1);
        std::this_thread::yield(); // widen the window an overlap would need
        busy[static_cast<size_t>(t)].store(0);
      });
      EXPECT_EQ(bad_index.load(), 0);
      EXPECT_EQ(overlaps.load(), 0) << "threads=" << threads << " n=" << n;
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "threads=" << threads << " n=" << n;
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

// Runs `body` on a helper thread; fails (and exits, since a deadlocked pool
// can be neither joined nor destroyed) if it takes longer than two minutes.
void finishes_in_time(const char* what, const std::function<void()>& body) {
  std::promise<void> finished;
  auto done = finished.get_future();
  std::thread driver([&] {
    body();
    finished.set_value();
  });
  if (done.wait_for(std::chrono::seconds(120)) != std::future_status::ready) {
    std::fprintf(stderr, "thread_pool deadlocked: %s\n", what);
    std::_Exit(1);
  }
  driver.join();
}

TEST(ThreadPoolTest, TenThousandRunsInARowFinish) {
  for (int threads : {2, 3}) {
    thread_pool pool{threads};
    std::atomic<int64_t> total{0};
    finishes_in_time("run", [&] {
      for (int i = 0; i < 10000; ++i)
        pool.run([&](int index) { total.fetch_add(index + 1, std::memory_order_relaxed); });
    });
    EXPECT_EQ(total.load(), int64_t{10000} * threads * (threads + 1) / 2);
  }
}

TEST(ThreadPoolTest, TenThousandMixedRunAndRunChunksFinish) {
  for (int threads : {2, 3}) {
    thread_pool pool{threads};
    std::atomic<int64_t> runs{0}, chunks{0};
    finishes_in_time("run_chunks", [&] {
      for (int i = 0; i < 10000; ++i) {
        pool.run_chunks(i % 7 + 1, [&](int64_t) { chunks.fetch_add(1, std::memory_order_relaxed); });
        if (i % 3 == 0)
          pool.run([&](int) { runs.fetch_add(1, std::memory_order_relaxed); });
      }
    });
    int64_t expected_chunks = 0;
    for (int i = 0; i < 10000; ++i)
      expected_chunks += i % 7 + 1;
    EXPECT_EQ(chunks.load(), expected_chunks);
    EXPECT_EQ(runs.load(), int64_t{3334} * threads);
  }
}

} // namespace
} // namespace tessera::engine::cpu
