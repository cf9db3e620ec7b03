#include "kvstore/spill_queue.hpp"

#include <thread>

#include <gtest/gtest.h>

#include "tests/kvstore/kv_test_blocks.hpp"

namespace tessera::kvstore {
namespace {

using namespace std::chrono_literals;
using test::block_for;
using test::key_of;
using push_result = spill_queue::push_result;

TEST(SpillQueueTest, HandsOutInOrderAndServesPendingBlocks) {
  spill_queue q{8, 1 << 20};
  EXPECT_EQ(q.push(key_of(1), block_for(key_of(1)), 0ms), push_result::queued);
  EXPECT_EQ(q.push(key_of(2), block_for(key_of(2)), 0ms), push_result::queued);
  EXPECT_EQ(q.push(key_of(1), block_for(key_of(1)), 0ms), push_result::already_queued);
  EXPECT_EQ(q.blocks(), 2u);
  EXPECT_EQ(q.bytes(), 1024u);
  auto f = q.front();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->key, key_of(1));
  EXPECT_TRUE(q.find(key_of(1))) << "still visible while being written";
  q.done(key_of(1));
  EXPECT_FALSE(q.find(key_of(1)));
  f = q.front();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->key, key_of(2));
  q.done(key_of(2));
  EXPECT_TRUE(q.wait_empty(0ms));
}

TEST(SpillQueueTest, FullQueueDropsAfterTheWait) {
  spill_queue q{2, 1 << 20};
  ASSERT_EQ(q.push(key_of(1), block_for(key_of(1)), 0ms), push_result::queued);
  ASSERT_EQ(q.push(key_of(2), block_for(key_of(2)), 0ms), push_result::queued);
  EXPECT_EQ(q.push(key_of(3), block_for(key_of(3)), 1ms), push_result::dropped);
  EXPECT_EQ(q.blocks(), 2u);
  spill_queue by_bytes{100, 1000};
  ASSERT_EQ(by_bytes.push(key_of(1), block_for(key_of(1)), 0ms), push_result::queued);
  EXPECT_EQ(by_bytes.push(key_of(2), block_for(key_of(2)), 0ms), push_result::dropped)
      << "1024 payload bytes do not fit in 1000";
}

TEST(SpillQueueTest, AWaitingPushGoesInWhenSpaceFrees) {
  spill_queue q{1, 1 << 20};
  ASSERT_EQ(q.push(key_of(1), block_for(key_of(1)), 0ms), push_result::queued);
  push_result result = push_result::dropped;
  std::thread producer{[&] { result = q.push(key_of(2), block_for(key_of(2)), 60s); }};
  auto f = q.front();
  ASSERT_TRUE(f);
  q.done(f->key);
  producer.join();
  EXPECT_EQ(result, push_result::queued);
  EXPECT_TRUE(q.find(key_of(2)));
}

TEST(SpillQueueTest, PausedQueueHandsOutNothingUntilResumed) {
  spill_queue q{4, 1 << 20};
  q.set_paused(true);
  ASSERT_EQ(q.push(key_of(1), block_for(key_of(1)), 0ms), push_result::queued);
  std::optional<keyed_block> got;
  std::thread consumer{[&] { got = q.front(); }};
  EXPECT_FALSE(q.wait_empty(10ms));
  q.set_paused(false);
  consumer.join();
  ASSERT_TRUE(got);
  EXPECT_EQ(got->key, key_of(1));
}

TEST(SpillQueueTest, CloseWithDrainDeliversTheRestThenEnds) {
  spill_queue q{4, 1 << 20};
  q.set_paused(true);
  ASSERT_EQ(q.push(key_of(1), block_for(key_of(1)), 0ms), push_result::queued);
  q.close(true);
  EXPECT_EQ(q.push(key_of(2), block_for(key_of(2)), 0ms), push_result::dropped);
  auto f = q.front();
  ASSERT_TRUE(f);
  q.done(f->key);
  EXPECT_FALSE(q.front());
}

TEST(SpillQueueTest, CloseWithoutDrainEndsAtOnceAndWakesProducers) {
  spill_queue q{1, 1 << 20};
  ASSERT_EQ(q.push(key_of(1), block_for(key_of(1)), 0ms), push_result::queued);
  push_result result = push_result::queued;
  std::thread producer{[&] { result = q.push(key_of(2), block_for(key_of(2)), 60s); }};
  q.close(false);
  producer.join();
  EXPECT_EQ(result, push_result::dropped);
  EXPECT_FALSE(q.front());
}

} // namespace
} // namespace tessera::kvstore
