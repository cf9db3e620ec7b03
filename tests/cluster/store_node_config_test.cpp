// A kv store on a node of its own in the cluster TOML: the role kvstore,
// and `store` on a node with workers naming it. Every misuse is refused by
// name; the shipped configs/chaos/store/cluster.toml reads clean; a node's
// entry text (etcd) keeps its store.
#include "cluster/cluster_config.hpp"

#include <gtest/gtest.h>

#include "common/error.hpp"

namespace {

using namespace tessera::cluster;

std::string cluster(const std::string& top, const std::string& prefill_extra, const std::string& store_roles) {
  return top + R"(
[[node]]
id = "front"
address = "127.0.0.1:14000"
roles = ["frontend", "router"]
[[node]]
id = "prefill"
address = "127.0.0.1:14001"
roles = ["prefill"]
)" + prefill_extra + R"(
[[node]]
id = "store"
address = "127.0.0.1:14003"
roles = [)" + store_roles + "]\n";
}

/// The problems of `text` (empty when it reads clean).
std::string problems(const std::string& text) {
  auto c = parse_cluster_config(text, "c.toml");
  return c ? std::string{} : tessera::error_text(c.error());
}

TEST(StoreNodeConfigTest, AWorkerNodeNamesTheStoreNode) {
  auto c = parse_cluster_config(cluster("", "store = \"store\"", "\"kvstore\""), "c.toml");
  ASSERT_TRUE(c) << tessera::error_text(c.error());
  EXPECT_EQ(c->node("prefill")->store, "store");
  EXPECT_TRUE(c->node("store")->has("kvstore"));
  EXPECT_FALSE(c->node("store")->has_workers());
  EXPECT_EQ(c->node("front")->store, "");
  auto entry = read_node_entry(node_entry_text(*c->node("prefill")), "etcd");
  ASSERT_TRUE(entry) << tessera::error_text(entry.error());
  EXPECT_EQ(entry->store, "store");
}

TEST(StoreNodeConfigTest, MisusesAreRefusedByName) {
  EXPECT_NE(problems(cluster("", "store = \"stor\"", "\"kvstore\"")).find("node[1] ('prefill').store 'stor' names no node"),
            std::string::npos)
    << problems(cluster("", "store = \"stor\"", "\"kvstore\""));
  EXPECT_NE(problems(cluster("", "store = \"stor\"", "\"kvstore\"")).find("store"), std::string::npos)
    << "the nearest store node is suggested";
  EXPECT_NE(problems(cluster("", "store = \"front\"", "\"kvstore\"")).find("names a node without the role kvstore"),
            std::string::npos);
  EXPECT_NE(problems(cluster("", "store = \"store\"", "\"decode\"")).find("(no node has it)"), std::string::npos);
  const auto on_store = problems(cluster("", "", "\"kvstore\", \"decode\"]\nstore = \"prefill\"\n#["));
  EXPECT_NE(on_store.find("the node has the role kvstore"), std::string::npos) << on_store;
  std::string text = cluster("", "", "\"kvstore\"");
  const std::string front_roles = "roles = [\"frontend\", \"router\"]";
  text.replace(text.find(front_roles), front_roles.size(), front_roles + "\nstore = \"store\"");
  const auto no_workers = problems(text);
  EXPECT_NE(no_workers.find("only a node with workers"), std::string::npos) << no_workers;
  EXPECT_NE(problems(cluster("kvstore_host_mb = 0\n", "", "\"kvstore\"")).find("kvstore_host_mb = 0 keeps no store"),
            std::string::npos);
  EXPECT_NE(problems(cluster("", "", "\"kvstor\"")).find("unknown role 'kvstor'"), std::string::npos);
}

TEST(StoreNodeConfigTest, TheShippedStoreClusterReadsClean) {
  auto c = load_cluster_config(std::string{TESSERA_SOURCE_DIR} + "/configs/chaos/store/cluster.toml");
  ASSERT_TRUE(c) << tessera::error_text(c.error());
  EXPECT_EQ(c->node("prefill")->store, "store");
  EXPECT_EQ(c->node("decode")->store, "store");
  EXPECT_TRUE(c->node("store")->has("kvstore"));
}

} // namespace
