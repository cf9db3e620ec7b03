// The cluster TOML's speculative and draft_model (every worker's default
// speculative decoding and its draft model, the `--speculative` and
// `--draft-model` of serve): none unless set, ngram:K and draft:K read with
// serve's parser, anything else refused naming the key, and draft:K
// refused without a draft model.

#include <algorithm>

#include <gtest/gtest.h>

#include "cluster/cluster_config.hpp"
#include "common/error.hpp"
#include "tests/cluster/one_node_config.hpp"

namespace {

using namespace tessera::cluster;

const char* const one_node = tessera::test::one_node_config;

caf::expected<cluster_config> with(const std::string& lines) {
  return parse_cluster_config(lines + one_node, "c.toml");
}

TEST(ClusterSpeculativeTest, NoneUnlessSet) {
  auto c = with("");
  ASSERT_TRUE(c) << tessera::error_text(c.error());
  EXPECT_EQ(c->speculative, "none");
  EXPECT_EQ(c->draft_model, "");
}

TEST(ClusterSpeculativeTest, NgramAndDraftWithADraftModelRead) {
  auto c = with("speculative = \"ngram:4\"\n");
  ASSERT_TRUE(c) << tessera::error_text(c.error());
  EXPECT_EQ(c->speculative, "ngram:4");
  c = with("speculative = \"draft:16\"\ndraft_model = \"/models/tiny\"\n");
  ASSERT_TRUE(c) << tessera::error_text(c.error());
  EXPECT_EQ(c->speculative, "draft:16");
  EXPECT_EQ(c->draft_model, "/models/tiny");
  // A draft model without draft:K serves the requests that ask for method
  // draft (as serve's --draft-model alone); none is the same as unset.
  c = with("draft_model = \"/models/tiny\"\nspeculative = \"none\"\n");
  ASSERT_TRUE(c) << tessera::error_text(c.error());
  EXPECT_EQ(c->speculative, "none");
  EXPECT_EQ(c->draft_model, "/models/tiny");
}

TEST(ClusterSpeculativeTest, ASettingTheParserRefusesIsRefusedNamingTheKey) {
  for (const char* bad : {"speculative = \"eagle:4\"\n", "speculative = \"ngram\"\n", "speculative = \"ngram:0\"\n",
                          "speculative = \"ngram:17\"\n", "speculative = \"ngram:4x\"\n", "speculative = \"\"\n",
                          "speculative = 4\n", "speculative = \"draft:-1\"\ndraft_model = \"/models/tiny\"\n"}) {
    auto c = with(bad);
    ASSERT_FALSE(c) << bad;
    const auto text = tessera::error_text(c.error());
    EXPECT_NE(text.find("c.toml: 'speculative'"), std::string::npos) << text;
    EXPECT_EQ(text.find("--speculative"), std::string::npos) << "a file has keys, not flags: " << text;
  }
  auto c = with("speculative = \"eagle:4\"\n");
  ASSERT_FALSE(c);
  EXPECT_NE(tessera::error_text(c.error()).find("must be ngram:K or draft:K with K in [1, 16], or none, got 'eagle:4'"),
            std::string::npos)
    << tessera::error_text(c.error());
}

TEST(ClusterSpeculativeTest, DraftWithoutADraftModelIsRefusedSayingWhichKeyIsMissing) {
  auto c = with("speculative = \"draft:4\"\n");
  ASSERT_FALSE(c);
  const auto text = tessera::error_text(c.error());
  EXPECT_NE(text.find("'speculative' 'draft:4' needs a draft model: set draft_model"), std::string::npos) << text;
  c = with("speculative = \"draft:4\"\ndraft_model = \"\"\n");
  EXPECT_FALSE(c);
  EXPECT_FALSE(with("draft_model = 3\n"));
}

TEST(ClusterSpeculativeTest, AMisspeltKeySuggestsTheRealOne) {
  auto c = with("draft_modle = \"/models/tiny\"\n");
  ASSERT_FALSE(c);
  EXPECT_NE(tessera::error_text(c.error()).find("did you mean 'draft_model'?"), std::string::npos)
    << tessera::error_text(c.error());
  c = with("speculativ = \"ngram:4\"\n");
  ASSERT_FALSE(c);
  EXPECT_NE(tessera::error_text(c.error()).find("did you mean 'speculative'?"), std::string::npos)
    << tessera::error_text(c.error());
  for (const char* key : {"speculative", "draft_model"}) {
    const auto& keys = cluster_config_keys();
    EXPECT_NE(std::find(keys.begin(), keys.end(), key), keys.end()) << key;
  }
}

} // namespace
