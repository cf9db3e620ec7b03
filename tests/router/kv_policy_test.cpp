#include "actors/router/kv_policy.hpp"

#include <set>

#include <gtest/gtest.h>

#include "tests/router/router_test_util.hpp"

namespace {

using namespace tessera::actors;
using namespace tessera::actors::test;

constexpr auto both = worker_role::both;
constexpr auto decode = worker_role::decode;
constexpr auto prefill = worker_role::prefill;

// Prompts of 8 full blocks of 16 tokens unless said otherwise.
class KvPolicyTest : public ::testing::Test {
protected:
  const std::vector<kv_block_hash> c = chain(10);
  fed_index f;
};

TEST_F(KvPolicyTest, PicksTheWorkerHoldingThePromptsPrefix) {
  f.store(1, prefix(c, 4));
  const std::vector<worker_load> w{make_worker(1, both), make_worker(2, both)};
  const auto req = make_request(c, 128);
  // (128 - 4*16) / 16 + 0 = 4 against 128 / 16 + 0 = 8.
  EXPECT_EQ(kv_prefill_cost(w[0], 4, req, 1.0), 4.0);
  EXPECT_EQ(kv_prefill_cost(w[1], 0, req, 1.0), 8.0);
  auto p = policy("kv");
  const auto d = must_route(*p, req, w, f.index);
  EXPECT_EQ(d.decode_worker, 1u);
  EXPECT_EQ(d.prefill_worker, 1u);
  EXPECT_FALSE(d.disaggregated);
  EXPECT_EQ(d.cached_blocks, 4);
  EXPECT_NE(d.reason.find("kv: decode 1 (cost 4)"), std::string::npos) << d.reason;
  EXPECT_NE(d.reason.find("cached 4/8 blocks"), std::string::npos) << d.reason;
}

TEST_F(KvPolicyTest, DecodeLoadOutweighsTheCachedPrefix) {
  f.store(1, prefix(c, 4));
  const auto req = make_request(c, 128);
  auto p = policy("kv");
  // Worker 1: 4 + 5 = 9 against worker 2: 8 + 0 = 8.
  std::vector<worker_load> w{make_worker(1, both, 5), make_worker(2, both)};
  EXPECT_EQ(kv_prefill_cost(w[0], 4, req, 1.0), 9.0);
  auto d = must_route(*p, req, w, f.index);
  EXPECT_EQ(d.decode_worker, 2u);
  EXPECT_EQ(d.cached_blocks, 0);
  // Worker 1: 4 + 3 = 7 against 8: the cache wins again.
  w[0].active_decode_blocks = 3;
  EXPECT_EQ(kv_prefill_cost(w[0], 4, req, 1.0), 7.0);
  d = must_route(*p, req, w, f.index);
  EXPECT_EQ(d.decode_worker, 1u);
  EXPECT_EQ(d.cached_blocks, 4);
}

// docs/architecture/kv_cache_routing.md: costs 18, 10 and 11; the second wins.
TEST_F(KvPolicyTest, MatchesDynamosWorkedExample) {
  f.store(1, prefix(c, 2));
  f.store(2, prefix(c, 5));
  f.store(3, prefix(c, 8));
  const std::vector<worker_load> w{make_worker(1, both, 10), make_worker(2, both, 5),
                                   make_worker(3, both, 9)};
  const auto req = make_request(c, 160);
  EXPECT_EQ(kv_prefill_cost(w[0], 2, req, 1.0), 18.0);
  EXPECT_EQ(kv_prefill_cost(w[1], 5, req, 1.0), 10.0);
  EXPECT_EQ(kv_prefill_cost(w[2], 8, req, 1.0), 11.0);
  auto p = policy("kv");
  const auto d = must_route(*p, req, w, f.index);
  EXPECT_EQ(d.decode_worker, 2u);
  EXPECT_EQ(d.cached_blocks, 5);
}

TEST_F(KvPolicyTest, OverlapWeightScalesThePrefillTerm) {
  f.store(1, prefix(c, 4));
  const std::vector<worker_load> w{make_worker(1, both, 5), make_worker(2, both)};
  const auto req = make_request(c, 128);
  router_options opts;
  opts.overlap_weight = 2.0; // worker 1: 2*4 + 5 = 13, worker 2: 2*8 = 16
  EXPECT_EQ(kv_prefill_cost(w[0], 4, req, 2.0), 13.0);
  EXPECT_EQ(kv_prefill_cost(w[1], 0, req, 2.0), 16.0);
  auto p = policy("kv", opts);
  EXPECT_EQ(must_route(*p, req, w, f.index).decode_worker, 1u);
  opts.overlap_weight = 0.0; // the cache is ignored: 5 against 0
  p = policy("kv", opts);
  EXPECT_EQ(must_route(*p, req, w, f.index).decode_worker, 2u);
}

TEST_F(KvPolicyTest, QueuedPrefillTokensCountAsPrefillLoad) {
  f.store(1, prefix(c, 4));
  // Worker 1: (160 queued + 64 uncached) / 16 = 14 against 8.
  const std::vector<worker_load> w{make_worker(1, both, 0, 160), make_worker(2, both)};
  const auto req = make_request(c, 128);
  EXPECT_EQ(kv_prefill_cost(w[0], 4, req, 1.0), 14.0);
  auto p = policy("kv");
  EXPECT_EQ(must_route(*p, req, w, f.index).decode_worker, 2u);
}

TEST_F(KvPolicyTest, DisaggregatedPrefillGoesToTheCheapestPrefillWorker) {
  f.store(2, prefix(c, 6));
  std::vector<worker_load> w{make_worker(1, decode), make_worker(2, prefill),
                             make_worker(3, prefill)};
  const auto req = make_request(c, 128);
  router_options opts;
  opts.max_local_prefill_tokens = 32; // 128 uncached on the decode worker: remote
  auto p = policy("kv", opts);
  // Worker 2: (128 - 96) / 16 = 2 against worker 3: 8.
  EXPECT_EQ(kv_prefill_cost(w[1], 6, req, 1.0), 2.0);
  auto d = must_route(*p, req, w, f.index);
  EXPECT_EQ(d.decode_worker, 1u);
  EXPECT_EQ(d.prefill_worker, 2u);
  EXPECT_TRUE(d.disaggregated);
  EXPECT_EQ(d.cached_blocks, 6);
  EXPECT_NE(d.reason.find("prefill 2 (cost 2)"), std::string::npos) << d.reason;
  // A queue of 128 tokens on worker 2: (128 + 32) / 16 = 10 against 8.
  w[1].queued_prefill_tokens = 128;
  EXPECT_EQ(kv_prefill_cost(w[1], 6, req, 1.0), 10.0);
  d = must_route(*p, req, w, f.index);
  EXPECT_EQ(d.prefill_worker, 3u);
  EXPECT_EQ(d.cached_blocks, 0);
}

// A decode worker that holds the conversation and can prefill the rest
// itself competes with decode workers that would need a remote prefill.
TEST_F(KvPolicyTest, LocalPrefillPlanCompetesWithRemotePrefillPlans) {
  f.store(1, prefix(c, 7));
  router_options opts;
  opts.max_local_prefill_tokens = 64;
  const auto req = make_request(c, 128);
  // Decode 1: uncached 16 <= 64, local: 16/16 + 20 = 21.
  // Decode 2: uncached 128 > 64, remote: 15 + prefill 3's 8 = 23.
  std::vector<worker_load> w{make_worker(1, decode, 20), make_worker(2, decode, 15),
                             make_worker(3, prefill)};
  EXPECT_EQ(kv_prefill_cost(w[0], 7, req, 1.0), 21.0);
  auto p = policy("kv", opts);
  auto d = must_route(*p, req, w, f.index);
  EXPECT_EQ(d.decode_worker, 1u);
  EXPECT_EQ(d.prefill_worker, 1u);
  EXPECT_FALSE(d.disaggregated);
  EXPECT_EQ(d.cached_blocks, 7);
  // Decode 2 at 12: 12 + 8 = 20 < 21.
  w[1].active_decode_blocks = 12;
  d = must_route(*p, req, w, f.index);
  EXPECT_EQ(d.decode_worker, 2u);
  EXPECT_EQ(d.prefill_worker, 3u);
  EXPECT_TRUE(d.disaggregated);
  EXPECT_NE(d.reason.find("cost 20 = decode 12 + remote prefill 8"), std::string::npos)
    << d.reason;
}

// With remote_prefill_on_both, a decode worker that prefills remotely pairs
// with the cheapest worker other than itself.
TEST_F(KvPolicyTest, RemotePrefillPairsWithTheCheapestOtherWorker) {
  f.store(1, prefix(c, 6));
  router_options opts;
  opts.max_local_prefill_tokens = 16;
  opts.remote_prefill_on_both = true;
  const auto req = make_request(c, 128);
  // As decode, 1 (uncached 32 > 16) pairs with prefill 2: 30 + 8 = 38;
  // 2 (uncached 128) pairs with prefill 1: 0 + (32/16 + 30) = 32.
  const std::vector<worker_load> w{make_worker(1, both, 30), make_worker(2, both)};
  auto p = policy("kv", opts);
  const auto d = must_route(*p, req, w, f.index);
  EXPECT_EQ(d.decode_worker, 2u);
  EXPECT_EQ(d.prefill_worker, 1u);
  EXPECT_TRUE(d.disaggregated);
  EXPECT_EQ(d.cached_blocks, 6);
  EXPECT_NE(d.reason.find("cost 32 = decode 0 + remote prefill 32"), std::string::npos)
    << d.reason;
}

TEST_F(KvPolicyTest, TiesGoToFewerActiveRequestsThenToTheInjectedRandomNumbers) {
  const auto req = make_request(c, 128);
  std::vector<worker_load> w{make_worker(1, both, 0, 0, 2), make_worker(2, both)};
  auto p = policy("kv");
  EXPECT_EQ(must_route(*p, req, w, f.index).decode_worker, 2u);

  w[0].active_requests = 0;
  uint64_t next = 0;
  router_options opts;
  opts.random_source = [&] { return next; };
  p = policy("kv", opts);
  EXPECT_EQ(must_route(*p, req, w, f.index).decode_worker, 1u);
  next = 1;
  EXPECT_EQ(must_route(*p, req, w, f.index).decode_worker, 2u);
}

TEST_F(KvPolicyTest, TieBreaksAreDeterministicForASeedAndSpreadLoad) {
  const auto req = make_request(c, 128);
  const std::vector<worker_load> w{make_worker(1, both), make_worker(2, both),
                                   make_worker(3, both)};
  router_options opts;
  opts.seed = 1234;
  auto a = policy("kv", opts);
  auto b = policy("kv", opts);
  std::set<uint64_t> used;
  for (int i = 0; i < 32; ++i) {
    const auto da = must_route(*a, req, w, f.index);
    const auto db = must_route(*b, req, w, f.index);
    EXPECT_EQ(da.decode_worker, db.decode_worker);
    used.insert(da.decode_worker);
  }
  EXPECT_EQ(used.size(), 3u);
}

} // namespace

