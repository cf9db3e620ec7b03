#include "cluster/cluster_config.hpp"

#include <gtest/gtest.h>

#include "common/error.hpp"

namespace {

using namespace tessera::cluster;

const char* three_nodes = R"(
model = "/models/m"
router_policy = "round-robin"
ucx_tls = "sm,self,tcp"
[[node]]
id = "front"
address = "127.0.0.1:14000"
roles = ["frontend", "router"]
http = "0.0.0.0:9000"
[[node]]
id = "p"
address = "127.0.0.1:14001"
roles = ["prefill"]
workers = 2
metrics = "127.0.0.1:9101"
[[node]]
id = "d"
address = "127.0.0.1:14002"
roles = ["decode"]
)";

TEST(ClusterConfigTest, ReadsNodesRolesAndSettings) {
  auto c = parse_cluster_config(three_nodes, "c.toml");
  ASSERT_TRUE(c) << tessera::error_text(c.error());
  EXPECT_EQ(c->model, "/models/m");
  EXPECT_EQ(c->router_policy, "round-robin");
  EXPECT_EQ(c->ucx_tls, "sm,self,tcp");
  ASSERT_EQ(c->nodes.size(), 3u);
  EXPECT_EQ(c->router_node().id, "front");
  EXPECT_EQ(c->nodes[0].http_host, "0.0.0.0");
  EXPECT_EQ(c->nodes[0].http_port, 9000);
  EXPECT_EQ(c->node("p")->workers, 2);
  EXPECT_EQ(c->node("p")->metrics_port, 9101);
  EXPECT_EQ(c->node("d")->metrics_port, 0) << "no metrics endpoint unless asked";
  EXPECT_TRUE(c->node("d")->has("decode"));
  EXPECT_EQ(c->node("zz"), nullptr);
}

TEST(ClusterConfigTest, KvstoreInt8IsOffUnlessSet) {
  auto c = parse_cluster_config(three_nodes, "c.toml");
  ASSERT_TRUE(c) << tessera::error_text(c.error());
  EXPECT_FALSE(c->kvstore_int8);
  c = parse_cluster_config(std::string{"kvstore_int8 = true\n"} + three_nodes, "c.toml");
  ASSERT_TRUE(c) << tessera::error_text(c.error());
  EXPECT_TRUE(c->kvstore_int8);
}

TEST(ClusterConfigTest, KvstoreOfferMbIs64UnlessSet) {
  auto c = parse_cluster_config(three_nodes, "c.toml");
  ASSERT_TRUE(c) << tessera::error_text(c.error());
  EXPECT_EQ(c->kvstore_offer_mb, 64u);
  c = parse_cluster_config(std::string{"kvstore_offer_mb = 0\n"} + three_nodes, "c.toml");
  ASSERT_TRUE(c) << tessera::error_text(c.error());
  EXPECT_EQ(c->kvstore_offer_mb, 0u) << "0 offers nothing";
  c = parse_cluster_config(std::string{"kvstore_offer_mb = -1\n"} + three_nodes, "c.toml");
  ASSERT_FALSE(c);
  EXPECT_NE(tessera::error_text(c.error()).find("'kvstore_offer_mb' must be an integer"), std::string::npos)
    << tessera::error_text(c.error());
}

TEST(ClusterConfigTest, KvRemoteFetchIsOnUnlessTurnedOff) {
  auto c = parse_cluster_config(three_nodes, "c.toml");
  ASSERT_TRUE(c) << tessera::error_text(c.error());
  EXPECT_TRUE(c->kv_remote_fetch);
  c = parse_cluster_config(std::string{"kv_remote_fetch = false\n"} + three_nodes, "c.toml");
  ASSERT_TRUE(c) << tessera::error_text(c.error());
  EXPECT_FALSE(c->kv_remote_fetch);
  c = parse_cluster_config(std::string{"kv_remote_fetch = 0\n"} + three_nodes, "c.toml");
  ASSERT_FALSE(c);
  EXPECT_NE(tessera::error_text(c.error()).find("'kv_remote_fetch' must be true or false"), std::string::npos);
}

TEST(ClusterConfigTest, BadConfigsAreErrorsNamingTheFileAndTheKey) {
  struct bad_case {
    std::string text;
    std::string says;
  };
  std::vector<bad_case> cases = {
    {"model = ", "c.toml: "},
    {"transport = \"carrier-pigeon\"\n[[node]]\nid=\"a\"\naddress=\"h:1\"\nroles=[\"router\"]", "'transport' must be ucx or loopback"},
    {"kv_cache_mb = \"lots\"\n[[node]]\nid=\"a\"\naddress=\"h:1\"\nroles=[\"router\"]", "'kv_cache_mb' must be an integer"},
    {"kvstore_int8 = 1\n[[node]]\nid=\"a\"\naddress=\"h:1\"\nroles=[\"router\"]", "'kvstore_int8' must be true or false"},
    {"", "no [[node]] tables"},
    {"[[node]]\nid=\"a\"\naddress=\"h:1\"\nroles=[\"chef\"]", "unknown role"},
    {"[[node]]\nid=\"a\"\naddress=\"h:1\"\nroles=[\"decode\"]", "exactly one node must have the role router, found 0"},
    {"[[node]]\nid=\"a\"\naddress=\"h:1\"\nroles=[\"router\"]\n[[node]]\nid=\"a\"\naddress=\"h:2\"\nroles=[\"decode\"]", "node[1].id 'a' is used twice"},
    {"[[node]]\nid=\"a\"\naddress=\"h:1\"\nroles=[\"router\"]\n[[node]]\nid=\"b\"\naddress=\"h:2\"\nroles=[\"frontend\"]", "the frontend runs on the router's node"},
    {"[[node]]\nid=\"a\"\naddress=\"h:1\"\nroles=[\"router\"]\nworkers = 0", "'node[0].workers' must be an integer in [1, 64]"},
    {"[[node]]\nid=\"a\"\naddress=\"h:1\"\nroles=[\"router\"]\nmetrics = \"h:x1\"", "node[0].metrics has a bad port: 'h:x1'"},
    {"[[node]]\nid=\"a\"\naddress=\"h:1\"\nroles=[\"router\"]\nmetrics = \"h:0\"", "node[0].metrics needs a port other than 0"},
    {"[[node]]\nid=\"a\"\naddress=\"h:1\"\nroles=[\"router\"]\nhttp = \"nocolon\"", "node[0].http must be host:port"},
  };
  for (const auto& c : cases) {
    auto r = parse_cluster_config(c.text, "c.toml");
    ASSERT_FALSE(r) << c.text;
    EXPECT_NE(tessera::error_text(r.error()).find(c.says), std::string::npos)
      << tessera::error_text(r.error());
  }
}

} // namespace
