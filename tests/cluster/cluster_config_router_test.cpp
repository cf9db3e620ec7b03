// The cluster TOML's router and stream keys: kv_admission,
// kv_admission_wait_ms, panic_routing, late_grace_ms and
// router_index_max_entries, their defaults
// and their refusals.
#include <string>

#include <gtest/gtest.h>

#include "cluster/cluster_config.hpp"
#include "common/error.hpp"
#include "tests/cluster/one_node_config.hpp"

namespace {

using namespace tessera::cluster;

using tessera::test::one_router;
using tessera::test::problems_of;

TEST(ClusterConfigRouterTest, DefaultsAdmitByKvRoomAndPanicRouteWithAThreeSecondGrace) {
  auto c = parse_cluster_config(one_router, "c.toml");
  ASSERT_TRUE(c) << tessera::error_text(c.error());
  EXPECT_TRUE(c->kv_admission);
  EXPECT_EQ(c->kv_admission_wait_ms, 8000);
  EXPECT_TRUE(c->panic_routing);
  EXPECT_EQ(c->late_grace_ms, 3000);
  EXPECT_EQ(c->router_index_max_entries, int64_t{1} << 23);
}

TEST(ClusterConfigRouterTest, KeysAreRead) {
  auto c = parse_cluster_config(std::string{"kv_admission = false\nkv_admission_wait_ms = 0\n"
                                            "panic_routing = false\nlate_grace_ms = 10000\n"
                                            "router_index_max_entries = 0\n"} + one_router,
                                "c.toml");
  ASSERT_TRUE(c) << tessera::error_text(c.error());
  EXPECT_FALSE(c->kv_admission);
  EXPECT_EQ(c->kv_admission_wait_ms, 0);
  EXPECT_FALSE(c->panic_routing);
  EXPECT_EQ(c->late_grace_ms, 10000);
  EXPECT_EQ(c->router_index_max_entries, 0) << "unbounded";
}

TEST(ClusterConfigRouterTest, BadValuesAreNamed) {
  EXPECT_NE(problems_of(std::string{"kv_admission = \"yes\"\n"} + one_router).find("kv_admission"),
            std::string::npos);
  EXPECT_NE(problems_of(std::string{"kv_admission_wait_ms = 60000\n"} + one_router)
              .find("'kv_admission_wait_ms' must be an integer in [0, 20000]"),
            std::string::npos)
    << "beyond the frontend's admit timeout";
  EXPECT_NE(problems_of(std::string{"kv_admission_wait_ms = -1\n"} + one_router).find("kv_admission_wait_ms"),
            std::string::npos);
  EXPECT_NE(problems_of(std::string{"panic_routing = 1\n"} + one_router).find("panic_routing"), std::string::npos);
  EXPECT_NE(problems_of(std::string{"late_grace_ms = 2.5\n"} + one_router).find("late_grace_ms"),
            std::string::npos);
  EXPECT_NE(problems_of(std::string{"router_index_max_entries = -5\n"} + one_router).find("router_index_max_entries"),
            std::string::npos);
  EXPECT_NE(problems_of(std::string{"kv_admision = true\n"} + one_router).find("kv_admission"), std::string::npos)
    << "a misspelt key names the right one";
}

} // namespace
