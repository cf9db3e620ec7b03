// The router's KV admission (kv_admission.hpp) as an actor: while no decode
// worker's pool has room for a request, its route call is held, first come
// first served, and answered when a request ends, or after max_wait without
// the check; its metrics count both. The workers here are joins and
// heartbeats sent by the test: the router only reads them.

#include "actors/router/router_actor.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <numeric>

#include "actors/router/router_errc.hpp"
#include "cluster/metrics.hpp"
#include "common/error.hpp"

namespace tessera::actors {
namespace {

using namespace std::chrono_literals;
namespace wire = transport::wire;

constexpr int32_t block_tokens = 16;
constexpr int32_t pool_blocks = 10;

class RouterAdmissionTest : public ::testing::Test {
protected:
  RouterAdmissionTest() : sys(cfg), self(sys) {}

  void start(std::chrono::milliseconds max_wait, bool enabled = true) {
    router_config rc;
    rc.policy = "least-loaded";
    rc.metrics = metrics;
    rc.kv_admission.enabled = enabled;
    rc.kv_admission.max_wait = max_wait;
    rc.kv_admission.growth_tokens = 16; // one block per request
    auto r = spawn_router(sys, rc);
    ASSERT_TRUE(r) << error_text(r.error());
    router = *r;
    wire::worker_join j;
    j.worker_id = 1;
    j.at = {"n", "d0"};
    j.roles = {wire::node_role::decode};
    j.block_tokens = block_tokens;
    j.num_blocks = pool_blocks;
    self->send(router, join_atom_v, j);
    heartbeat(0);
  }

  void TearDown() override {
    if (router)
      caf::anon_send_exit(router, caf::exit_reason::user_shutdown);
  }

  /// The decode worker reports `used` blocks of its pool referenced.
  void heartbeat(uint64_t used) {
    wire::heartbeat h;
    h.node_id = "n/d0";
    h.sequence = ++sequence;
    h.kv_usage.push_back({wire::kv_tier::g1_pool, used * 1000, pool_blocks * 1000});
    self->send(router, heartbeat_atom_v, h);
  }

  /// A prompt of `blocks` full blocks, distinct per `seed`.
  static std::vector<int32_t> prompt(int32_t seed, int32_t blocks) {
    std::vector<int32_t> p(static_cast<size_t>(blocks * block_tokens));
    std::iota(p.begin(), p.end(), seed * 1000);
    return p;
  }

  /// Sends a route call whose answer comes back as a message.
  void route_async(uint64_t id, int32_t blocks) {
    self->send(router, route_atom_v, route_query{id, prompt(static_cast<int32_t>(id), blocks), "", "", 16});
  }

  /// The next route answer within `wait`, if any.
  std::optional<route_answer> answer(std::chrono::milliseconds wait) {
    std::optional<route_answer> out;
    self->receive([&](route_answer& a) { out = a; }, [&](caf::error& e) { ADD_FAILURE() << error_text(e); },
                  caf::after(wait) >> [] {});
    return out;
  }

  std::string metrics_text() { return metrics->render(); }

