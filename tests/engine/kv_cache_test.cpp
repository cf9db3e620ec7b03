#include "engine/kv_cache.hpp"

#include <gtest/gtest.h>
#include "tests/support/block_hash_util.hpp"

namespace {

using namespace tessera::engine;
using tessera::test::bh;
using tessera::test::bhs;

TEST(KvCacheTest, AllocatesUntilEmptyAndFailsWithoutPartialAllocation) {
  kv_cache c{4, 16};
  std::vector<kv_block_id> a;
  ASSERT_TRUE(c.allocate(3, a));
  EXPECT_EQ(c.num_free_blocks(), 1);
  std::vector<kv_block_id> b;
  EXPECT_FALSE(c.allocate(2, b));
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(c.num_free_blocks(), 1);
  c.free_blocks(a);
  EXPECT_EQ(c.num_free_blocks(), 4);
}

TEST(KvCacheTest, ReusesLongestCachedPrefixAndStopsAtFirstMiss) {
  kv_cache c{8, 16};
  std::vector<kv_block_id> seq;
  ASSERT_TRUE(c.allocate(3, seq));
  c.cache_block(seq[0], bh(100));
  c.cache_block(seq[1], bh(101));
  c.cache_block(seq[2], bh(102));
  c.free_blocks(seq);
  EXPECT_EQ(c.num_free_blocks(), 8);
  EXPECT_EQ(c.num_cached_free_blocks(), 3);

  std::vector<kv_block_id> hit;
  const auto want = bhs({100, 101, 999, 102});
  EXPECT_EQ(c.match_prefix(want, hit), 2u);
  ASSERT_EQ(hit.size(), 2u);
  EXPECT_EQ(hit[0], seq[0]);
  EXPECT_EQ(hit[1], seq[1]);
  EXPECT_EQ(c.ref_count(seq[0]), 1);
  EXPECT_EQ(c.num_free_blocks(), 6);
}

TEST(KvCacheTest, EvictsLeastRecentlyFreedAndTailBlocksFirst) {
  kv_cache c{4, 16};
  std::vector<kv_block_id> a, b;
  ASSERT_TRUE(c.allocate(2, a));
  ASSERT_TRUE(c.allocate(2, b));
  c.cache_block(a[0], bh(1));
  c.cache_block(a[1], bh(2));
  c.cache_block(b[0], bh(3));
  c.cache_block(b[1], bh(4));
  c.free_blocks(a); // freed first: a[1] then a[0] join the LRU
  c.free_blocks(b);
  std::vector<kv_block_id> got;
  ASSERT_TRUE(c.allocate(1, got));
  EXPECT_EQ(got[0], a[1]) << "the tail of the least recently freed sequence goes first";
  EXPECT_EQ(c.stats().evictions, 1u);
  std::vector<kv_block_id> hit;
  EXPECT_EQ(c.match_prefix(bhs({1, 2}), hit), 1u);
  EXPECT_EQ(c.match_prefix(bhs({3, 4}), hit), 2u);
}

TEST(KvCacheTest, UncachedFreedBlocksAreReusedBeforeCachedOnes) {
  kv_cache c{2, 16};
  std::vector<kv_block_id> a;
  ASSERT_TRUE(c.allocate(2, a));
  c.cache_block(a[0], bh(7));
  c.free_blocks(a);
  std::vector<kv_block_id> got;
  ASSERT_TRUE(c.allocate(1, got));
  EXPECT_EQ(got[0], a[1]);
  EXPECT_EQ(c.stats().evictions, 0u);
}

TEST(KvCacheTest, CopiesSharedBlockOnWriteAndWritesUnsharedInPlace) {
  kv_cache c{4, 16};
  std::vector<kv_block_id> a;
  ASSERT_TRUE(c.allocate(1, a));
  c.retain(a[0]); // now shared by two sequences
  auto w = c.make_writable(a[0]);
  ASSERT_TRUE(w.has_value());
  EXPECT_TRUE(w->needs_copy);
  EXPECT_NE(w->id, a[0]);
  EXPECT_EQ(c.ref_count(a[0]), 1);
  EXPECT_EQ(c.ref_count(w->id), 1);
  EXPECT_EQ(c.stats().cow_copies, 1u);
  auto w2 = c.make_writable(a[0]);
  ASSERT_TRUE(w2.has_value());
  EXPECT_FALSE(w2->needs_copy);
  EXPECT_EQ(w2->id, a[0]);
}

TEST(KvCacheTest, WritingACachedBlockRemovesItFromTheCache) {
  kv_cache c{2, 16};
  std::vector<kv_block_id> a;
  ASSERT_TRUE(c.allocate(1, a));
  c.cache_block(a[0], bh(42));
  ASSERT_TRUE(c.make_writable(a[0]).has_value());
  EXPECT_FALSE(c.block_hash(a[0]).has_value());
  c.free_blocks(a);
  std::vector<kv_block_id> hit;
  EXPECT_EQ(c.match_prefix(bhs({42}), hit), 0u);
}

TEST(KvCacheTest, CopyOnWriteFailsCleanlyWhenPoolIsFull) {
  kv_cache c{1, 16};
  std::vector<kv_block_id> a;
  ASSERT_TRUE(c.allocate(1, a));
  c.retain(a[0]);
  EXPECT_FALSE(c.make_writable(a[0]).has_value());
  EXPECT_EQ(c.ref_count(a[0]), 2);
}

TEST(KvCacheTest, DisabledPrefixCachingNeverHits) {
  kv_cache c{2, 16, false};
  std::vector<kv_block_id> a;
  ASSERT_TRUE(c.allocate(1, a));
  c.cache_block(a[0], bh(5));
  c.free_blocks(a);
  std::vector<kv_block_id> hit;
  EXPECT_EQ(c.match_prefix(bhs({5}), hit), 0u);
}

TEST(KvCacheTest, FirstHolderKeepsTheHashWhenTwoBlocksComputeTheSamePrefix) {
  kv_cache c{4, 16};
  std::vector<kv_block_id> a;
  ASSERT_TRUE(c.allocate(2, a));
  c.cache_block(a[0], bh(9));
  c.cache_block(a[1], bh(9));
  EXPECT_TRUE(c.block_hash(a[0]).has_value());
  EXPECT_FALSE(c.block_hash(a[1]).has_value());
  c.free_blocks(a);
  std::vector<kv_block_id> hit;
  ASSERT_EQ(c.match_prefix(bhs({9}), hit), 1u);
  EXPECT_EQ(hit[0], a[0]);
}

} // namespace

namespace {

using namespace tessera::engine;
using tessera::test::bh;
using tessera::test::bhs;
using kind = kv_cache_event::kind;

TEST(KvCacheTest, RecordsStoredRemovedAndClearedEventsOnlyWhenAsked) {
  kv_cache c{2, 16};
  std::vector<kv_block_id> seq;
  ASSERT_TRUE(c.allocate(2, seq));
  c.cache_block(seq[0], bh(100)); // not recording yet
  EXPECT_TRUE(c.drain_events().empty());
  c.record_events(true);
  c.cache_block(seq[1], bh(101));
  c.cache_block(seq[1], bh(101)); // already cached: no event
  c.free_blocks(seq);
  std::vector<kv_block_id> next;
  ASSERT_TRUE(c.allocate(1, next)); // evicts the tail block first: 101
  auto ev = c.drain_events();
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].what, kind::stored);
  EXPECT_EQ(ev[0].hash, bh(101));
  EXPECT_EQ(ev[1].what, kind::removed);
  EXPECT_EQ(ev[1].hash, bh(101));
  EXPECT_TRUE(c.drain_events().empty());
  c.reset_prefix_cache();
  ev = c.drain_events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].what, kind::cleared);
}

} // namespace
