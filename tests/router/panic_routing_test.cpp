// Panic routing (router_options::panic_routing): when no worker that can
// decode is healthy, requests go to the workers whose only fault is
// lateness (a saturated host runs their threads late; they are alive and
// connected) instead of failing with no_healthy_worker; a worker whose
// node is down, whose canary failed with an error, or that an operator
// drained is never used, and one healthy worker ends the panic.

#include "actors/router/router_policy.hpp"

#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "actors/router/router_errc.hpp"
#include "actors/router/worker_health.hpp"
#include "common/error.hpp"
#include "tests/router/router_test_util.hpp"

namespace {

using namespace tessera::actors;
using namespace tessera::actors::test;
using namespace std::chrono_literals;
using tessera::error_message;
using clock_type = worker_health::clock;

constexpr auto both = worker_role::both;
constexpr auto decode = worker_role::decode;
constexpr auto prefill = worker_role::prefill;

const clock_type::time_point t0{std::chrono::hours{1}};

bool contains(const std::string& text, std::string_view part) {
  return text.find(part) != std::string::npos;
}

/// A worker unhealthy only by lateness.
worker_load late_worker(uint64_t id, worker_role role) {
  auto w = make_worker(id, role);
  w.healthy = false;
  w.late = true;
  return w;
}

/// A worker that is unhealthy and not late (node down or canary failed).
worker_load dead_worker(uint64_t id, worker_role role) {
  auto w = make_worker(id, role);
  w.healthy = false;
  return w;
}

class PanicRoutingAllPoliciesTest : public ::testing::TestWithParam<std::string> {};

TEST_P(PanicRoutingAllPoliciesTest, EveryWorkerLateRoutesToOneOfThemAndCountsIt) {
  prefix_index idx;
  const std::vector<worker_load> w{late_worker(1, decode), late_worker(2, decode), late_worker(3, both)};
  ASSERT_TRUE(panic_applies(w, router_options{}));
  auto p = policy(GetParam());
  std::set<uint64_t> used;
  for (int i = 0; i < 12; ++i) {
    const auto d = must_route(*p, make_request(chain(4), 64), w, idx);
    EXPECT_TRUE(d.panic);
    EXPECT_TRUE(d.decode_worker >= 1 && d.decode_worker <= 3) << d.decode_worker;
    EXPECT_TRUE(contains(d.reason, "panic: no healthy worker can decode; 3 late ones used")) << d.reason;
    used.insert(d.decode_worker);
  }
  EXPECT_EQ(p->panic_routes(), 12u);
  if (GetParam() == "round-robin")
    EXPECT_EQ(used.size(), 3u) << "the late workers share the load as healthy ones would";
}

TEST_P(PanicRoutingAllPoliciesTest, OneHealthyWorkerAmongLateOnesTakesEveryRequest) {
  prefix_index idx;
  std::vector<worker_load> w{late_worker(1, decode), make_worker(2, decode), late_worker(3, decode)};
  w[1].active_decode_blocks = 1000; // busier than the late ones would look: still the only choice
  EXPECT_FALSE(panic_applies(w, router_options{}));
  auto p = policy(GetParam());
  for (int i = 0; i < 12; ++i) {
    const auto d = must_route(*p, make_request(chain(4), 64, "s" + std::to_string(i % 3)), w, idx);
    EXPECT_EQ(d.decode_worker, 2u);
    EXPECT_FALSE(d.panic);
    EXPECT_FALSE(contains(d.reason, "panic")) << d.reason;
  }
  EXPECT_EQ(p->panic_routes(), 0u);
}

TEST_P(PanicRoutingAllPoliciesTest, WorkersDownOrFailedAreStillRefusedWithNoHealthyWorker) {
  prefix_index idx;
  const std::vector<worker_load> w{dead_worker(1, decode), dead_worker(2, both), late_worker(3, prefill)};
  EXPECT_FALSE(panic_applies(w, router_options{})) << "a late prefill worker alone serves nothing";
  auto p = policy(GetParam());
  auto d = p->route(make_request(chain(4), 64), w, idx);
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error(), router_errc::no_healthy_worker);
  EXPECT_EQ(error_message(d.error()), "no healthy worker can decode: 3 known, 3 unhealthy, 0 at max_requests or without KV room, "
                                      "0 prefill-only");
  EXPECT_EQ(p->panic_routes(), 0u);
}

TEST_P(PanicRoutingAllPoliciesTest, OnlyTheLateWorkersOfAMixAreUsedNeverTheDownOrFailedOnes) {
  prefix_index idx;
  const std::vector<worker_load> w{dead_worker(1, decode), late_worker(2, decode), dead_worker(3, decode),
                                   late_worker(4, decode)};
  auto p = policy(GetParam());
  for (int i = 0; i < 20; ++i) {
    const auto d = must_route(*p, make_request(chain(4), 64), w, idx);
    EXPECT_TRUE(d.decode_worker == 2 || d.decode_worker == 4) << d.decode_worker;
    EXPECT_TRUE(d.panic);
  }
}

TEST_P(PanicRoutingAllPoliciesTest, TurnedOffTheLateWorkersAreRefusedAsBefore) {
  prefix_index idx;
  const std::vector<worker_load> w{late_worker(1, decode), late_worker(2, both)};
  router_options opts;
  opts.panic_routing = false;
  EXPECT_FALSE(panic_applies(w, opts));
  auto p = policy(GetParam(), opts);
  auto d = p->route(make_request(chain(4), 64), w, idx);
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error(), router_errc::no_healthy_worker);
}

