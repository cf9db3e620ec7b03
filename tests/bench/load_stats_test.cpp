// Percentiles and the per-level summary of a load run, and its prompts.
#include "bench/load_stats.hpp"

#include <gtest/gtest.h>

namespace {

using namespace tessera::bench;

TEST(LoadStatsTest, PercentileInterpolatesBetweenRanks) {
  std::vector<double> v{4, 1, 3, 2, 5}; // unsorted on purpose
  EXPECT_DOUBLE_EQ(percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(percentile(v, 50), 3);
  EXPECT_DOUBLE_EQ(percentile(v, 90), 4.6);
  EXPECT_DOUBLE_EQ(percentile(v, 100), 5);
  EXPECT_DOUBLE_EQ(percentile({7}, 99), 7);
  EXPECT_DOUBLE_EQ(percentile({}, 50), 0);
}

request_sample ok_request(double start, double first, std::vector<double> gaps, int64_t tokens) {
  request_sample s;
  s.start_s = start;
  s.first_token_s = first;
  double t = first;
  for (double g : gaps)
    t += g;
  s.last_token_s = t;
  s.end_s = t + 0.001;
  s.token_gaps_s = std::move(gaps);
  s.output_tokens = tokens;
  s.text_chunks = static_cast<int64_t>(s.token_gaps_s.size()) + 1;
  return s;
}

TEST(LoadStatsTest, SummaryCountsThroughputOverTheLevelsWallTime) {
  std::vector<request_sample> v{ok_request(0.0, 0.1, {0.01, 0.01, 0.01}, 4),
                                ok_request(0.5, 0.7, {0.02, 0.02, 0.02}, 4)};
  request_sample failed;
  failed.start_s = 0.2;
  failed.end_s = 0.3;
  failed.output_tokens = 99; // not counted: the request failed
  failed.error = "HTTP 503: no worker";
  v.push_back(failed);
  auto s = summarize_level(2, v);
  EXPECT_EQ(s.concurrency, 2);
  EXPECT_EQ(s.requests, 3u);
  EXPECT_EQ(s.errors, 1u);
  EXPECT_EQ(s.first_error, "HTTP 503: no worker");
  EXPECT_EQ(s.output_tokens, 8);
  const double wall = 0.7 + 0.06 + 0.001; // first start 0, last end
  EXPECT_NEAR(s.wall_s, wall, 1e-9);
  EXPECT_NEAR(s.output_tok_s, 8 / wall, 1e-6);
  EXPECT_NEAR(s.requests_per_s, 2 / wall, 1e-6);
  EXPECT_EQ(s.ttft.count, 2u);
  EXPECT_NEAR(s.ttft.p50_ms, 150, 1e-6); // 100 and 200 ms
  EXPECT_EQ(s.itl.count, 6u);
  EXPECT_NEAR(s.itl.p50_ms, 15, 1e-6);
  EXPECT_EQ(s.tpot.count, 2u);
  EXPECT_NEAR(s.tpot.mean_ms, 15, 1e-6); // 10 and 20 ms per token after the first
}

TEST(LoadStatsTest, EmptyLevelIsAllZeros) {
  auto s = summarize_level(4, {});
  EXPECT_EQ(s.requests, 0u);
  EXPECT_EQ(s.wall_s, 0);
  EXPECT_EQ(s.output_tok_s, 0);
  EXPECT_EQ(s.ttft.count, 0u);
}

TEST(LoadStatsTest, PromptsAreReproducibleDistinctAndInTheByteRange) {
  auto a = load_prompt(1, 0, 128);
  ASSERT_EQ(a.size(), 128u);
  EXPECT_EQ(a, load_prompt(1, 0, 128));
  EXPECT_NE(a, load_prompt(1, 1, 128));
  EXPECT_NE(a, load_prompt(2, 0, 128));
  for (int32_t t : a) {
    EXPECT_GE(t, 8);
    EXPECT_LT(t, 264);
  }
}

} // namespace
