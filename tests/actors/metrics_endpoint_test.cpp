// A node's own HTTP endpoint (actors/node/metrics_endpoint.hpp): GET
// /metrics and /live always; POST /admin/faults only on a node with fault
// injection on and only with the admin key, where it sets the node's fault
// plan or names what is wrong.
#include "actors/node/metrics_endpoint.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>

#include "common/error.hpp"
#include "tests/support/curl.hpp"
#include "transport/faults/fault_plan.hpp"

namespace tessera::actors {
namespace {

struct endpoint {
  std::unique_ptr<frontend::http_server> http;
  std::string url;
};

const std::string admin_key = "admin-key-0123456789abcdef";

endpoint start(detail::fault_control faults) {
  auto metrics = std::make_shared<cluster::metrics_registry>();
  metrics->counter("tessera_test_total", "A test series.").inc();
  auto http = detail::start_metrics_endpoint("127.0.0.1", 0, metrics, std::move(faults), admin_key);
  EXPECT_TRUE(http);
  if (!http)
    return {};
  auto url = (*http)->url();
  return {std::move(*http), url};
}

/// POSTs a fault plan body with `key` as the Bearer key ("" sends none).
test::http_reply post_plan(const endpoint& e, const std::string& body, const std::string& key = admin_key) {
  std::vector<std::string> args{"-H", "Content-Type: application/json", "--data-binary", body};
  if (!key.empty())
    args.insert(args.end(), {"-H", "Authorization: Bearer " + key});
  return test::curl(args, e.url + "/admin/faults");
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
  auto ok = post_plan(e, R"({"plan": "seed=2; partition,peer=decode-a"})");
  EXPECT_EQ(ok.status, 200) << ok.body;
  auto heal = post_plan(e, R"({"plan": ""})");
  EXPECT_EQ(heal.status, 200) << heal.body;
  {
    std::lock_guard lock{mu};
    ASSERT_EQ(plans.size(), 2u);
    EXPECT_NE(plans[0].find("partition,op=any,peer=decode-a"), std::string::npos) << plans[0];
    EXPECT_EQ(plans[1], "seed=0");
  }
  auto bad_plan = post_plan(e, R"({"plan": "drop,colour=red"})");
  EXPECT_EQ(bad_plan.status, 400);
  EXPECT_NE(bad_plan.body.find("colour"), std::string::npos) << bad_plan.body;
  auto bad_body = post_plan(e, R"(["drop"])");
  EXPECT_EQ(bad_body.status, 400);
  EXPECT_NE(bad_body.body.find("{\\\"plan\\\""), std::string::npos) << bad_body.body;
  EXPECT_EQ(test::http_get(e.url + "/metrics").status, 200);
}

TEST(MetricsEndpointTest, AFaultPlanNeedsTheAdminKey) {
  std::atomic<int> set{0};
  auto e = start([&](const std::string&) -> caf::error {
    ++set;
    return {};
  });
  for (const std::string key : {"", "wrong-key-0123456789abcdef", "admin-key-0123456789abcde",
                                "admin-key-0123456789abcdefX", "ADMIN-KEY-0123456789ABCDEF"}) {
    auto r = post_plan(e, R"({"plan": "seed=1; partition,peer=front"})", key);
    EXPECT_EQ(r.status, 401) << key << ": " << r.body;
    EXPECT_NE(r.body.find("admin key"), std::string::npos) << r.body;
  }
  auto basic = test::curl({"-H", "Authorization: Basic YWRtaW46YWRtaW4=", "--data-binary", R"({"plan": "drop"})"},
                          e.url + "/admin/faults");
  EXPECT_EQ(basic.status, 401);
  EXPECT_EQ(set.load(), 0) << "a plan was set without the key";
  EXPECT_EQ(post_plan(e, R"({"plan": ""})").status, 200);
  EXPECT_EQ(set.load(), 1);
}

TEST(MetricsEndpointTest, FaultInjectionWithoutAnAdminKeyIsRefusedAtStart) {
  auto metrics = std::make_shared<cluster::metrics_registry>();
  auto http = detail::start_metrics_endpoint(
    "127.0.0.1", 0, metrics, [](const std::string&) -> caf::error { return {}; }, "");
  ASSERT_FALSE(http);
  EXPECT_NE(error_message(http.error()).find("admin_key_file"), std::string::npos) << error_message(http.error());
}

TEST(MetricsEndpointTest, WithoutFaultInjectionThereIsNoAdminEndpoint) {
  auto e = start({});
  auto r = post_plan(e, R"({"plan": "drop"})");
  EXPECT_EQ(r.status, 404) << r.body;
  auto m = test::http_get(e.url + "/metrics");
  EXPECT_EQ(m.status, 200);
  EXPECT_NE(m.body.find("tessera_test_total 1"), std::string::npos) << m.body;
}

} // namespace
} // namespace tessera::actors