namespace {

// Workers 1 and 2 are on different nodes; node of worker 2 has kv store 9,
// which holds the whole prompt (6 blocks in host memory, 2 on disk).
TEST_F(KvPolicyTest, NodeStoreBlocksAreCreditedByTier) {
  f.store(1, prefix(c, 4));
  f.store(9, prefix(c, 6), std::nullopt, wire::kv_tier::g2_host);
  f.store(9, {c[6], c[7]}, c[5], wire::kv_tier::g3_disk);
  auto w2 = make_worker(2, both);
  w2.store_id = 9;
  const std::vector<worker_load> w{make_worker(1, both), w2};
  const auto req = make_request(c, 128);
  router_options o;
  o.host_tier_credit = 0.9;
  o.disk_tier_credit = 0.6;
  o.remote_tier_credit = 0; // store 9 is remote to worker 1: not this test's concern
  auto p = make_router_policy("kv", o);
  ASSERT_TRUE(p);
  // Worker 2: 8 blocks in its store, credited (6 x 0.9 + 2 x 0.6) = 6.6 -> 6.
  auto d = must_route(**p, req, w, f.index);
  EXPECT_EQ(d.decode_worker, 2u);
  EXPECT_EQ(d.cached_blocks, 6);
  // With no credit for the store the pool's 4 blocks win.
  o.host_tier_credit = o.disk_tier_credit = 0;
  auto q = make_router_policy("kv", o);
  ASSERT_TRUE(q);
  d = must_route(**q, req, w, f.index);
  EXPECT_EQ(d.decode_worker, 1u);
  EXPECT_EQ(d.cached_blocks, 4);
  // A store holding less than the pool adds nothing.
  auto w1 = make_worker(1, both);
  w1.store_id = 9;
  f.store(1, {c[4], c[5], c[6], c[7]}, c[3]);
  const std::vector<worker_load> only{w1};
  d = must_route(**p, req, only, f.index);
  EXPECT_EQ(d.cached_blocks, 8);
}

TEST_F(KvPolicyTest, AnotherNodesStoreIsCreditedAsRemoteAndNamedForTheFetch) {
  f.store(9, prefix(c, 8), std::nullopt, wire::kv_tier::g2_host);
  auto w1 = make_worker(1, both);
  w1.store_id = 8; // its node's store holds nothing of the prompt
  auto w2 = make_worker(2, both);
  w2.store_id = 9;
  const auto req = make_request(c, 128);
  router_options o;
  o.host_tier_credit = 0.9;
  o.remote_tier_credit = 0.5;
  auto p = make_router_policy("kv", o);
  ASSERT_TRUE(p);
  // Worker 2 uses its own node's store (8 x 0.9 = 7.2 -> 7): nothing to
  // fetch from another node.
  auto d = must_route(**p, req, std::vector<worker_load>{w1, w2}, f.index);
  EXPECT_EQ(d.decode_worker, 2u);
  EXPECT_EQ(d.cached_blocks, 7);
  EXPECT_EQ(d.fetch_store, 0u);
  // With worker 2 down, worker 1 gets the remote credit (8 x 0.5) and is
  // told where the blocks are.
  w2.healthy = false;
  d = must_route(**p, req, std::vector<worker_load>{w1, w2}, f.index);
  EXPECT_EQ(d.decode_worker, 1u);
  EXPECT_EQ(d.cached_blocks, 4);
  EXPECT_EQ(d.fetch_store, 9u);
  EXPECT_EQ(d.fetch_store_blocks, 8);
  // Remote fetches off: each store serves its own node only.
  auto off = o;
  off.remote_fetch = false;
  auto q = make_router_policy("kv", off);
  ASSERT_TRUE(q);
  d = must_route(**q, req, std::vector<worker_load>{w1, w2}, f.index);
  EXPECT_EQ(d.cached_blocks, 0);
  EXPECT_EQ(d.fetch_store, 0u);
  // A pool holding as much as the remote store needs no fetch.
  f.store(1, prefix(c, 8));
  d = must_route(**p, req, std::vector<worker_load>{w1, w2}, f.index);
  EXPECT_EQ(d.cached_blocks, 8);
  EXPECT_EQ(d.fetch_store, 0u);
}

TEST(RouterOptionsTest, TierCreditsOutsideZeroToOneAreRejected) {
  router_options o;
  o.disk_tier_credit = 1.5;
  auto p = make_router_policy("kv", o);
  ASSERT_FALSE(p);
  EXPECT_NE(tessera::error_text(p.error()).find("must be in [0, 1], got 1.5"), std::string::npos);
  o.disk_tier_credit = 0.5;
  o.remote_tier_credit = -0.1;
  EXPECT_FALSE(make_router_policy("kv", o));
}

} // namespace
