// Reading CPU use from /proc: a process's ticks from its stat line (command
// names with spaces and parentheses included), and a live reading that
// moves when the process works.
#include <chrono>

#include <gtest/gtest.h>

#include "bench/cpu_usage.hpp"

namespace {

using namespace tessera::bench;

TEST(CpuUsageTest, AddsUserAndSystemTicks) {
  // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime ...
  auto t = stat_line_cpu_ticks("4242 (tessera) S 1 4242 4242 0 -1 4194304 900 0 0 0 123 45 0 0 20 0 3 0");
  ASSERT_TRUE(t);
  EXPECT_EQ(*t, 168u);
}

TEST(CpuUsageTest, CommandNamesMayHoldSpacesAndParentheses) {
  auto t = stat_line_cpu_ticks("7 (a b) (c)) R 1 7 7 0 -1 0 0 0 0 0 10 5 0 0 20 0 1 0");
  ASSERT_TRUE(t);
  EXPECT_EQ(*t, 15u);
}

TEST(CpuUsageTest, RejectsATruncatedLine) {
  EXPECT_FALSE(stat_line_cpu_ticks("7 (x) R 1 7"));
  EXPECT_FALSE(stat_line_cpu_ticks("no parentheses at all"));
}

TEST(CpuUsageTest, ThisProcessUsesCpuWhenItWorks) {
  auto before = process_cpu_seconds(0);
  ASSERT_TRUE(before);
  // Spin until the counter moves (ticks are 10 ms); bounded.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  volatile uint64_t sink = 0;
  std::optional<double> after = before;
  while (after && *after <= *before && std::chrono::steady_clock::now() < deadline) {
    for (int i = 0; i < 1000000; ++i)
      sink = sink + static_cast<uint64_t>(i);
    after = process_cpu_seconds(0);
  }
  ASSERT_TRUE(after);
  EXPECT_GT(*after, *before);
}

TEST(CpuUsageTest, AProcessThatDoesNotExistHasNoReading) {
  EXPECT_FALSE(process_cpu_seconds(0x7ffffff0));
}

} // namespace
