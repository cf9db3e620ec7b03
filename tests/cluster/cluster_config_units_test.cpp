// The cluster TOML's model-unit keys: router_load, router_sticky_break, the
// autoscaling SLOs and a node's own sim GPU (a mixed fleet), their defaults
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

TEST(ClusterConfigUnitsTest, DefaultsAreUnitsFactorTwoAndNoSlo) {
  auto c = parse_cluster_config(one_router, "c.toml");
  ASSERT_TRUE(c) << tessera::error_text(c.error());
  EXPECT_EQ(c->router_load, "units");
  EXPECT_EQ(c->router_sticky_break, 2.0);
  EXPECT_EQ(c->slo_ttft_ms, 0.0);
  EXPECT_EQ(c->slo_itl_ms, 0.0);
}

TEST(ClusterConfigUnitsTest, KeysAreRead) {
  auto c = parse_cluster_config(std::string{"router_load = \"blocks\"\nrouter_sticky_break = 0\n"
                                            "slo_ttft_ms = 500\nslo_itl_ms = 40.5\n"} + one_router,
                                "c.toml");
  ASSERT_TRUE(c) << tessera::error_text(c.error());
  EXPECT_EQ(c->router_load, "blocks");
  EXPECT_EQ(c->router_sticky_break, 0.0);
  EXPECT_EQ(c->slo_ttft_ms, 500.0);
  EXPECT_EQ(c->slo_itl_ms, 40.5);
}

TEST(ClusterConfigUnitsTest, BadValuesAreNamed) {
  EXPECT_NE(problems_of(std::string{"router_load = \"tokens\"\n"} + one_router).find("'router_load' must be units or blocks"),
            std::string::npos);
  EXPECT_NE(problems_of(std::string{"router_sticky_break = 0.5\n"} + one_router).find("'router_sticky_break' must be 0"),
            std::string::npos);
  EXPECT_NE(problems_of(std::string{"router_sticky_break = -1\n"} + one_router).find("router_sticky_break"),
            std::string::npos);
  EXPECT_NE(problems_of(std::string{"slo_ttft_ms = -5\n"} + one_router).find("slo_ttft_ms"), std::string::npos);
  EXPECT_NE(problems_of(std::string{"slo_itl_ms = \"fast\"\n"} + one_router).find("slo_itl_ms"), std::string::npos);
  EXPECT_NE(problems_of(std::string{"router_laod = \"units\"\n"} + one_router).find("router_load"), std::string::npos);
}

TEST(ClusterConfigUnitsTest, ANodesSimGpuOverridesTheClustersAndIsChecked) {
  const std::string sim = "engine = \"sim\"\n[sim]\ngpu = \"h100\"\n";
  auto c = parse_cluster_config(sim + one_router + "sim_gpu = \"a100\"\n", "c.toml");
  ASSERT_TRUE(c) << tessera::error_text(c.error());
  EXPECT_EQ(c->nodes.at(0).sim_gpu, "a100");
  EXPECT_EQ(c->sim.gpu, "h100");
  auto plain = parse_cluster_config(sim + one_router, "c.toml");
  ASSERT_TRUE(plain) << tessera::error_text(plain.error());
  EXPECT_EQ(plain->nodes.at(0).sim_gpu, "") << "empty: the node models [sim].gpu";
  EXPECT_NE(problems_of(sim + one_router + "sim_gpu = \"b200\"\n").find("node[0].sim_gpu must be one of"),
            std::string::npos);
  EXPECT_NE(problems_of(sim + one_router + "sim_gpu = 100\n").find("node[0].sim_gpu"), std::string::npos);
}

} // namespace
