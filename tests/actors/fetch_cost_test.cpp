// The prefix fetch's cost model (actors/worker/fetch_cost.hpp), without an
// actor system: fetch only when it pays, with a deadline that grows with
// the prefix and the compute it saves.
#include "actors/worker/fetch_cost.hpp"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

namespace tessera::actors {
namespace {

using std::chrono::milliseconds;

TEST(FetchCostTest, AStoreNeverHeardFromIsAskedWhateverTheEstimates) {
  fetch_cost_model m;
  const auto p = m.plan("node/kvstore", uint64_t{1} << 40, 16, 1e-6);
  EXPECT_TRUE(p.fetch) << "priors alone never skip a store";
  EXPECT_EQ(p.deadline, fetch_cost_options{}.max_deadline) << "a terabyte from a prior is the longest wait";
}

TEST(FetchCostTest, AStoreSlowerThanComputingIsSkipped) {
  fetch_cost_model m;
  m.observe_fetch("disk", 100 << 20, 2.0); // 50 MB/s measured
  const auto slow = m.plan("disk", 200 << 20, 4096, 0.5); // ~4 s to fetch, 0.5 s to compute
  EXPECT_FALSE(slow.fetch);
  EXPECT_NEAR(slow.fetch_s, 4.0, 0.1);
  const auto cheap = m.plan("disk", 1 << 20, 4096, 0.5); // 20 ms to fetch
  EXPECT_TRUE(cheap.fetch);
  EXPECT_TRUE(m.plan("disk", 40 << 20, 4096, 0.5).fetch) << "0.8 s to fetch is within 2 x the compute";
  EXPECT_TRUE(m.plan("other-store", 200 << 20, 4096, 0.5).fetch) << "rates are per store";
}

TEST(FetchCostTest, AShortFetchIsNeverSkippedHoweverFastTheCompute) {
  fetch_cost_model m;
  m.observe_fetch("s", 1024, 0.005); // 5 ms round trips
  const auto p = m.plan("s", 8 * 1024, 64, 1e-4); // a tiny model computes 64 tokens in 0.1 ms
  EXPECT_GT(p.fetch_s, 2 * 1e-4);
  EXPECT_TRUE(p.fetch) << "under min_skip_fetch (50 ms) the cache hits are kept";
}

TEST(FetchCostTest, ASkippedStoreIsProbedAgainAndCanRecover) {
  fetch_cost_options o;
  o.probe_every = 4;
  fetch_cost_model m{o};
  m.observe_fetch("disk", 100 << 20, 2.0); // 50 MB/s
  for (int i = 0; i < 3; ++i)
    EXPECT_FALSE(m.plan("disk", 200 << 20, 4096, 0.5).fetch) << i;
  EXPECT_TRUE(m.plan("disk", 200 << 20, 4096, 0.5).fetch) << "the fourth is a probe";
  EXPECT_FALSE(m.plan("disk", 200 << 20, 4096, 0.5).fetch) << "the count starts over";
  for (int i = 0; i < 20; ++i) // the probes find a fast store again
    m.observe_fetch("disk", 200 << 20, 0.1);
  EXPECT_TRUE(m.plan("disk", 200 << 20, 4096, 0.5).fetch);
}

TEST(FetchCostTest, TheDeadlineGrowsWithThePrefixAndTheComputeItSaves) {
  fetch_cost_model m;
  m.observe_fetch("s", 64 << 20, 0.064); // ~1 GB/s
  const auto small = m.plan("s", 1 << 20, 64, 0.01);
  const auto large = m.plan("s", 512 << 20, 32768, 4.0);
  EXPECT_LT(small.deadline, milliseconds{300}) << "about the floor";
  EXPECT_GT(large.deadline, milliseconds{8000}) << "2 x the compute saved and 4 x the expected fetch";
  EXPECT_LT(large.deadline, milliseconds{12000});
  EXPECT_GT(large.deadline, small.deadline);
}

TEST(FetchCostTest, WithoutABackendEstimateTheMeasuredTokenRateIsUsed) {
  fetch_cost_model m;
  EXPECT_FALSE(m.plan("s", 1 << 20, 1000, std::nullopt).compute_s) << "nothing measured yet";
  m.observe_compute(2000, 1.0); // 2000 tokens/s
  const auto p = m.plan("s", 1 << 20, 1000, std::nullopt);
  ASSERT_TRUE(p.compute_s);
  EXPECT_NEAR(*p.compute_s, 0.5, 1e-9);
  m.observe_compute(0, 0.0); // an idle tick says nothing
  EXPECT_NEAR(*m.plan("s", 1 << 20, 1000, std::nullopt).compute_s, 0.5, 1e-9);
}

TEST(FetchCostTest, SmallAnswersMeasureLatencyNotBandwidth) {
  fetch_cost_model m;
  m.observe_fetch("s", 4096, 0.010); // 10 ms for 4 KiB: a round trip, not 400 KB/s
  const auto p = m.plan("s", 64 << 20, 8192, 1.0);
  EXPECT_NEAR(p.fetch_s, 0.010 + (64 << 20) / 1e9, 1e-3) << "the prior bandwidth stands";
  EXPECT_TRUE(p.fetch);
}

TEST(FetchCostTest, AModelledDeviceWeighsItsModelledLoadNotTheHostsFetchTime) {
  // The sim engine on a busy host: fetches measured at 50 MB/s of wall time
  // (the store's answers wait for CPU), compute modelled at 0.5 s.
  fetch_cost_model m;
  m.observe_fetch("store", 100 << 20, 2.0);
  EXPECT_FALSE(m.plan("store", 200 << 20, 4096, 0.5).fetch) << "host time against host time: skip";
  const auto p = m.plan("store", 200 << 20, 4096, 0.5, 0.004); // the modelled link loads it in 4 ms
  EXPECT_TRUE(p.fetch) << "the device would load it 100x faster than it computes it";
  ASSERT_TRUE(p.modelled_fetch_s);
  EXPECT_DOUBLE_EQ(*p.modelled_fetch_s, 0.004);
  EXPECT_NEAR(p.fetch_s, 4.0, 0.1) << "the measured estimate is kept";
  EXPECT_GT(p.deadline, std::chrono::milliseconds{16000}) << "the deadline is wall time: 4 x the measured fetch";
  // A modelled load slower than the modelled compute is still skipped.
  EXPECT_FALSE(m.plan("store", 200 << 20, 4096, 0.5, 3.0).fetch);
  // A load estimate without a modelled compute cannot be compared with anything.
  m.observe_compute(8192, 1.0);
  EXPECT_FALSE(m.plan("store", 200 << 20, 4096, std::nullopt, 0.004).modelled_fetch_s);
}

TEST(FetchCostTest, TheFloorFollowsTheStoresSlowestAnswerLatelyNotOnlyItsMean) {
  fetch_cost_model m;
  for (int i = 0; i < 50; ++i)
    m.observe_fetch("s", 1024, 0.002); // 2 ms round trips
  const auto quiet = m.plan("s", 1024, 16, 1e-3);
  EXPECT_LT(quiet.deadline, milliseconds{270}) << "the 250 ms floor";
  m.observe_fetch("s", 1024, 0.400); // once, a read waited 400 ms behind a long one
  for (int i = 0; i < 10; ++i)
    m.observe_fetch("s", 1024, 0.002);
  const auto after = m.plan("s", 1024, 16, 1e-3);
  EXPECT_GT(after.deadline, milliseconds{750}) << "2 x the slow answer, though the mean is back near 2 ms";
  EXPECT_LT(after.deadline, milliseconds{900});
  for (int i = 0; i < 2000; ++i) // the slow answer fades
    m.observe_fetch("s", 1024, 0.002);
  EXPECT_LT(m.plan("s", 1024, 16, 1e-3).deadline, milliseconds{270});
  EXPECT_LT(m.plan("other", 1024, 16, 1e-3).deadline, milliseconds{270}) << "tails are per store";

  fetch_cost_options o;
  o.weight = 1e-3; // so that the mean hardly hears it
  fetch_cost_model capped{o};
  capped.observe_fetch("s", 1024, 0.002);
  capped.observe_fetch("s", 1024, 60.0); // a minute: the tail's floor stops at 2 s
  const auto d = capped.plan("s", 1024, 16, 1e-3).deadline;
  EXPECT_GT(d, milliseconds{2000});
  EXPECT_LT(d, milliseconds{2400}) << "2 s + 4 x a mean of about 60 ms";
}

TEST(FetchCostTest, AStuckStoreIsSkippedButDoesNotLengthenTheDeadline) {
  fetch_cost_options o;
  o.probe_every = 2;
  fetch_cost_model m{o};
  m.observe_fetch("s", 1024, 0.002);
  const auto first = m.plan("s", 1024, 16, 0.01);
  ASSERT_TRUE(first.fetch);
  auto p = first;
  for (int i = 0; i < 20; ++i) { // every ask runs out its deadline
    if (p.fetch)
      m.observe_timeout("s", std::chrono::duration<double>(p.deadline).count());
    p = m.plan("s", 1024, 16, 0.01);
    EXPECT_EQ(p.deadline, first.deadline) << i << ": a timeout raising the next deadline would grow them to 30 s";
    EXPECT_GE(p.fetch_s, 0.25) << "the store takes at least its last timeout";
  }
  EXPECT_FALSE(m.plan("s", 1024, 16, 0.01).fetch) << "skipped but for the probes";
  m.observe_fetch("s", 1024, 0.002); // a probe is answered
  EXPECT_TRUE(m.plan("s", 1024, 16, 0.01).fetch);
  EXPECT_LT(m.plan("s", 1024, 16, 0.01).fetch_s, 0.01);

  fetch_cost_model never;
  never.observe_timeout("t", 5.0);
  EXPECT_FALSE(never.plan("t", 1024, 16, 0.01).fetch) << "a store that never answered, once it timed out";
}

TEST(FetchCostTest, NonsenseObservationsAreIgnored) {
  fetch_cost_model m;
  m.observe_fetch("s", 1 << 20, -1.0);
  m.observe_fetch("s", 1 << 20, std::nan(""));
  m.observe_fetch("s", 1 << 20, std::numeric_limits<double>::infinity());
  m.observe_timeout("s", std::nan(""));
  EXPECT_TRUE(m.plan("s", uint64_t{1} << 40, 16, 1e-6).fetch) << "still never heard from";
}

} // namespace
} // namespace tessera::actors
