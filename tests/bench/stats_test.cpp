// Percentiles of benchmark samples.
#include <vector>

#include <gtest/gtest.h>

#include "bench/stats.hpp"

namespace {

using tessera::bench::percentile;

TEST(StatsTest, PercentileIsNearestRank) {
  std::vector<double> v;
  for (int i = 100; i >= 1; --i)
    v.push_back(i); // unsorted on purpose
  EXPECT_EQ(percentile(v, 50), 50);
  EXPECT_EQ(percentile(v, 99), 99);
  EXPECT_EQ(percentile(v, 100), 100);
  EXPECT_EQ(percentile(v, 0), 1);
}

TEST(StatsTest, PercentileOfFewSamples) {
  EXPECT_EQ(percentile({7}, 99), 7);
  EXPECT_EQ(percentile({1, 2}, 50), 1);
  EXPECT_EQ(percentile({1, 2}, 51), 2);
  EXPECT_EQ(percentile({}, 50), 0);
}

} // namespace