INSTANTIATE_TEST_SUITE_P(AllPolicies, PanicRoutingAllPoliciesTest,
                         ::testing::Values("kv", "round-robin", "random", "least-loaded"),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           std::string n = i.param;
                           std::erase(n, '-');
                           return n;
                         });

TEST(PanicRoutingTest, LateWorkersAtMaxRequestsAreStillFullAndTheErrorSaysPanic) {
  prefix_index idx;
  std::vector<worker_load> w{late_worker(1, decode), dead_worker(2, decode)};
  w[0].max_requests = 1;
  w[0].active_requests = 1;
  auto p = policy("kv");
  auto d = p->route(make_request(chain(4), 64), w, idx);
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error(), router_errc::no_healthy_worker);
  EXPECT_EQ(error_message(d.error()), "no healthy worker can decode: 2 known, 1 unhealthy, 1 at max_requests or without KV room, "
                                      "0 prefill-only (panic routing: 1 late)");
}

TEST(PanicRoutingTest, LatePrefillWorkersPrefillOnlyInPanic) {
  // A long prompt that the decode worker would hand to a prefill worker.
  prefix_index idx;
  router_options opts;
  opts.max_local_prefill_tokens = 16;
  auto p = policy("kv", opts);
  // A healthy decode worker and a late prefill worker: no panic, so the
  // decode worker prefills itself (a stopped prefill node gets nothing).
  std::vector<worker_load> w{make_worker(1, decode), late_worker(2, prefill)};
  auto d = must_route(*p, make_request(chain(64), 1024), w, idx);
  EXPECT_FALSE(d.panic);
  EXPECT_FALSE(d.disaggregated);
  EXPECT_EQ(d.prefill_worker, 1u);
  // Everything late (the whole host is slow): the late prefill worker
  // prefills for the late decode worker, as when all were healthy.
  w[0] = late_worker(1, decode);
  d = must_route(*p, make_request(chain(64), 1024), w, idx);
  EXPECT_TRUE(d.panic);
  EXPECT_TRUE(d.disaggregated);
  EXPECT_EQ(d.decode_worker, 1u);
  EXPECT_EQ(d.prefill_worker, 2u);
  // A healthy prefill worker beside them is used as it always is.
  w.push_back(make_worker(3, prefill));
  w[1].queued_prefill_tokens = 100000;
  d = must_route(*p, make_request(chain(64), 1024), w, idx);
  EXPECT_TRUE(d.panic);
  EXPECT_EQ(d.prefill_worker, 3u);
}

TEST(PanicRoutingTest, ASessionStaysOnItsLateWorkerInPanicAndMovesWhenAnotherIsHealthy) {
  prefix_index idx;
  router_options opts;
  opts.sticky_break_factor = 0;
  auto p = policy("kv", opts);
  std::vector<worker_load> w{late_worker(1, decode), late_worker(2, decode)};
  const auto first = must_route(*p, make_request(chain(4), 64, "conv"), w, idx);
  const auto again = must_route(*p, make_request(chain(4), 64, "conv"), w, idx);
  EXPECT_EQ(again.decode_worker, first.decode_worker);
  EXPECT_TRUE(again.sticky);
  // The other one is healthy again: the late sticky worker is replaced.
  auto& other = w[first.decode_worker == 1 ? 1 : 0];
  other.healthy = true;
  other.late = false;
  const auto moved = must_route(*p, make_request(chain(4), 64, "conv"), w, idx);
  EXPECT_EQ(moved.decode_worker, other.id);
  EXPECT_FALSE(moved.panic);
}

// The episode as the router actor sees it, from the evidence through
// worker_health and set_health to the policy: every worker's heartbeats
// overdue, one node down; then one late worker beats again.
TEST(PanicRoutingTest, ALateWorkerThatHeartbeatsAgainEndsThePanic) {
  health_options h;
  h.heartbeat_timeout = 1200ms;
  std::vector<worker_health> health(4, worker_health{t0});
  health[3].node_down("node-3", t0 + 100ms); // killed: never a panic target
  std::vector<worker_load> w{make_worker(1, decode), make_worker(2, decode), make_worker(3, decode),
                             make_worker(4, decode)};
  auto judge = [&](clock_type::time_point now) {
    for (size_t i = 0; i < w.size(); ++i)
      set_health(w[i], health[i].check(now, h), false);
  };
  prefix_index idx;
  auto p = policy("round-robin");
  // 1.5 s without a heartbeat: every worker late (one down).
  judge(t0 + 1500ms);
  ASSERT_TRUE(panic_applies(w, p->options()));
  std::set<uint64_t> used;
  for (int i = 0; i < 9; ++i) {
    const auto d = must_route(*p, make_request(chain(4), 64), w, idx);
    EXPECT_TRUE(d.panic);
    EXPECT_NE(d.decode_worker, 4u) << "the worker whose node is down";
    used.insert(d.decode_worker);
  }
  EXPECT_EQ(used, (std::set<uint64_t>{1, 2, 3}));
  EXPECT_EQ(p->panic_routes(), 9u);
  // Worker 2's heartbeat arrives: it is healthy, panic ends, and it alone
  // takes requests.
  health[1].heard(t0 + 1600ms);
  judge(t0 + 1700ms);
  EXPECT_FALSE(panic_applies(w, p->options()));
  for (int i = 0; i < 6; ++i) {
    const auto d = must_route(*p, make_request(chain(4), 64), w, idx);
    EXPECT_FALSE(d.panic);
    EXPECT_EQ(d.decode_worker, 2u);
  }
  EXPECT_EQ(p->panic_routes(), 9u) << "only routes in panic count";
}

} // namespace
