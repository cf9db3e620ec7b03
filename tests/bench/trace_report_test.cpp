// Summing up a replay: hit rate from the usage counts of successful
// requests, the optimum of all replayed ones, prefill work, windows.
#include "bench/trace_report.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace {

using tessera::bench::summarize_trace;
using tessera::bench::trace_sample;
using tessera::bench::trace_windows;

trace_sample sample(double trace_s, int64_t prompt, int64_t cached, std::string error = "") {
  trace_sample s;
  s.sent = true;
  s.trace_s = trace_s;
  s.due_s = trace_s;
  s.prompt_tokens = prompt;
  s.max_tokens = 2;
  s.usage_prompt_tokens = prompt;
  s.cached_tokens = cached;
  s.timing.start_s = trace_s + 0.001;
  s.timing.first_token_s = trace_s + 0.101;
  s.timing.last_token_s = trace_s + 0.111;
  s.timing.end_s = trace_s + 0.112;
  s.timing.token_gaps_s = {0.010};
  s.timing.output_tokens = 2;
  s.timing.error = std::move(error);
  return s;
}

TEST(TraceReportTest, HitRateCountsSuccessfulRequestsOptimumCountsAll) {
  std::vector<trace_sample> s{sample(0, 100, 0), sample(1, 200, 150), sample(2, 100, 0, "HTTP 503: busy")};
  std::vector<int64_t> best{0, 180, 100};
  auto sum = summarize_trace(s, best);
  EXPECT_EQ(sum.requests, 3u);
  EXPECT_EQ(sum.errors, 1u);
  EXPECT_EQ(sum.first_error, "HTTP 503: busy");
  EXPECT_EQ(sum.prompt_tokens, 300);
  EXPECT_EQ(sum.cached_tokens, 150);
  EXPECT_EQ(sum.prefill_tokens_computed, 150);
  EXPECT_DOUBLE_EQ(sum.hit_rate, 0.5);
  EXPECT_EQ(sum.optimal_input_tokens, 400);
  EXPECT_EQ(sum.optimal_hit_tokens, 280);
  EXPECT_DOUBLE_EQ(sum.optimal_hit_rate, 0.7);
  EXPECT_DOUBLE_EQ(sum.fraction_of_optimal, 0.5 / 0.7);
  EXPECT_NEAR(sum.latency.ttft.p50_ms, 100, 1e-6);
  EXPECT_NEAR(sum.latency.itl.p50_ms, 10, 1e-6);
  EXPECT_NEAR(sum.send_lag.p50_ms, 1, 1e-6);
}

TEST(TraceReportTest, MissingCachedCountsAsZeroAndIsCounted) {
  auto a = sample(0, 100, -1);
  auto b = sample(1, 100, 40);
  b.usage_prompt_tokens = 101; // the server counted one more (a BOS)
  auto sum = summarize_trace({a, b}, {0, 0});
  EXPECT_EQ(sum.missing_cached_tokens, 1u);
  EXPECT_EQ(sum.prompt_token_mismatches, 1u);
  EXPECT_EQ(sum.prompt_tokens, 201) << "the server's count";
  EXPECT_EQ(sum.cached_tokens, 40);
}

TEST(TraceReportTest, RequestsNeverSentAreErrorsWithoutTimes) {
  auto unsent = sample(5, 100, 0, "not sent");
  unsent.sent = false;
  auto sum = summarize_trace({sample(0, 100, 50), unsent}, {0, 50});
  EXPECT_EQ(sum.errors, 1u);
  EXPECT_EQ(sum.latency.requests, 1u) << "only sent requests are timed";
  EXPECT_NEAR(sum.latency.wall_s, 0.111, 1e-9);
}

TEST(TraceReportTest, WindowsGroupRequestsByTraceTime) {
  std::vector<trace_sample> s{sample(10, 100, 0), sample(20, 100, 50), sample(75, 100, 100)};
  auto w = trace_windows(s, {0, 50, 100}, 30);
  ASSERT_EQ(w.size(), 2u) << "the empty window 30..60 s is left out";
  EXPECT_DOUBLE_EQ(w[0].start_s, 0);
  EXPECT_EQ(w[0].summary.requests, 2u);
  EXPECT_DOUBLE_EQ(w[0].summary.hit_rate, 0.25);
  EXPECT_DOUBLE_EQ(w[1].start_s, 60);
  EXPECT_DOUBLE_EQ(w[1].end_s, 90);
  EXPECT_DOUBLE_EQ(w[1].summary.optimal_hit_rate, 1.0);
  auto j = tessera::bench::trace_window_json(w[1]);
  EXPECT_EQ(j["start_s"], 60.0);
  EXPECT_EQ(j["cached_tokens"], 100);
}

TEST(TraceReportTest, JsonHasTheKeysReportsReadAndTheTableShowsThem) {
  auto j = tessera::bench::trace_summary_json(summarize_trace({sample(0, 100, 25)}, {50}));
  for (const char* k : {"hit_rate", "optimal_hit_rate", "fraction_of_optimal", "ttft_ms_p50", "ttft_ms_p90",
                        "ttft_ms_p99", "itl_ms_p50", "itl_ms_p90", "itl_ms_p99", "prefill_tokens_computed",
                        "requests_per_s", "output_tok_s", "errors"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_EQ(j["prefill_tokens_computed"], 75);
  j["label"] = "agg-1";
  const auto table = tessera::bench::trace_table({j});
  EXPECT_NE(table.find("agg-1"), std::string::npos) << table;
  EXPECT_NE(table.find(" 25.0 "), std::string::npos) << "hit % " << table;
  EXPECT_NE(table.find(" 50.0 "), std::string::npos) << "optimum % " << table;
}

TEST(TraceReportTest, ChartsPlotHitRateAndTtftOverTraceMinutes) {
  std::vector<trace_sample> s{sample(10, 100, 0), sample(70, 100, 50)};
  const std::vector<int64_t> best{0, 100};
  auto charts = tessera::bench::trace_charts("x", summarize_trace(s, best), trace_windows(s, best, 60));
  ASSERT_EQ(charts.size(), 2u);
  EXPECT_FALSE(charts[0].log2_x);
  ASSERT_EQ(charts[0].series[0].points.size(), 2u);
  EXPECT_DOUBLE_EQ(charts[0].series[0].points[1].first, 1.5) << "window 60..120 s, centre 1.5 min";
  EXPECT_DOUBLE_EQ(charts[0].series[0].points[1].second, 50);
  EXPECT_DOUBLE_EQ(charts[0].series[1].points[1].second, 100);
  EXPECT_NEAR(charts[1].series[0].points[0].second, 100, 1e-6);
  const auto svg = tessera::bench::render_svg(charts);
  EXPECT_NE(svg.find("hit rate"), std::string::npos);
  EXPECT_NE(svg.find("TTFT"), std::string::npos);
}

} // namespace
