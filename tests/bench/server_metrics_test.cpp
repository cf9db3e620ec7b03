// Reading one metric's series by label out of a Prometheus text exposition.

#include "bench/server_metrics.hpp"

#include <gtest/gtest.h>

namespace tessera::bench {
namespace {

TEST(ServerMetricsTest, SeriesOfOneMetricByTheValueOfOneLabel) {
  const std::string text =
    "# HELP tessera_engine_busy_seconds_total Wall seconds.\n"
    "# TYPE tessera_engine_busy_seconds_total counter\n"
    "tessera_engine_busy_seconds_total{worker=\"prefill-0\"} 1.5\n"
    "tessera_engine_busy_seconds_total{node=\"n\",worker=\"decode-0\"} 2e-3\n"
    "tessera_engine_busy_seconds_total_other{worker=\"x\"} 9\n"
    "tessera_engine_busy_seconds_total{node=\"n\"} 7\n"
    "tessera_engine_steps_total{worker=\"prefill-0\"} 10\n"
    "tessera_engine_busy_seconds_total{worker=\"broken\"} not-a-number\n";
  const auto m = metric_by_label(text, "tessera_engine_busy_seconds_total", "worker");
  ASSERT_EQ(m.size(), 2u);
  EXPECT_DOUBLE_EQ(m.at("prefill-0"), 1.5);
  EXPECT_DOUBLE_EQ(m.at("decode-0"), 2e-3);
  EXPECT_TRUE(metric_by_label(text, "tessera_engine_busy_seconds_total", "gpu").empty());
  EXPECT_TRUE(metric_by_label("", "x", "worker").empty());
}

TEST(ServerMetricsTest, SeriesSharingTheLabelsValueAreSummed) {
  const std::string text = "tessera_kvstore_fetch_total{worker=\"prefill-0\",outcome=\"late\"} 2\n"
                           "tessera_kvstore_fetch_total{worker=\"decode-1\",outcome=\"late\"} 3\n"
                           "tessera_kvstore_fetch_total{worker=\"decode-1\",outcome=\"partial\"} 40\n";
  const auto m = metric_by_label(text, "tessera_kvstore_fetch_total", "outcome");
  ASSERT_EQ(m.size(), 2u);
  EXPECT_DOUBLE_EQ(m.at("late"), 5);
  EXPECT_DOUBLE_EQ(m.at("partial"), 40);
}

TEST(ServerMetricsTest, AnEmptyLabelSumsEverySeriesOfTheMetric) {
  const std::string text = "# TYPE tessera_router_kv_admission_waits_total counter\n"
                           "tessera_router_kv_admission_waits_total 12\n"
                           "tessera_router_kv_admission_waits_total_x 5\n"
                           "tessera_router_kv_admission_waits_total{router=\"b\"} 3\n"
                           "tessera_router_kv_admission_waits_total broken\n";
  const auto m = metric_by_label(text, "tessera_router_kv_admission_waits_total", "");
  ASSERT_EQ(m.size(), 1u);
  EXPECT_DOUBLE_EQ(m.at(""), 15);
  EXPECT_TRUE(metric_by_label(text, "tessera_router_kv_admission_waits_total", "router").size() == 1u);
  EXPECT_TRUE(metric_by_label("", "x", "").empty());
}

} // namespace
} // namespace tessera::bench
