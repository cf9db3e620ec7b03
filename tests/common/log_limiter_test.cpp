#include "common/log_limiter.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace {

using namespace std::chrono_literals;
using tessera::log_limiter;
using tessera::log_permit;
using time_point = std::chrono::steady_clock::time_point;

// A clock that moves only when the test moves it.
struct fake_clock {
  time_point now{std::chrono::hours{1}};
  log_limiter::clock_fn fn() {
    return [this] { return now; };
  }
};

// Admits `n` events; how many were logged, and the suppressed counts they
// reported.
struct tally {
  uint64_t logged = 0;
  uint64_t reported = 0;
  void add(const log_permit& p) {
    EXPECT_TRUE(p.log || p.suppressed == 0) << "a line left out reports nothing";
    logged += p.log ? 1 : 0;
    reported += p.suppressed;
  }
};

tally admit_n(log_limiter& l, int n) {
  tally t;
  for (int i = 0; i < n; ++i)
    t.add(l.admit());
  return t;
}

TEST(LogLimiterTest, LogsTheFirstBurstThenNothingWithinAnInterval) {
  fake_clock clock;
  log_limiter l{3, 10s, clock.fn()};
  const auto t = admit_n(l, 1000);
  EXPECT_EQ(t.logged, 3u);
  EXPECT_EQ(t.reported, 0u);
  EXPECT_EQ(l.events(), 1000u);
  EXPECT_EQ(l.suppressed_total(), 997u);
}

TEST(LogLimiterTest, LogsOneLinePerIntervalSayingHowManyWereLeftOut) {
  fake_clock clock;
  log_limiter l{2, 10s, clock.fn()};
  EXPECT_EQ(admit_n(l, 100).logged, 2u);
  clock.now += 9s;
  EXPECT_FALSE(l.admit()) << "an interval has not passed since the last line";
  clock.now += 1s;
  const auto p = l.admit();
  EXPECT_TRUE(p.log);
  EXPECT_EQ(p.suppressed, 99u);
  EXPECT_FALSE(l.admit());

  // A steady flood of one event per 10 ms for a minute: one line per 10 s.
  tally t;
  for (int i = 0; i < 6000; ++i) {
    clock.now += 10ms;
    t.add(l.admit());
  }
  EXPECT_EQ(t.logged, 6u);
  EXPECT_EQ(l.events(), 6103u);
  EXPECT_EQ(l.suppressed_total(), 6103u - 2u - 1u - 6u);
  // The flood's last event was logged: every line left out was reported.
  EXPECT_EQ(99u + t.reported, l.suppressed_total());
}

TEST(LogLimiterTest, AQuietIntervalStartsAFreshBurstThatReportsTheLeftovers) {
  fake_clock clock;
  log_limiter l{2, 10s, clock.fn()};
  EXPECT_EQ(admit_n(l, 10).logged, 2u);
  clock.now += 10s;
  const auto first = l.admit();
  EXPECT_TRUE(first.log);
  EXPECT_EQ(first.suppressed, 8u);
  const auto second = l.admit();
  EXPECT_TRUE(second.log);
  EXPECT_EQ(second.suppressed, 0u);
  EXPECT_FALSE(l.admit());
}

TEST(LogLimiterTest, EventsLessThanAnIntervalApartAreOneFlood) {
  fake_clock clock;
  log_limiter l{1, 10s, clock.fn()};
  EXPECT_TRUE(l.admit());
  for (int i = 0; i < 5; ++i) {
    clock.now += 9s;
    const auto p = l.admit();
    // Lines at 0, 18 and 36 s: never a fresh burst, never two within 10 s.
    EXPECT_EQ(p.log, i % 2 == 1) << "event at " << 9 * (i + 1) << " s";
  }
}

TEST(LogLimiterTest, ABurstOfZeroLogsOneLinePerInterval) {
  fake_clock clock;
  log_limiter l{0, 10s, clock.fn()};
  EXPECT_TRUE(l.admit());
  EXPECT_EQ(admit_n(l, 50).logged, 0u);
  clock.now += 10s;
  const auto p = l.admit();
  EXPECT_TRUE(p.log);
  EXPECT_EQ(p.suppressed, 50u);
}

TEST(LogLimiterTest, CountsEveryEventFromManyThreads) {
  log_limiter l{5, std::chrono::hours{1}}; // the real clock: no interval passes
  std::atomic<uint64_t> logged{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 10'000; ++i)
        if (l.admit())
          ++logged;
    });
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(logged.load(), 5u);
  EXPECT_EQ(l.events(), 80'000u);
  EXPECT_EQ(l.suppressed_total(), 80'000u - 5u);
}

} // namespace
