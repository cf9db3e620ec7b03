#include "actors/router/session_table.hpp"

#include <gtest/gtest.h>

namespace {

using namespace tessera::actors;

session_binding bind(uint64_t decode, std::optional<uint64_t> prefill = std::nullopt) {
  session_binding b;
  b.decode_worker = decode;
  b.prefill_worker = prefill;
  return b;
}

TEST(SessionTableTest, FindsWhatWasPut) {
  session_table t(4);
  EXPECT_FALSE(t.find(1));
  t.put(1, bind(10, 20));
  auto b = t.find(1);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->decode_worker, 10u);
  EXPECT_EQ(b->prefill_worker, 20u);
  t.put(1, bind(11));
  EXPECT_EQ(t.size(), 1u);
  EXPECT_EQ(t.find(1)->decode_worker, 11u);
  EXPECT_FALSE(t.find(1)->prefill_worker);
}

TEST(SessionTableTest, FullTableForgetsTheLeastRecentlyUsedSession) {
  session_table t(2);
  t.put(1, bind(10));
  t.put(2, bind(20));
  ASSERT_TRUE(t.find(1)); // 2 is now the least recently used
  t.put(3, bind(30));
  EXPECT_EQ(t.size(), 2u);
  EXPECT_EQ(t.evictions(), 1u);
  EXPECT_TRUE(t.find(1));
  EXPECT_FALSE(t.find(2));
  EXPECT_TRUE(t.find(3));
}

TEST(SessionTableTest, ZeroCapacityKeepsNothing) {
  session_table t(0);
  t.put(1, bind(10));
  EXPECT_EQ(t.size(), 0u);
  EXPECT_FALSE(t.find(1));
}

TEST(SessionTableTest, EraseForgetsASession) {
  session_table t(2);
  t.put(1, bind(10));
  EXPECT_TRUE(t.erase(1));
  EXPECT_FALSE(t.erase(1));
  EXPECT_FALSE(t.find(1));
  EXPECT_EQ(t.size(), 0u);
}

TEST(SessionTableTest, KeysAreStableAndDistinguishIds) {
  EXPECT_EQ(session_table::key_of("conversation-1"), session_table::key_of("conversation-1"));
  EXPECT_NE(session_table::key_of("conversation-1"), session_table::key_of("conversation-2"));
  EXPECT_NE(session_table::key_of(""), session_table::key_of("a"));
}

} // namespace