  caf::actor_system_config cfg;
  caf::actor_system sys;
  caf::scoped_actor self;
  std::shared_ptr<cluster::metrics_registry> metrics = std::make_shared<cluster::metrics_registry>();
  router_local_actor router;
  uint64_t sequence = 0;
};

TEST_F(RouterAdmissionTest, ARequestWithoutKvRoomWaitsUntilOneEndsThenGoesInOrder) {
  start(20s);
  // 4 + 1 blocks each on a pool of 10: two fit, the third and fourth wait.
  route_async(1, 4);
  ASSERT_TRUE(answer(2s));
  route_async(2, 4);
  ASSERT_TRUE(answer(2s));
  route_async(3, 4);
  route_async(4, 1); // would fit beside 1 and 2 alone, but waits behind 3
  EXPECT_FALSE(answer(400ms)) << "no decode worker has room: the route is held";
  EXPECT_NE(metrics_text().find("tessera_router_kv_admission_waiting 2"), std::string::npos) << metrics_text();
  // Request 1 prefilled and a later heartbeat shows its 4 blocks: nothing
  // freed yet.
  self->send(router, prefilled_atom_v, uint64_t{1});
  heartbeat(4);
  EXPECT_FALSE(answer(400ms));
  // Request 1 ends, and a heartbeat shows its blocks freed: 3 goes in;
  // 4, behind it, finds 10 - 5 (request 2) - 5 (request 3) < 2 and waits on.
  self->send(router, finished_atom_v, uint64_t{1});
  heartbeat(0);
  auto third = answer(2s);
  ASSERT_TRUE(third);
  EXPECT_EQ(third->decode.actor, "d0");
  EXPECT_FALSE(answer(400ms)) << "request 4 still has no room";
  self->send(router, finished_atom_v, uint64_t{2});
  EXPECT_TRUE(answer(2s)) << "request 2 ended: 4 fits";
  const auto text = metrics_text();
  EXPECT_NE(text.find("tessera_router_kv_admission_waits_total 2"), std::string::npos) << text;
  EXPECT_NE(text.find("tessera_router_kv_admission_timeouts_total 0"), std::string::npos) << text;
  EXPECT_NE(text.find("tessera_router_kv_admission_waiting 0"), std::string::npos) << text;
}

TEST_F(RouterAdmissionTest, AHeldRequestThatFinishesLeavesTheQueueAndThoseBehindItGo) {
  start(20s);
  route_async(1, 6); // 6 + 1 of 10
  ASSERT_TRUE(answer(2s));
  route_async(2, 6); // 7 more: held
  route_async(3, 2); // 3 more would fit, but waits behind 2
  EXPECT_FALSE(answer(400ms));
  // Request 2's caller gives up (its client left, or a router client's
  // attempt timed out) and says so: 2 leaves the queue with an error, and
  // 3 goes.
  self->send(router, finished_atom_v, uint64_t{2});
  bool dropped = false;
  std::optional<route_answer> third;
  for (int i = 0; i < 2; ++i)
    self->receive([&](route_answer& a) { third = a; },
                  [&](caf::error& e) {
                    dropped = true;
                    EXPECT_NE(error_text(e).find("finished while it waited"), std::string::npos) << error_text(e);
                  },
                  caf::after(2s) >> [] {});
  EXPECT_TRUE(dropped) << "the held call of request 2 was answered";
  ASSERT_TRUE(third) << "request 3, behind it, was routed";
  const auto text = metrics_text();
  EXPECT_NE(text.find("tessera_router_kv_admission_waiting 0"), std::string::npos) << text;
  EXPECT_NE(text.find("tessera_router_kv_admission_timeouts_total 0"), std::string::npos) << text;
  // Request 2 was never counted: once 1 ends, 3 (3 blocks) and a new
  // request of 6 + 1 fill the pool exactly.
  self->send(router, finished_atom_v, uint64_t{1});
  route_async(4, 6);
  EXPECT_TRUE(answer(2s)) << "request 2 still counted on the worker";
}

TEST_F(RouterAdmissionTest, ARequestRoutedAgainUnderItsIdCountsOnce) {
  start(20s);
  route_async(1, 4); // 4 + 1 of 10
  ASSERT_TRUE(answer(2s));
  route_async(1, 4); // a new attempt under the same id replaces the first
  ASSERT_TRUE(answer(2s));
  int32_t active = -1;
  self->request(router, 2s, workers_atom_v)
    .receive(
      [&](const std::vector<router_worker_view>& ws) {
        ASSERT_EQ(ws.size(), 1u);
        active = ws[0].load.active_requests;
      },
      [&](caf::error& e) { ADD_FAILURE() << error_text(e); });
  EXPECT_EQ(active, 1) << "the first attempt still counted on the worker";
  route_async(2, 4); // 5 + 5 of 10: fits only if the first attempt left
  EXPECT_TRUE(answer(2s));
  self->send(router, finished_atom_v, uint64_t{1});
  self->send(router, finished_atom_v, uint64_t{2});
  route_async(3, 9); // 9 + 1: the pool is free again
  EXPECT_TRUE(answer(2s));
}

TEST_F(RouterAdmissionTest, AfterMaxWaitTheRequestIsRoutedWithoutRoom) {
  start(300ms);
  route_async(1, 8);
  ASSERT_TRUE(answer(2s));
  route_async(2, 8);
  EXPECT_FALSE(answer(150ms));
  heartbeat(8); // keeps the worker healthy; still no room
  auto late = answer(3s);
  ASSERT_TRUE(late) << "routed once it waited max_wait";
  EXPECT_EQ(late->decode.actor, "d0");
  EXPECT_NE(metrics_text().find("tessera_router_kv_admission_timeouts_total 1"), std::string::npos)
    << metrics_text();
}

TEST_F(RouterAdmissionTest, ACallerWithAShortTimeoutIsHeldOnlyAsLongAsItAsks) {
  start(20s);
  route_async(1, 8);
  ASSERT_TRUE(answer(2s));
  // As a router client or the gateway asks: at most 200 ms here.
  route_query q{2, prompt(2, 8), "", "", 16};
  q.max_wait = 200ms;
  const auto t0 = std::chrono::steady_clock::now();
  self->send(router, route_atom_v, q);
  heartbeat(8);
  ASSERT_TRUE(answer(3s));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s) << "held for the router's 20 s, not the caller's 200 ms";
  EXPECT_NE(metrics_text().find("tessera_router_kv_admission_timeouts_total 1"), std::string::npos)
    << metrics_text();
}

TEST_F(RouterAdmissionTest, APromptSharedWithARunningRequestNeedsNoNewBlocks) {
  start(20s);
  route_async(1, 8); // 8 + 1 of 10
  ASSERT_TRUE(answer(2s));
  self->send(router, prefilled_atom_v, uint64_t{1});
  heartbeat(8);
  // The same prompt references request 1's blocks: only its growth is new
  // (8 used + 1 + 1 <= 10).
  self->send(router, route_atom_v, route_query{2, prompt(1, 8), "", "", 16});
  EXPECT_TRUE(answer(2s)) << "the shared prompt needs no new blocks";
  route_async(3, 8);
  EXPECT_FALSE(answer(400ms)) << "another prompt of 8 blocks does not fit";
}

TEST_F(RouterAdmissionTest, APromptOnlyCachedThereNeedsItsBlocksAgain) {
  start(20s);
  route_async(1, 8);
  ASSERT_TRUE(answer(2s));
  self->send(router, finished_atom_v, uint64_t{1}); // its blocks stay cached, free
  heartbeat(0);
  route_async(2, 8);
  ASSERT_TRUE(answer(2s));
  // Request 1's prompt again: no running request references it, so its 8
  // blocks come out of the free ones (evicting the cache) like new ones.
  self->send(router, route_atom_v, route_query{3, prompt(1, 8), "", "", 16});
  EXPECT_FALSE(answer(400ms));
}

TEST_F(RouterAdmissionTest, OffEveryRequestIsRoutedAtOnce) {
  start(20s, false);
  for (uint64_t id = 1; id <= 4; ++id) {
    route_async(id, 8);
    EXPECT_TRUE(answer(2s)) << "request " << id;
  }
  EXPECT_NE(metrics_text().find("tessera_router_kv_admission_waits_total 0"), std::string::npos) << metrics_text();
}

TEST_F(RouterAdmissionTest, ARequestLargerThanThePoolRunsOnceTheWorkerIsIdle) {
  start(20s);
  route_async(1, 2);
  ASSERT_TRUE(answer(2s));
  route_async(2, 40); // 4x the pool: never fits beside anything
  EXPECT_FALSE(answer(300ms));
  self->send(router, finished_atom_v, uint64_t{1});
  EXPECT_TRUE(answer(2s)) << "alone on an idle worker, the engine decides";
}

} // namespace
} // namespace tessera::actors
