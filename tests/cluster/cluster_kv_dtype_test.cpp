// The cluster TOML's kv_dtype (every worker's KV pool element type, the
// `--kv-dtype` of serve): bf16 unless set, int8 read, anything else refused
// naming the key.

#include <gtest/gtest.h>

#include "cluster/cluster_config.hpp"
#include "common/error.hpp"
#include "tests/cluster/one_node_config.hpp"

namespace {

using namespace tessera::cluster;

const char* const one_node = tessera::test::one_node_config;

TEST(ClusterKvDtypeTest, Bf16UnlessSetAndInt8WhenSet) {
  auto c = parse_cluster_config(one_node, "c.toml");
  ASSERT_TRUE(c) << tessera::error_text(c.error());
  EXPECT_EQ(c->kv_dtype, "bf16");
  c = parse_cluster_config(std::string{"kv_dtype = \"int8\"\n"} + one_node, "c.toml");
  ASSERT_TRUE(c) << tessera::error_text(c.error());
  EXPECT_EQ(c->kv_dtype, "int8");
}

TEST(ClusterKvDtypeTest, AnUnknownKvDtypeIsRefusedNamingTheKey) {
  for (const char* bad : {"kv_dtype = \"int4\"\n", "kv_dtype = \"I8\"\n", "kv_dtype = 8\n"}) {
    auto c = parse_cluster_config(std::string{bad} + one_node, "c.toml");
    ASSERT_FALSE(c) << bad;
    EXPECT_NE(tessera::error_text(c.error()).find("kv_dtype"), std::string::npos) << tessera::error_text(c.error());
  }
}

} // namespace
