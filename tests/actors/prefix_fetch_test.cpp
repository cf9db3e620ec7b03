// A prompt's prefix fetch as a plain state machine
// (actors/worker/prefix_fetch.hpp): which store it asks for which blocks,
// when it stops, and what it reports, without an actor system.
#include "actors/worker/prefix_fetch.hpp"

#include <gtest/gtest.h>

namespace tessera::actors {
namespace {

using namespace std::chrono_literals;
using clock_type = prefix_fetch::clock;

const transport::wire::actor_address local{"n", "kvstore"};
const transport::wire::actor_address peer{"m", "kvstore"};

prefix_need need_of(size_t blocks, size_t cached) {
  prefix_need n;
  for (size_t i = 0; i < blocks; ++i)
    n.hashes.push_back({0, 100 + i});
  n.cached = cached;
  return n;
}

TEST(PrefixFetchTest, AsksTheNodesStoreInBatchesThenThePeerForWhatIsStillMissing) {
  const auto t0 = clock_type::now();
  prefix_fetch f{need_of(10, 0), local, peer, 10, 4, t0 + 5s};
  auto a = f.next(t0);
  ASSERT_TRUE(a);
  EXPECT_FALSE(a->peer);
  EXPECT_EQ(a->store.node, "n");
  EXPECT_EQ(a->first, 0u);
  EXPECT_EQ(a->end, 4u);
  EXPECT_EQ(a->timeout, 5000ms) << "an ask waits until the fetch's deadline";
  f.answered(false, 4, 0, false, true); // the store has more
  a = f.next(t0 + 1s);
  ASSERT_TRUE(a);
  EXPECT_FALSE(a->peer) << "the same store again while it sends more";
  EXPECT_EQ(a->first, 4u);
  EXPECT_EQ(a->end, 8u);
  EXPECT_EQ(a->timeout, 4000ms);
  f.answered(false, 6, 0, false, false); // all it holds
  a = f.next(t0 + 1s);
  ASSERT_TRUE(a);
  EXPECT_TRUE(a->peer);
  EXPECT_EQ(a->store.node, "m");
  EXPECT_EQ(a->first, 6u);
  EXPECT_EQ(a->end, 10u);
  f.answered(true, 10, 0, false, false);
  EXPECT_FALSE(f.next(t0 + 2s));
  EXPECT_EQ(f.fetched(), 10u);
  EXPECT_STREQ(f.outcome(), "hit");
}

TEST(PrefixFetchTest, APeerHoldingNoMoreThanThePoolIsNotAsked) {
  const auto t0 = clock_type::now();
  prefix_fetch f{need_of(10, 5), {}, peer, 5, 64, t0 + 5s};
  EXPECT_FALSE(f.next(t0));
  EXPECT_STREQ(f.outcome(), "miss");
}

TEST(PrefixFetchTest, PastTheDeadlineItEndsKeepingWhatArrived) {
  const auto t0 = clock_type::now();
  prefix_fetch late{need_of(8, 0), local, {}, 0, 64, t0 + 1s};
  ASSERT_TRUE(late.next(t0));
  late.failed(false, true); // the ask timed out at the deadline
  EXPECT_FALSE(late.next(t0 + 1s));
  EXPECT_STREQ(late.outcome(), "late");

  prefix_fetch partial{need_of(8, 0), local, peer, 8, 2, t0 + 1s};
  ASSERT_TRUE(partial.next(t0));
  partial.answered(false, 2, 0, false, true);
  EXPECT_FALSE(partial.next(t0 + 2s)) << "the deadline passed between two asks";
  EXPECT_EQ(partial.fetched(), 2u);
  EXPECT_STREQ(partial.outcome(), "partial");
}

TEST(PrefixFetchTest, BusyFailedAndRefusedEndEachStoresTurn) {
  const auto t0 = clock_type::now();
  prefix_fetch busy{need_of(4, 0), local, {}, 0, 64, t0 + 5s};
  ASSERT_TRUE(busy.next(t0));
  busy.answered(false, 0, 0, true, false);
  EXPECT_FALSE(busy.next(t0));
  EXPECT_STREQ(busy.outcome(), "rejected");

  prefix_fetch failed{need_of(4, 0), local, peer, 4, 64, t0 + 5s};
  ASSERT_TRUE(failed.next(t0));
  failed.failed(false, false);
  auto a = failed.next(t0);
  ASSERT_TRUE(a) << "the peer is still worth asking";
  EXPECT_TRUE(a->peer);
  failed.answered(true, 0, 0, false, false);
  EXPECT_FALSE(failed.next(t0));
  EXPECT_STREQ(failed.outcome(), "failed");

  prefix_fetch refused{need_of(6, 0), local, {}, 0, 2, t0 + 5s};
  ASSERT_TRUE(refused.next(t0));
  refused.answered(false, 1, 1, false, true); // one block failed its checks
  EXPECT_FALSE(refused.next(t0)) << "a store that sent a bad block is not asked again";
  EXPECT_STREQ(refused.outcome(), "partial");
}

} // namespace
} // namespace tessera::actors
