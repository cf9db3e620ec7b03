#include "kvstore/host_tier.hpp"

#include <random>

#include <gtest/gtest.h>

#include "tests/kvstore/kv_test_blocks.hpp"

namespace tessera::kvstore {
namespace {

using test::block_for;
using test::is_block_for;
using test::key_of;

// Room for exactly `n` blocks of the default small layout.
size_t room_for(size_t n) { return n * host_tier::charge(block_for(key_of(0))); }

TEST(HostTierTest, ReturnsStoredBlockAndMissesOthers) {
  host_tier t{room_for(4)};
  EXPECT_TRUE(t.insert(key_of(1), block_for(key_of(1))).stored);
  auto b = t.get(key_of(1));
  ASSERT_TRUE(b);
  EXPECT_TRUE(is_block_for(key_of(1), *b));
  EXPECT_FALSE(t.get(key_of(2)));
  EXPECT_FALSE(t.get(key_of(1, 77))) << "another namespace must not match";
  auto s = t.stats();
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 2u);
  EXPECT_EQ(s.blocks, 1u);
  EXPECT_EQ(s.used_bytes, host_tier::charge(*b));
  EXPECT_EQ(host_tier::charge(*b), 512u + host_tier::entry_overhead_bytes);
}

TEST(HostTierTest, EvictsLeastRecentlyUsedFirst) {
  host_tier t{room_for(3)};
  for (uint64_t i = 0; i < 3; ++i)
    ASSERT_TRUE(t.insert(key_of(i), block_for(key_of(i))).stored);
  // Use 0 (get) and 1 (touch): 2 is now the least recently used.
  ASSERT_TRUE(t.get(key_of(0)));
  ASSERT_TRUE(t.touch(key_of(1)));
  auto r = t.insert(key_of(3), block_for(key_of(3)));
  ASSERT_EQ(r.evicted.size(), 1u);
  EXPECT_EQ(r.evicted[0].key, key_of(2));
  EXPECT_TRUE(is_block_for(key_of(2), r.evicted[0].block)) << "the evicted block comes back whole";
  EXPECT_EQ(t.keys_lru_first(), (std::vector{key_of(0), key_of(1), key_of(3)}));
  r = t.insert(key_of(4), block_for(key_of(4)));
  ASSERT_EQ(r.evicted.size(), 1u);
  EXPECT_EQ(r.evicted[0].key, key_of(0));
  EXPECT_EQ(t.stats().evictions, 2u);
}

TEST(HostTierTest, ContainsDoesNotChangeRecency) {
  host_tier t{room_for(2)};
  (void)t.insert(key_of(0), block_for(key_of(0)));
  (void)t.insert(key_of(1), block_for(key_of(1)));
  EXPECT_TRUE(t.contains(key_of(0)));
  auto r = t.insert(key_of(2), block_for(key_of(2)));
  ASSERT_EQ(r.evicted.size(), 1u);
  EXPECT_EQ(r.evicted[0].key, key_of(0));
}

TEST(HostTierTest, DuplicateInsertOnlyMarksUsed) {
  host_tier t{room_for(2)};
  (void)t.insert(key_of(0), block_for(key_of(0)));
  (void)t.insert(key_of(1), block_for(key_of(1)));
  auto r = t.insert(key_of(0), block_for(key_of(0)));
  EXPECT_FALSE(r.stored);
  EXPECT_TRUE(r.evicted.empty());
  EXPECT_EQ(t.stats().blocks, 2u);
  EXPECT_EQ(t.keys_lru_first(), (std::vector{key_of(1), key_of(0)}));
}

TEST(HostTierTest, RefusesBlockLargerThanCapacityWithoutEvicting) {
  host_tier t{room_for(2)};
  (void)t.insert(key_of(0), block_for(key_of(0)));
  auto big = block_for(key_of(9), test::small_layout(64));
  auto r = t.insert(key_of(9), big);
  EXPECT_TRUE(r.too_large);
  EXPECT_FALSE(r.stored);
  EXPECT_TRUE(r.evicted.empty());
  EXPECT_TRUE(t.contains(key_of(0)));
}

TEST(HostTierTest, CapacityIsNeverExceededInARandomSequence) {
  std::mt19937_64 rng{42};
  const size_t capacity = 20'000;
  host_tier t{capacity};
  std::vector<int32_t> head_dims{1, 4, 8, 16, 32};
  for (int op = 0; op < 3000; ++op) {
    auto k = key_of(rng() % 200);
    switch (rng() % 4) {
      case 0:
      case 1: {
        // The layout is a function of the key, as it would be in one namespace.
        auto l = test::small_layout(head_dims[k.hash.lo % head_dims.size()]);
        auto r = t.insert(k, block_for(k, l));
        for (auto& e : r.evicted)
          EXPECT_FALSE(t.contains(e.key));
        break;
      }
      case 2:
        if (auto b = t.get(k)) {
          EXPECT_TRUE(is_block_for(k, *b));
        }
        break;
      case 3: (void)t.erase(k); break;
    }
    auto s = t.stats();
    ASSERT_LE(s.used_bytes, capacity) << "after op " << op;
    ASSERT_EQ(t.keys_lru_first().size(), s.blocks);
  }
}

TEST(HostTierTest, CorruptedBytesAreAMissAndCounted) {
  host_tier t{room_for(4)};
  (void)t.insert(key_of(1), block_for(key_of(1)));
  ASSERT_TRUE(t.corrupt_for_testing(key_of(1), 17));
  EXPECT_FALSE(t.get(key_of(1)));
  auto s = t.stats();
  EXPECT_EQ(s.checksum_failures, 1u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.blocks, 0u) << "a corrupt block is dropped";
  EXPECT_EQ(s.used_bytes, 0u);
}

TEST(HostTierTest, ReportsStoredAndRemovedEvents) {
  event_log log;
  log.set_recording(true);
  host_tier t{room_for(2), &log};
  for (uint64_t i = 0; i < 3; ++i)
    (void)t.insert(key_of(i), block_for(key_of(i)));
  auto ev = log.drain();
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0].what, store_event::kind::stored);
  EXPECT_EQ(ev[0].hashes, (std::vector{key_of(0).hash, key_of(1).hash}));
  EXPECT_EQ(ev[1].what, store_event::kind::removed);
  EXPECT_EQ(ev[1].hashes, (std::vector{key_of(0).hash}));
  EXPECT_EQ(ev[2].what, store_event::kind::stored);
  EXPECT_EQ(ev[2].tier, kv_tier::host);
  EXPECT_EQ(ev[2].ns, test::test_ns);
}

} // namespace
} // namespace tessera::kvstore
