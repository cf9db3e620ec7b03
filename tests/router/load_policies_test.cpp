#include "actors/router/load_policies.hpp"

#include <map>
#include <vector>

#include <gtest/gtest.h>

#include "tests/router/router_test_util.hpp"

namespace {

using namespace tessera::actors;
using namespace tessera::actors::test;

constexpr auto both = worker_role::both;
constexpr auto decode = worker_role::decode;
constexpr auto prefill = worker_role::prefill;

std::vector<uint64_t> decode_workers(router_policy& p, const std::vector<worker_load>& w,
                                     const prefix_index& idx, int n) {
  std::vector<uint64_t> out;
  for (int i = 0; i < n; ++i)
    out.push_back(must_route(p, make_request(chain(4), 64), w, idx).decode_worker);
  return out;
}

TEST(LoadPoliciesTest, RoundRobinCyclesThroughTheEligibleWorkersById) {
  prefix_index idx;
  std::vector<worker_load> w{make_worker(30, both), make_worker(10, both), make_worker(20, both)};
  auto p = policy("round-robin");
  EXPECT_EQ(decode_workers(*p, w, idx, 6), (std::vector<uint64_t>{10, 20, 30, 10, 20, 30}));
  // 20 goes down: skipped; 40 joins: visited in id order.
  w[2].healthy = false;
  w.push_back(make_worker(40, both));
  EXPECT_EQ(decode_workers(*p, w, idx, 4), (std::vector<uint64_t>{40, 10, 30, 40}));
}

TEST(LoadPoliciesTest, RoundRobinCyclesPrefillWorkersWithTheirOwnCursor) {
  prefix_index idx;
  const std::vector<worker_load> w{make_worker(1, decode), make_worker(2, decode),
                                   make_worker(3, prefill), make_worker(4, prefill),
                                   make_worker(5, prefill)};
  router_options opts;
  opts.max_local_prefill_tokens = 0;
  auto p = policy("round-robin", opts);
  std::vector<uint64_t> decodes, prefills;
  for (int i = 0; i < 6; ++i) {
    const auto d = must_route(*p, make_request(chain(4), 64), w, idx);
    EXPECT_TRUE(d.disaggregated);
    decodes.push_back(d.decode_worker);
    prefills.push_back(d.prefill_worker);
  }
  EXPECT_EQ(decodes, (std::vector<uint64_t>{1, 2, 1, 2, 1, 2}));
  EXPECT_EQ(prefills, (std::vector<uint64_t>{3, 4, 5, 3, 4, 5}));
}

TEST(LoadPoliciesTest, RandomIsDeterministicForASeed) {
  prefix_index idx;
  std::vector<worker_load> w;
  for (uint64_t id = 1; id <= 4; ++id)
    w.push_back(make_worker(id, both));
  w[3].healthy = false;
  router_options opts;
  opts.seed = 7;
  auto a = policy("random", opts);
  auto b = policy("random", opts);
  const auto seq_a = decode_workers(*a, w, idx, 300);
  EXPECT_EQ(seq_a, decode_workers(*b, w, idx, 300));
  opts.seed = 8;
  auto c = policy("random", opts);
  EXPECT_NE(seq_a, decode_workers(*c, w, idx, 300));
  std::map<uint64_t, int> count;
  for (auto id : seq_a)
    ++count[id];
  EXPECT_EQ(count.count(4), 0u); // never the unhealthy worker
  for (uint64_t id = 1; id <= 3; ++id)
    EXPECT_GT(count[id], 60) << "worker " << id; // uniform: 100 expected
}

TEST(LoadPoliciesTest, RandomDrawsFromTheInjectedSource) {
  prefix_index idx;
  const std::vector<worker_load> w{make_worker(1, both), make_worker(2, both),
                                   make_worker(3, both)};
  std::vector<uint64_t> draws{5, 0, 7};
  size_t next = 0;
  router_options opts;
  opts.random_source = [&] { return draws[next++ % draws.size()]; };
  auto p = policy("random", opts);
  // 5 % 3 = 2, 0 % 3 = 0, 7 % 3 = 1.
  EXPECT_EQ(decode_workers(*p, w, idx, 3), (std::vector<uint64_t>{3, 1, 2}));
}

TEST(LoadPoliciesTest, LeastLoadedPicksTheLowestLoadInBlocks) {
  prefix_index idx;
  // Loads: 10, 2 + 160/16 = 12, 5 + 32/16 = 7.
  std::vector<worker_load> w{make_worker(1, both, 10), make_worker(2, both, 2, 160),
                             make_worker(3, both, 5, 32)};
  EXPECT_EQ(load_blocks(w[0], 16), 10.0);
  EXPECT_EQ(load_blocks(w[1], 16), 12.0);
  EXPECT_EQ(load_blocks(w[2], 16), 7.0);
  auto p = policy("least-loaded");
  auto d = must_route(*p, make_request(chain(4), 64), w, idx);
  EXPECT_EQ(d.decode_worker, 3u);
  EXPECT_NE(d.reason.find("load 7 blocks"), std::string::npos) << d.reason;
  // Equal loads: fewer active requests wins.
  w[0].active_decode_blocks = 7;
  w[0].active_requests = 1;
  w[2].active_requests = 2;
  EXPECT_EQ(must_route(*p, make_request(chain(4), 64), w, idx).decode_worker, 1u);
}

TEST(LoadPoliciesTest, LeastLoadedIgnoresCachedPrefixes) {
  fed_index f;
  const auto c = chain(8);
  f.store(1, c);
  const std::vector<worker_load> w{make_worker(1, both, 3), make_worker(2, both, 2)};
  auto p = policy("least-loaded");
  const auto d = must_route(*p, make_request(c, 128), w, f.index);
  EXPECT_EQ(d.decode_worker, 2u);
  EXPECT_EQ(d.cached_blocks, 0);
}

TEST(LoadPoliciesTest, LeastLoadedPicksThePrefillWorkerWithTheShortestQueue) {
  prefix_index idx;
  const std::vector<worker_load> w{make_worker(1, decode), make_worker(2, prefill, 0, 512),
                                   make_worker(3, prefill, 0, 256)};
  router_options opts;
  opts.max_local_prefill_tokens = 0;
  auto p = policy("least-loaded", opts);
  const auto d = must_route(*p, make_request(chain(4), 64), w, idx);
  EXPECT_EQ(d.prefill_worker, 3u);
  EXPECT_TRUE(d.disaggregated);
}

} // namespace
