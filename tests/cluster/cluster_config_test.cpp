#include "cluster/cluster_config.hpp"

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "common/error.hpp"
#include "tests/cluster/one_node_config.hpp"

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
    {"[[node]]\nid=\"a\"\naddress=\"h:1\"\nroles=[\"decode\"]", "at least one node must have the role router, found none"},
    {"[[node]]\nid=\"a\"\naddress=\"h:1\"\nroles=[\"router\"]\n[[node]]\nid=\"a\"\naddress=\"h:2\"\nroles=[\"decode\"]", "node[1].id 'a' is used twice"},
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

namespace {

using tessera::test::one_router;
using tessera::test::problems_of;

TEST(ClusterConfigTest, UnknownKeysAreErrorsThatSuggestTheNearestKnownOne) {
  auto said = problems_of(std::string{"kv_cache_mbb = 512\n"} + one_router);
  EXPECT_NE(said.find("c.toml: unknown key 'kv_cache_mbb'; did you mean 'kv_cache_mb'?"), std::string::npos) << said;
  said = problems_of("[[node]]\nid = \"a\"\nadress = \"127.0.0.1:1\"\naddress = \"127.0.0.1:2\"\nroles = [\"router\"]\n");
  EXPECT_NE(said.find("unknown key 'node[0].adress'; did you mean 'address'?"), std::string::npos) << said;
  said = problems_of(std::string{"[sim]\ntime_scal = 1.0\n"} + one_router);
  EXPECT_NE(said.find("unknown key 'sim.time_scal'; did you mean 'time_scale'?"), std::string::npos) << said;
  // Nothing near: no guess, but still an error.
  said = problems_of(std::string{"colour = \"blue\"\n"} + one_router);
  EXPECT_NE(said.find("unknown key 'colour'"), std::string::npos) << said;
  EXPECT_EQ(said.find("did you mean"), std::string::npos) << said;
}

TEST(ClusterConfigTest, EveryProblemIsReportedAtOnce) {
  auto r = read_cluster_config("kv_cache_mbb = 1\nthreads_per_worker = -3\nengine = \"gpu\"\n"
                               "[[node]]\nid = \"a\"\naddress = \"nocolon\"\nroles = [\"router\"]\n",
                               "c.toml");
  ASSERT_EQ(r.problems.size(), 4u);
  for (const auto& p : r.problems)
    EXPECT_TRUE(p.starts_with("c.toml: ")) << p;
  auto c = parse_cluster_config("kv_cache_mbb = 1\nengine = \"gpu\"\n" + std::string{one_router}, "c.toml");
  ASSERT_FALSE(c);
  const auto text = tessera::error_text(c.error());
  EXPECT_NE(text.find("kv_cache_mbb"), std::string::npos) << text;
  EXPECT_NE(text.find("'engine' must be cpu or sim"), std::string::npos) << text;
}

TEST(ClusterConfigTest, NodeIdsLongerThanTheWireCarriesAreRefused) {
  const std::string longest(1024, 'n');
  auto ok = read_cluster_config("[[node]]\nid = \"" + longest + "\"\naddress = \"127.0.0.1:1\"\nroles = [\"router\"]\n",
                                "c.toml");
  EXPECT_TRUE(ok.problems.empty()) << ok.problems.front();
  auto said = problems_of("[[node]]\nid = \"" + longest + "n\"\naddress = \"127.0.0.1:1\"\nroles = [\"router\"]\n");
  EXPECT_NE(said.find("node[0].id is 1025 bytes; the wire carries node ids of at most 1024 bytes"), std::string::npos)
    << said.substr(0, 400);
  EXPECT_LT(said.size(), 1000u) << "the id is not echoed back whole";
  said = problems_of("[[node]]\nid = \"a/b\"\naddress = \"127.0.0.1:1\"\nroles = [\"router\"]\n");
  EXPECT_NE(said.find("names a directory"), std::string::npos) << said;
}

TEST(ClusterConfigTest, Ipv6IsRefusedForNodeAddressesAndAcceptedInBracketsForHttp) {
  auto said = problems_of("[[node]]\nid = \"a\"\naddress = \"[::1]:14000\"\nroles = [\"router\"]\n");
  EXPECT_NE(said.find("IPv6 is not supported for node addresses"), std::string::npos) << said;
  EXPECT_NE(said.find("use an IPv4 address"), std::string::npos) << said;
  said = problems_of("[[node]]\nid = \"a\"\naddress = \"::1:14000\"\nroles = [\"router\"]\n");
  EXPECT_NE(said.find("IPv6 is not supported for node addresses"), std::string::npos) << said;
  auto c = parse_cluster_config("[[node]]\nid = \"a\"\naddress = \"127.0.0.1:1\"\nroles = [\"router\", \"frontend\"]\n"
                                "http = \"[::1]:8080\"\n",
                                "c.toml");
  ASSERT_TRUE(c) << tessera::error_text(c.error());
  EXPECT_EQ(c->nodes[0].http_host, "::1");
  EXPECT_EQ(c->nodes[0].http_port, 8080);
  said = problems_of("[[node]]\nid = \"a\"\naddress = \"127.0.0.1:1\"\nroles = [\"router\", \"frontend\"]\n"
                     "http = \"::1:8080\"\n");
  EXPECT_NE(said.find("an IPv6 address needs brackets: [::1]:8080"), std::string::npos) << said;
}

TEST(ClusterConfigTest, SizesAndLimitsAreRangeChecked) {
  auto said = problems_of(std::string{"max_model_len = 2000000\n"} + one_router);
  EXPECT_NE(said.find("'max_model_len' must be an integer in [0, 1048576], got 2000000"), std::string::npos) << said;
  said = problems_of(std::string{"kvstore_disk_mb = 0\n"} + one_router);
  EXPECT_NE(said.find("'kvstore_disk_mb' must be an integer in [1, "), std::string::npos) << said;
  said = problems_of(std::string{"router_policy = \"round_robin\"\n"} + one_router);
  EXPECT_NE(said.find("did you mean 'round-robin'?"), std::string::npos) << said;
  said = problems_of("[[node]]\nid = \"a\"\naddress = \"127.0.0.1:0\"\nroles = [\"router\"]\n");
  EXPECT_NE(said.find("needs a port other than 0"), std::string::npos) << said;
  said = problems_of("[node]\nid = \"a\"\naddress = \"127.0.0.1:1\"\nroles = [\"router\"]\n");
  EXPECT_NE(said.find("write each node as [[node]]"), std::string::npos) << said;
}

TEST(ClusterConfigTest, AddressesAreComparedAfterResolution) {
  auto c = parse_cluster_config("[[node]]\nid = \"a\"\naddress = \"localhost:14400\"\nroles = [\"router\"]\n"
                                "[[node]]\nid = \"b\"\naddress = \"127.0.0.1:14400\"\nroles = [\"decode\"]\n",
                                "c.toml");
  ASSERT_TRUE(c) << "the text alone has no duplicate";
  auto problems = resolve_cluster_addresses(*c, "c.toml");
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("node[1].address '127.0.0.1:14400' is the same address as node[0].address "
                             "'localhost:14400'"),
            std::string::npos)
    << problems[0];
  // An HTTP port on a node's transport port clashes too.
  c = parse_cluster_config("[[node]]\nid = \"a\"\naddress = \"127.0.0.1:14400\"\nroles = [\"router\", \"frontend\"]\n"
                           "http = \"localhost:14400\"\n",
                           "c.toml");
  ASSERT_TRUE(c);
  EXPECT_EQ(resolve_cluster_addresses(*c, "c.toml").size(), 1u);
  // Different ports on one host are fine.
  c = parse_cluster_config("[[node]]\nid = \"a\"\naddress = \"localhost:14400\"\nroles = [\"router\"]\n"
                           "[[node]]\nid = \"b\"\naddress = \"127.0.0.1:14401\"\nroles = [\"decode\"]\n",
                           "c.toml");
  ASSERT_TRUE(c);
  EXPECT_TRUE(resolve_cluster_addresses(*c, "c.toml").empty());
}

TEST(ClusterConfigTest, TheHeaderDocumentsEveryKeyItAccepts) {
  std::stringstream header;
  header << std::ifstream{TESSERA_SOURCE_DIR "/cluster/cluster_config.hpp"}.rdbuf();
  ASSERT_FALSE(header.str().empty());
  for (const auto& key : cluster_config_keys()) {
    const auto documented = "///   " + key + " = ";
    EXPECT_TRUE(header.str().find(documented) != std::string::npos || key == "sim" || key == "node")
      << key << " is accepted but not documented at the top of cluster_config.hpp";
  }
}

TEST(ClusterConfigTest, UnresolvableHostsAreNamed) {
  auto c = parse_cluster_config("[[node]]\nid = \"a\"\naddress = \"no-such-host.invalid:14400\"\nroles = [\"router\"]\n",
                                "c.toml");
  ASSERT_TRUE(c);
  auto problems = resolve_cluster_addresses(*c, "c.toml");
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("c.toml: node[0].address 'no-such-host.invalid:14400': cannot resolve host "
                             "'no-such-host.invalid'"),
            std::string::npos)
    << problems[0];
}

} // namespace
