// The cluster config's membership keys (membership, etcd_endpoints,
// etcd_prefix, membership_ttl_s) and a node's entry as etcd holds it.

#include "cluster/cluster_config.hpp"

#include <gtest/gtest.h>

#include "common/error.hpp"

namespace {

using namespace tessera::cluster;
using tessera::error_message;

const std::string front = R"(
[[node]]
id = "front"
address = "127.0.0.1:14000"
roles = ["frontend", "router"]
)";

std::string problems_of(const std::string& head) {
  auto c = parse_cluster_config(head + front, "c.toml");
  return c ? std::string{} : error_message(c.error());
}

TEST(ClusterConfigMembershipTest, DefaultsToTheStaticListAndReadsEtcdSettings) {
  auto s = parse_cluster_config(front, "c.toml");
  ASSERT_TRUE(s) << error_message(s.error());
  EXPECT_EQ(s->membership, "static");
  EXPECT_EQ(s->etcd_endpoints, std::vector<std::string>{"http://127.0.0.1:2379"});
  EXPECT_EQ(s->membership_ttl_s, 5);
  auto e = parse_cluster_config("membership = \"etcd\"\netcd_endpoints = [\"http://127.0.0.1:2379\", "
                                "\"http://localhost:22379\"]\netcd_prefix = \"/tessera/a/\"\nmembership_ttl_s = 3\n" +
                                  front,
                                "c.toml");
  ASSERT_TRUE(e) << error_message(e.error());
  EXPECT_EQ(e->membership, "etcd");
  EXPECT_EQ(e->etcd_endpoints.size(), 2u);
  EXPECT_EQ(e->etcd_prefix, "/tessera/a/");
  EXPECT_EQ(e->membership_ttl_s, 3);
}

TEST(ClusterConfigMembershipTest, RefusesBadMembershipSettingsNamingEach) {
  struct bad_case {
    std::string head;
    std::string expect;
  };
  const std::vector<bad_case> cases{
    {"membership = \"gossip\"\n", "'membership' must be static or etcd"},
    {"membership = \"etcd\"\netcd_endpoints = []\n", "1 to 16 URLs"},
    {"membership = \"etcd\"\netcd_endpoints = \"http://127.0.0.1:2379\"\n", "1 to 16 URLs"},
    {"membership = \"etcd\"\netcd_endpoints = [\"https://127.0.0.1:2379\"]\n", "https is not supported"},
    {"membership = \"etcd\"\netcd_endpoints = [\"127.0.0.1:2379\"]\n", "must start with http://"},
    {"membership = \"etcd\"\netcd_endpoints = [\"http://127.0.0.1\"]\n", "etcd_endpoints[0]"},
    {"membership = \"etcd\"\netcd_endpoints = [\"http://127.0.0.1:2379\", 5]\n", "etcd_endpoints[1]' must be a string"},
    {"membership = \"etcd\"\netcd_prefix = \"tessera\"\n", "'etcd_prefix' must start and end with '/'"},
    {"membership = \"etcd\"\netcd_prefix = \"/a b/\"\n", "'etcd_prefix'"},
    {"membership = \"etcd\"\nmembership_ttl_s = 1\n", "'membership_ttl_s' must be an integer in [2, 300]"},
    {"membership = \"etcd\"\nmembership_ttl_s = 100000\n", "membership_ttl_s"},
    {"etcd_prefix = \"/x/\"\n", "'etcd_prefix' needs membership = \"etcd\""},
    {"membership_tll_s = 5\n", "did you mean 'membership_ttl_s'?"},
  };
  for (const auto& k : cases) {
    const auto text = problems_of(k.head);
    EXPECT_NE(text.find(k.expect), std::string::npos) << k.head << " -> " << text;
  }
}

TEST(ClusterConfigMembershipTest, ANodeEntryRoundTripsThroughItsText) {
  auto c = parse_cluster_config(front + "http = \"127.0.0.1:8123\"\nmetrics = \"127.0.0.1:9100\"\nworkers = 2\n",
                                "c.toml");
  ASSERT_TRUE(c) << error_message(c.error());
  const auto& n = c->nodes[0];
  auto back = read_node_entry(node_entry_text(n), "etcd");
  ASSERT_TRUE(back) << error_message(back.error());
  EXPECT_EQ(back->id, "front");
  EXPECT_EQ(back->address, n.address);
  EXPECT_EQ(back->roles, n.roles);
  EXPECT_EQ(back->workers, 2);
  EXPECT_EQ(back->http_port, 8123);
  EXPECT_EQ(back->metrics_port, 9100);
}

TEST(ClusterConfigMembershipTest, ANodeEntryIsCheckedAsTheConfigChecksANode) {
  node_entry e{"decode-b", "127.0.0.1:14005", {"decode"}, 1, "", "127.0.0.1:9105"};
  auto ok = check_node_entry(e, "flags");
  ASSERT_TRUE(ok) << error_message(ok.error());
  EXPECT_EQ(ok->metrics_port, 9105);
  auto bad = e;
  bad.id = "a/b";
  bad.address = "[::1]:14005";
  bad.roles = {"decoder"};
  bad.workers = 0;
  auto no = check_node_entry(bad, "flags");
  ASSERT_FALSE(no);
  const auto text = error_message(no.error());
  for (const char* what : {"names a directory", "IPv6", "did you mean 'decode'", "workers"})
    EXPECT_NE(text.find(what), std::string::npos) << what << " not in: " << text;
  EXPECT_FALSE(read_node_entry("id = \"x\"\naddress = \"127.0.0.1:1\"\nroles = [\"decode\"]\nextra = 1", "etcd"));
  EXPECT_FALSE(read_node_entry("id = ", "etcd"));
  EXPECT_FALSE(read_node_entry(std::string(17 << 10, ' '), "etcd"));
}

} // namespace
