// A node's own HTTP endpoint (actors/node/metrics_endpoint.hpp): GET
// /metrics and /live always; POST /admin/faults only on a node with fault
// injection on, where it sets the node's fault plan or names what is wrong.
#include "actors/node/metrics_endpoint.hpp"

#include <gtest/gtest.h>

#include <mutex>

#include "tests/support/curl.hpp"
#include "transport/faults/fault_plan.hpp"

namespace tessera::actors {
namespace {

struct endpoint {
  std::unique_ptr<frontend::http_server> http;
  std::string url;
};

endpoint start(detail::fault_control faults) {
  auto metrics = std::make_shared<cluster::metrics_registry>();
  metrics->counter("tessera_test_total", "A test series.").inc();
  auto http = detail::start_metrics_endpoint("127.0.0.1", 0, metrics, std::move(faults));
  EXPECT_TRUE(http);
  if (!http)
    return {};
  auto url = (*http)->url();
  return {std::move(*http), url};
}

TEST(MetricsEndpointTest, AdminFaultsSetsTheNodesPlanOrNamesTheProblem) {
  std::mutex mu;
  std::vector<std::string> plans;
  auto e = start([&](const std::string& text) -> caf::error {
    auto plan = transport::fault_plan::parse(text);
    if (!plan)
      return std::move(plan.error());
    std::lock_guard lock{mu};
    plans.push_back(plan->to_string());
    return {};
  });
  auto ok = test::http_post_json(e.url + "/admin/faults", R"({"plan": "seed=2; partition,peer=decode-a"})");
  EXPECT_EQ(ok.status, 200) << ok.body;
  auto heal = test::http_post_json(e.url + "/admin/faults", R"({"plan": ""})");
  EXPECT_EQ(heal.status, 200) << heal.body;
  {
    std::lock_guard lock{mu};
    ASSERT_EQ(plans.size(), 2u);
    EXPECT_NE(plans[0].find("partition,op=any,peer=decode-a"), std::string::npos) << plans[0];
    EXPECT_EQ(plans[1], "seed=0");
  }
  auto bad_plan = test::http_post_json(e.url + "/admin/faults", R"({"plan": "drop,colour=red"})");
  EXPECT_EQ(bad_plan.status, 400);
  EXPECT_NE(bad_plan.body.find("colour"), std::string::npos) << bad_plan.body;
  auto bad_body = test::http_post_json(e.url + "/admin/faults", R"(["drop"])");
  EXPECT_EQ(bad_body.status, 400);
  EXPECT_NE(bad_body.body.find("{\\\"plan\\\""), std::string::npos) << bad_body.body;
  EXPECT_EQ(test::http_get(e.url + "/metrics").status, 200);
}

TEST(MetricsEndpointTest, WithoutFaultInjectionThereIsNoAdminEndpoint) {
  auto e = start({});
  auto r = test::http_post_json(e.url + "/admin/faults", R"({"plan": "drop"})");
  EXPECT_EQ(r.status, 404) << r.body;
  auto m = test::http_get(e.url + "/metrics");
  EXPECT_EQ(m.status, 200);
  EXPECT_NE(m.body.find("tessera_test_total 1"), std::string::npos) << m.body;
}

} // namespace
} // namespace tessera::actors
