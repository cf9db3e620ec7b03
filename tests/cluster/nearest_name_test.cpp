#include "cluster/nearest_name.hpp"

#include <gtest/gtest.h>

namespace {

using namespace tessera::cluster;

TEST(NearestNameTest, EditDistanceCountsSingleByteEdits) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("serve", "serve"), 0u);
  EXPECT_EQ(edit_distance("serv", "serve"), 1u);
  EXPECT_EQ(edit_distance("kv_cache_mbb", "kv_cache_mb"), 1u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
}

TEST(NearestNameTest, SuggestsOnlyANameCloseEnoughToBeMeant) {
  const std::vector<std::string> commands{"serve", "node", "check", "generate", "model", "bench"};
  EXPECT_EQ(nearest_name("serv", commands), "serve");
  EXPECT_EQ(nearest_name("gen", commands), "generate") << "a prefix is what was meant";
  EXPECT_EQ(nearest_name("chekc", commands), "check");
  EXPECT_FALSE(nearest_name("deploy", commands));
  EXPECT_FALSE(nearest_name("", commands));
  EXPECT_EQ(did_you_mean("serv", commands), "; did you mean 'serve'?");
  EXPECT_EQ(did_you_mean("deploy", commands), "");
}

TEST(NearestNameTest, QuotedInputIsCutTo200Bytes) {
  EXPECT_EQ(quote_input("abc"), "'abc'");
  const auto q = quote_input(std::string(3 << 20, '9'));
  EXPECT_LT(q.size(), 260u);
  EXPECT_NE(q.find("(3145728 bytes)"), std::string::npos) << q;
}

} // namespace
