// Reading one metric's series by label out of a Prometheus text exposition.

#include "bench/server_metrics.hpp"

#include <string>

#include <gtest/gtest.h>
#include <sys/socket.h>

#include "tests/support/sockets.hpp"

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

/// A node's metrics endpoint, as far as a scrape sees: 200 and `body` to
/// every request.
class fixed_metrics_server {
public:
  explicit fixed_metrics_server(std::string body)
    : server_{[body = std::move(body)](int c) {
        const std::string resp = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: "
                                 + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
        (void) ::send(c, resp.data(), resp.size(), MSG_NOSIGNAL);
      }} {}
  [[nodiscard]] http_endpoint endpoint() const { return {"127.0.0.1", server_.port(), ""}; }

private:
  test::loopback_http_server server_;
};

// A cluster's frontend has no workers; each worker node names its own
// "worker-0": the nodes' worker series are kept apart by host:port, their
// outcomes summed, and a node that does not answer is left out.
TEST(ServerMetricsTest, AClustersNodesAreMergedWorkersApartOutcomesSummed) {
  fixed_metrics_server front{"tessera_kvstore_fetch_total{worker=\"prefill-0\",outcome=\"hit\"} 1\n"};
  fixed_metrics_server n0{"tessera_engine_busy_seconds_total{worker=\"worker-0\"} 2.5\n"
                          "tessera_kvstore_fetch_total{worker=\"worker-0\",outcome=\"hit\"} 3\n"};
  fixed_metrics_server n1{"tessera_engine_busy_seconds_total{worker=\"worker-0\"} 4\n"
                          "tessera_kvstore_fetch_total{worker=\"worker-0\",outcome=\"hit\"} 5\n"
                          "tessera_kvstore_fetch_total{worker=\"worker-0\",outcome=\"late\"} 1\n"};
  const http_endpoint gone{"127.0.0.1", test::free_port(), ""};
  const metrics_endpoints eps{front.endpoint(), {n0.endpoint(), gone, n1.endpoint()}};
  auto busy = scrape_cluster(eps, "tessera_engine_busy_seconds_total", "worker", true);
  ASSERT_TRUE(busy);
  const auto key = [](const fixed_metrics_server& s) {
    return "127.0.0.1:" + std::to_string(s.endpoint().port) + "/worker-0";
  };
  EXPECT_EQ(*busy, (std::map<std::string, double>{{key(n0), 2.5}, {key(n1), 4}}));
  auto outcomes = scrape_cluster(eps, "tessera_kvstore_fetch_total", "outcome", false);
  ASSERT_TRUE(outcomes);
  EXPECT_EQ(*outcomes, (std::map<std::string, double>{{"hit", 9}, {"late", 1}}));
  // None answering is an error.
  EXPECT_FALSE(scrape_cluster(metrics_endpoints{gone, {gone}}, "tessera_engine_busy_seconds_total", "worker",
                              true, std::chrono::milliseconds{500}));
}

} // namespace
} // namespace tessera::bench
