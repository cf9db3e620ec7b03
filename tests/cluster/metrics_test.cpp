#include "cluster/metrics.hpp"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace {

using namespace tessera::cluster;

TEST(MetricsTest, RendersCountersGaugesAndHistogramsInTextFormat) {
  metrics_registry r;
  r.counter("tessera_requests_total", "Requests received.").inc();
  r.counter("tessera_errors_total", "Errors by kind.", {{"kind", "bad_request"}}).inc(2);
  r.counter("tessera_errors_total", "Errors by kind.", {{"kind", "queue_full"}}).inc();
  r.gauge("tessera_queue_depth", "Requests waiting.").set(3);
  auto& h = r.histogram("tessera_ttft_seconds", "Time to first token.", {0.1, 1.0});
  h.observe(0.05);
  h.observe(0.5);
  h.observe(5.0);
  const std::string want =
    "# HELP tessera_errors_total Errors by kind.\n"
    "# TYPE tessera_errors_total counter\n"
    "tessera_errors_total{kind=\"bad_request\"} 2\n"
    "tessera_errors_total{kind=\"queue_full\"} 1\n"
    "# HELP tessera_queue_depth Requests waiting.\n"
    "# TYPE tessera_queue_depth gauge\n"
    "tessera_queue_depth 3\n"
    "# HELP tessera_requests_total Requests received.\n"
    "# TYPE tessera_requests_total counter\n"
    "tessera_requests_total 1\n"
    "# HELP tessera_ttft_seconds Time to first token.\n"
    "# TYPE tessera_ttft_seconds histogram\n"
    "tessera_ttft_seconds_bucket{le=\"0.1\"} 1\n"
    "tessera_ttft_seconds_bucket{le=\"1\"} 2\n"
    "tessera_ttft_seconds_bucket{le=\"+Inf\"} 3\n"
    "tessera_ttft_seconds_sum 5.55\n"
    "tessera_ttft_seconds_count 3\n";
  EXPECT_EQ(r.render(), want);
}

TEST(MetricsTest, SameNameAndLabelsIsTheSameSeries) {
  metrics_registry r;
  auto& a = r.counter("x_total", "x", {{"k", "v"}});
  auto& b = r.counter("x_total", "x", {{"k", "v"}});
  EXPECT_EQ(&a, &b);
  r.gauge("g", "g", {{"q", "a\"b\\c"}}).set(1);
  EXPECT_NE(r.render().find("g{q=\"a\\\"b\\\\c\"} 1"), std::string::npos) << r.render();
}

TEST(MetricsTest, ConcurrentUpdatesAreAllCounted) {
  metrics_registry r;
  auto& c = r.counter("c_total", "c");
  auto& h = r.histogram("h_seconds", "h", latency_buckets_seconds());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        c.inc();
        h.observe(0.002);
      }
    });
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(c.value(), 40000.0);
  EXPECT_EQ(h.count(), 40000u);
  EXPECT_EQ(h.cumulative_counts()[1], 40000u); // 0.002 <= 0.0025
}

} // namespace
