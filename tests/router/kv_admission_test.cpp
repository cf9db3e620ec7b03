// The router's account of each decode worker's KV pool (kv_admission.hpp):
// what a heartbeat reports, what routed requests add until a later
// heartbeat shows them, and the growth kept for every request.

#include "actors/router/kv_admission.hpp"

#include <gtest/gtest.h>

#include "tests/support/block_hash_util.hpp"

namespace tessera::actors {
namespace {

using namespace std::chrono_literals;
using clock_type = kv_commitments::clock;

TEST(KvAdmissionTest, ARoutedPromptCountsUntilAHeartbeatAfterItsFirstTokenShowsIt) {
  kv_commitments kv;
  const auto t0 = clock_type::now();
  kv.heard(7, 10, t0);
  EXPECT_EQ(kv.room(7, 100), 90);
  kv.routed(1, 7, {}, 30, 4);
  EXPECT_EQ(kv.room(7, 100), 56) << "10 used + 30 prompt + 4 growth";
  // A heartbeat before the first token does not show the prompt yet.
  kv.heard(7, 12, t0 + 1ms);
  EXPECT_EQ(kv.room(7, 100), 54);
  kv.prefilled(1, t0 + 2ms);
  EXPECT_EQ(kv.room(7, 100), 54) << "no heartbeat since the first token";
  kv.heard(7, 42, t0 + 3ms); // now it holds the prompt
  EXPECT_EQ(kv.room(7, 100), 54) << "42 used + 4 growth kept";
  kv.finished(1);
  EXPECT_EQ(kv.room(7, 100), 58);
  EXPECT_EQ(kv.active(7), 0);
  EXPECT_EQ(kv.size(), 0u);
}

TEST(KvAdmissionTest, AnIdleWorkerAlwaysFitsABusyOneOnlyWithRoom) {
  kv_commitments kv;
  const auto t0 = clock_type::now();
  kv.heard(1, 0, t0);
  EXPECT_TRUE(kv.fits(1, 10, 500, 5)) << "nothing routed there: even a request larger than the pool runs, alone";
  kv.routed(10, 1, {}, 6, 1);
  EXPECT_TRUE(kv.fits(1, 10, 2, 1)) << "6 + 1 committed, 3 left";
  EXPECT_FALSE(kv.fits(1, 10, 3, 1));
  EXPECT_TRUE(kv.fits(2, 10, 3, 1)) << "another worker's requests do not count here";
  EXPECT_EQ(kv.active(1), 1);
  // A second attempt under the same id replaces the first.
  kv.routed(10, 2, {}, 6, 1);
  EXPECT_EQ(kv.active(1), 0);
  EXPECT_EQ(kv.active(2), 1);
  EXPECT_EQ(kv.room(2, 10), 3);
}

TEST(KvAdmissionTest, ForgettingAWorkerDropsItsFiguresAndItsRequests) {
  kv_commitments kv;
  const auto t0 = clock_type::now();
  kv.heard(3, 50, t0);
  kv.routed(1, 3, {}, 5, 0);
  kv.routed(2, 4, {}, 7, 0);
  kv.prefilled(1, t0 - 1ms); // before the heartbeat: shown in its 50
  EXPECT_EQ(kv.room(3, 100), 50);
  kv.forget_worker(3);
  EXPECT_EQ(kv.room(3, 100), 100) << "a worker gone for good: nothing of it counts";
  EXPECT_EQ(kv.active(3), 0);
  EXPECT_EQ(kv.size(), 1u) << "worker 4's request stays";
  kv.finished(1); // its answer comes late: nothing
  kv.finished(1); // twice: nothing
  kv.prefilled(99, t0); // unknown: nothing
  EXPECT_EQ(kv.room(4, 100), 93);
}

TEST(KvAdmissionTest, ARequestRoutedAgainLeavesItsOldWorker) {
  kv_commitments kv;
  kv.routed(1, 3, {}, 5, 2);
  EXPECT_EQ(kv.room(3, 100), 93);
  kv.routed(1, 4, {}, 6, 2); // a new attempt elsewhere
  EXPECT_EQ(kv.room(3, 100), 100);
  EXPECT_EQ(kv.active(3), 0);
  EXPECT_EQ(kv.room(4, 100), 92);
  EXPECT_EQ(kv.size(), 1u);
  kv.finished(1);
  EXPECT_EQ(kv.room(4, 100), 100);
  EXPECT_EQ(kv.size(), 0u);
}

TEST(KvAdmissionTest, TheSharedPrefixIsTheLongestOfTheWorkersRequests) {
  using tessera::test::bhs;
  kv_commitments kv;
  const auto a = bhs({1, 2, 3, 4});
  const auto b = bhs({1, 2, 9});
  const auto c = bhs({7, 8});
  kv.routed(1, 5, a, 4, 0);
  kv.routed(2, 5, b, 1, 0);
  kv.routed(3, 6, bhs({1, 2, 3, 4, 5}), 5, 0);
  EXPECT_EQ(kv.shared_blocks(5, bhs({1, 2, 3, 4, 5, 6})), 4) << "request 1's whole prompt";
  EXPECT_EQ(kv.shared_blocks(5, bhs({1, 2, 9, 10})), 3) << "request 2's";
  EXPECT_EQ(kv.shared_blocks(5, bhs({1, 7})), 1);
  EXPECT_EQ(kv.shared_blocks(5, c), 0);
  EXPECT_EQ(kv.shared_blocks(5, {}), 0);
  EXPECT_EQ(kv.shared_blocks(7, a), 0) << "no request on worker 7";
  kv.finished(1);
  EXPECT_EQ(kv.shared_blocks(5, bhs({1, 2, 3, 4, 5, 6})), 2) << "request 1 ended: only request 2's first two";
}

TEST(KvAdmissionTest, NegativeFiguresCountAsZero) {
  kv_commitments kv;
  kv.heard(1, -5, clock_type::now());
  kv.routed(2, 1, {}, -3, -1);
  EXPECT_EQ(kv.room(1, 10), 10);
}

} // namespace
} // namespace tessera::actors
