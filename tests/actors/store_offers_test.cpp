// A worker's bounded, acknowledged offers to its kv store's writer as a
// plain state machine (actors/worker/store_offers.hpp).
#include "actors/worker/store_offers.hpp"

#include <gtest/gtest.h>

namespace tessera::actors {
namespace {

TEST(StoreOffersTest, RoomShrinksWhileOffersWaitAndReturnsWithTheirAnswers) {
  store_offers o{100};
  EXPECT_EQ(o.room(), 100u);
  auto a = o.sent(60);
  ASSERT_TRUE(a);
  EXPECT_EQ(o.room(), 40u);
  auto b = o.sent(40);
  ASSERT_TRUE(b);
  EXPECT_EQ(o.room(), 0u);
  EXPECT_EQ(o.offers_in_flight(), 2u);
  EXPECT_TRUE(o.answered(*a, 3));
  EXPECT_EQ(o.room(), 60u);
  EXPECT_TRUE(o.failed(*b)) << "a failed or timed-out offer returns its bytes too";
  EXPECT_EQ(o.room(), 100u);
  EXPECT_EQ(o.bytes_in_flight(), 0u);
  EXPECT_EQ(o.stored_blocks(), 3u);
}

TEST(StoreOffersTest, AFullQueueRefusesTheOfferAndCountsWhatWasDropped) {
  store_offers o{100};
  ASSERT_TRUE(o.sent(80));
  EXPECT_FALSE(o.sent(30)) << "beyond the bound: not queued";
  EXPECT_EQ(o.bytes_in_flight(), 80u) << "nothing counted for a refused offer";
  o.dropped(3);
  o.dropped(2);
  EXPECT_EQ(o.dropped_blocks(), 5u);
  EXPECT_TRUE(o.sent(20)) << "what fits still goes";
  EXPECT_EQ(o.room(), 0u);
}

TEST(StoreOffersTest, AnAnswerCountsOnce) {
  store_offers o{100};
  auto a = o.sent(50);
  ASSERT_TRUE(a);
  EXPECT_TRUE(o.answered(*a, 2));
  EXPECT_FALSE(o.answered(*a, 2)) << "a duplicated answer";
  EXPECT_FALSE(o.failed(*a)) << "an error after the answer";
  EXPECT_FALSE(o.answered(12345, 1)) << "a ticket never sent";
  EXPECT_EQ(o.room(), 100u) << "the bytes returned once, not twice";
  EXPECT_EQ(o.stored_blocks(), 2u);
}

TEST(StoreOffersTest, ABoundOfZeroAndAnEmptyOfferSendNothing) {
  store_offers zero{0};
  EXPECT_EQ(zero.room(), 0u);
  EXPECT_FALSE(zero.sent(1));
  store_offers o{100};
  EXPECT_FALSE(o.sent(0)) << "no blocks, no offer";
  EXPECT_EQ(o.offers_in_flight(), 0u);
}

TEST(StoreOffersTest, TicketsAreDistinct) {
  store_offers o{100};
  auto a = o.sent(10);
  auto b = o.sent(10);
  ASSERT_TRUE(a && b);
  EXPECT_NE(*a, *b);
  EXPECT_TRUE(o.answered(*b, 1));
  EXPECT_EQ(o.bytes_in_flight(), 10u) << "answering b leaves a in flight";
}

} // namespace
} // namespace tessera::actors
