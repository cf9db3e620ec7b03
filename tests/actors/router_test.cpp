// The router actor with real workers in one node: workers join and report,
// their KV events feed the prefix index, and the kv policy sends a request
// sharing a prefix with an earlier one to the worker that holds it (the
// worker's prefix-cache hit shows in its output), where round-robin does not.

#include "actors/router/router_actor.hpp"

#include <gtest/gtest.h>

#include "tests/support/block_hash_util.hpp"

#include <chrono>
#include <random>

#include "actors/bridge/bridge_actor.hpp"
#include "actors/common/token_sink.hpp"
#include "actors/kvstore/kvstore_actor.hpp"
#include "actors/router/router_errc.hpp"
#include "actors/worker/worker_actor.hpp"
#include "common/error.hpp"
#include "engine/block_hash.hpp"
#include "tests/support/test_model.hpp"
#include "transport/loopback/loopback_transport.hpp"

namespace tessera::actors {
namespace {

using namespace std::chrono_literals;
namespace wire = transport::wire;

class RouterTest : public ::testing::Test {
protected:
  RouterTest() : sys(cfg), self(sys) {}

  void start(const std::string& policy) {
    auto protocol = std::make_shared<bridge_protocol>();
    protocol->add<worker_actor>().add<token_sink_actor>().add<router_actor>().add<kvstore_actor>();
    br = std::make_unique<bridge>(
      sys, std::make_unique<transport::loopback_transport>(transport::loopback_fabric::make()),
      bridge_config{"n", protocol, 10s, {}});
    router_config rc;
    rc.policy = policy;
    rc.bridge = caf::actor_cast<caf::actor>(br->actor());
    auto r = spawn_router(sys, rc);
    ASSERT_TRUE(r) << error_text(r.error());
    router = *r;
    caf::anon_send(br->actor(), publish_atom_v, std::string{"router"}, caf::actor_cast<caf::actor>(router));
    caf::anon_send(br->actor(), publish_atom_v, std::string{"sink"}, caf::actor_cast<caf::actor>(self));
    for (int i = 0; i < 2; ++i) {
      tessera::test::test_engine_options o;
      o.backend.num_blocks = 128;
      o.backend.threads = 1;
      auto eng = tessera::test::make_test_engine("nano", o);
      auto region = br->register_region(eng->get_backend().kv_pool_memory()).value();
      worker_config wc;
      wc.node = "n";
      wc.name = "w" + std::to_string(i);
      wc.bridge = br->actor();
      wc.pool_region = region;
      wc.router = {"n", "router"};
      wc.worker_id = 100 + i;
      auto w = spawn_worker(sys, std::move(eng), wc);
      caf::anon_send(br->actor(), publish_atom_v, wc.name, caf::actor_cast<caf::actor>(w));
      workers[wc.name] = w;
    }
    // Both joined (their first report is sent at start).
    for (int tries = 0; tries < 200; ++tries) {
      std::vector<router_worker_view> seen;
      self->request(router, 5s, workers_atom_v).receive([&](std::vector<router_worker_view>& v) { seen = v; }, [](caf::error&) {});
      if (seen.size() == 2)
        return;
      self->receive(caf::after(10ms) >> [] {});
    }
    FAIL() << "workers did not join";
  }

  void TearDown() override {
    for (auto& [name, w] : workers)
      caf::anon_send_exit(w, caf::exit_reason::user_shutdown);
    if (router)
      caf::anon_send_exit(router, caf::exit_reason::user_shutdown);
  }

  /// Routes and runs one request; returns the answer and the cached prompt
  /// tokens the worker reported.
  std::pair<route_answer, int32_t> run(uint64_t id, const std::vector<int32_t>& prompt) {
    route_query q{id, prompt, "", "", 4};
    route_answer a;
    caf::error err;
    self->request(router, 5s, route_atom_v, q).receive([&](route_answer& x) { a = x; }, [&](caf::error& e) { err = e; });
    EXPECT_FALSE(err) << error_text(err);
    wire::request_handoff h;
    h.request.id = id;
    h.request.prompt = prompt;
    h.request.params.max_tokens = 4;
    h.request.params.temperature = 0;
    h.reply_to = {"n", "sink"};
    self->request(workers.at(a.decode.actor), 5s, generate_atom_v, h).receive([] {}, [&](caf::error& e) { err = e; });
    EXPECT_FALSE(err) << error_text(err);
    int32_t cached = -1;
    bool done = false;
    while (!done)
      self->receive([&](token_atom, const wire::token_chunk& c) {
                      cached = c.cached_prompt_tokens;
                      done = c.finish != engine::finish_reason::none;
                    },
                    [&](failed_atom, const wire::request_cancel& c) { ADD_FAILURE() << c.reason; done = true; },
                    caf::after(10s) >> [&] { ADD_FAILURE() << "no tokens"; done = true; });
    self->send(router, finished_atom_v, id);
    return {a, cached};
  }

  std::vector<int32_t> prompt(uint64_t seed, int n) {
    std::mt19937_64 rng{seed};
    std::vector<int32_t> p;
    for (int i = 0; i < n; ++i)
      p.push_back(static_cast<int32_t>(8 + rng() % 500));
    return p;
  }

  caf::actor_system_config cfg;
  caf::actor_system sys;
  caf::scoped_actor self;
  std::unique_ptr<bridge> br;
  router_local_actor router;
  std::map<std::string, worker_actor> workers;
};

TEST_F(RouterTest, KvPolicySendsASharedPrefixToTheWorkerHoldingIt) {
  start("kv");
  auto shared = prompt(1, 64);
  auto [first, c1] = run(1, shared);
  EXPECT_EQ(c1, 0);
  // Same 64-token prefix, a different tail: 4 full blocks are cached on
  // the first request's worker.
  auto second_prompt = shared;
  auto tail = prompt(2, 20);
  second_prompt.insert(second_prompt.end(), tail.begin(), tail.end());
  for (uint64_t id = 2; id <= 4; ++id) {
    auto [again, cached] = run(id, second_prompt);
    EXPECT_EQ(again.decode.actor, first.decode.actor) << again.reason;
    EXPECT_GE(again.cached_blocks, 4) << again.reason; // 5 once request 2 cached its tail
    EXPECT_GE(cached, 64) << "the worker's prefix-cache hit";
  }
}

TEST_F(RouterTest, AfterLostKvEventsTheWorkerResendsItsViewAndRoutingByCacheComesBack) {
  start("kv");
  auto shared = prompt(1, 64);
  auto [first, c1] = run(1, shared);
  std::vector<router_worker_view> views;
  self->request(router, 5s, workers_atom_v).receive([&](std::vector<router_worker_view>& v) { views = v; },
                                                    [](caf::error&) {});
  const router_worker_view* holder = nullptr;
  for (const auto& v : views)
    if (v.join.at.actor == first.decode.actor)
      holder = &v;
  ASSERT_NE(holder, nullptr);
  std::vector<engine::kv_block_hash> hashes;
  // The router and the engines of this process share its key.
  const auto& key = engine::process_kv_hash_key();
  engine::kv_hash_blocks(key, engine::kv_hash_root(key, holder->join.hash_seed, ""), shared,
                         holder->join.block_tokens, shared.size(), hashes);
  ASSERT_EQ(hashes.size(), 4u);
  // The router's view goes stale: a "removed" for blocks the worker still
  // holds, after a gap in the worker's event sequence (as if events were
  // lost on the way).
  wire::kv_event lost;
  lost.worker_id = holder->join.worker_id;
  lost.event_id = 1'000'000;
  lost.tier = wire::kv_tier::g1_pool;
  lost.kind = wire::kv_event_kind::removed;
  lost.block_hashes = hashes;
  self->send(router, kv_events_atom_v, lost);
  // The router asks the worker for its whole view; once it came back, the
  // shared prefix is routed to the worker that holds it again.
  auto second_prompt = shared;
  auto tail = prompt(2, 20);
  second_prompt.insert(second_prompt.end(), tail.begin(), tail.end());
  int32_t cached_blocks = 0;
  for (uint64_t id = 100; id < 400 && cached_blocks < 4; ++id) {
    route_query q{id, second_prompt, "", "", 4};
    self->request(router, 5s, route_atom_v, q)
      .receive([&](route_answer& a) { cached_blocks = a.decode.actor == first.decode.actor ? a.cached_blocks : 0; },
               [](caf::error&) {});
    self->send(router, finished_atom_v, id);
    if (cached_blocks < 4)
      self->receive(caf::after(10ms) >> [] {});
  }
  EXPECT_GE(cached_blocks, 4) << "the router's view of the worker's cache did not come back";
}

TEST_F(RouterTest, AfterLostKvEventsOfAStoreTheRouterAsksTheStoreForItsView) {
  start("kv");
  // The test stands in for a node's kv store: it joins as one, under the
  // name the router will ask.
  caf::anon_send(br->actor(), publish_atom_v, std::string{"kvstore"}, caf::actor_cast<caf::actor>(self));
  wire::worker_join j;
  j.worker_id = 777;
  j.at = {"n", "kvstore"};
  j.roles = {wire::node_role::kvstore};
  j.block_tokens = 16;
  j.num_blocks = 1;
  self->send(router, join_atom_v, j);
  wire::kv_event first;
  first.worker_id = 777;
  first.event_id = 0;
  first.tier = wire::kv_tier::g2_host;
  first.kind = wire::kv_event_kind::stored;
  first.block_hashes = ::tessera::test::bhs({1, 2, 3});
  self->send(router, kv_events_atom_v, first);
  auto gap = first;
  gap.event_id = 5; // events 1..4 never came
  gap.block_hashes = ::tessera::test::bhs({4});
  self->send(router, kv_events_atom_v, gap);
  bool asked = false;
  self->receive([&](kv_events_atom) { asked = true; },
                caf::after(5s) >> [] { ADD_FAILURE() << "the router did not ask the store to resend its view"; });
  EXPECT_TRUE(asked);
}

TEST_F(RouterTest, RoundRobinIgnoresTheCache) {
  start("round-robin");
  auto shared = prompt(1, 64);
  auto [first, c1] = run(1, shared);
  auto [second, c2] = run(2, shared);
  EXPECT_NE(second.decode.actor, first.decode.actor);
  EXPECT_EQ(c2, 0) << "the other worker had nothing cached";
}

TEST_F(RouterTest, APromptLeavesItsWorkersQueueWhenItIsPrefilledNotWhenItFinishes) {
  start("kv");
  auto queued = [&](const std::string& actor) {
    int64_t q = -1;
    self->request(router, 5s, workers_atom_v).receive(
      [&](std::vector<router_worker_view>& v) {
        for (const auto& w : v)
          if (w.join.at.actor == actor)
            q = w.load.queued_prefill_tokens;
      },
      [](caf::error&) {});
    return q;
  };
  auto route = [&](uint64_t id, const std::vector<int32_t>& p) {
    route_answer a;
    self->request(router, 5s, route_atom_v, route_query{id, p, "", "", 4})
      .receive([&](route_answer& x) { a = x; }, [](caf::error& e) { ADD_FAILURE() << error_text(e); });
    return a;
  };
  const auto a = route(1, prompt(1, 48));
  EXPECT_EQ(queued(a.prefill.actor), 48);
  // More prompts, wherever they go: only request 1's tokens leave at its
  // first token, and its finish takes nothing more.
  route(2, prompt(2, 48));
  route(3, prompt(3, 48));
  const auto before = queued(a.prefill.actor);
  EXPECT_GE(before, 48);
  self->send(router, prefilled_atom_v, uint64_t{1});
  EXPECT_EQ(queued(a.prefill.actor), before - 48);
  self->send(router, finished_atom_v, uint64_t{1});
  EXPECT_EQ(queued(a.prefill.actor), before - 48);
  self->send(router, prefilled_atom_v, uint64_t{1}); // late duplicate: nothing
  EXPECT_EQ(queued(a.prefill.actor), before - 48);
}

TEST_F(RouterTest, NoWorkerMeansAClearError) {
  router_config rc;
  auto r = spawn_router(sys, rc);
  ASSERT_TRUE(r);
  caf::error err;
  self->request(*r, 5s, route_atom_v, route_query{1, {1, 2, 3}, "", "", 4})
    .receive([](route_answer&) { FAIL(); }, [&](caf::error& e) { err = e; });
  EXPECT_TRUE(err == router_errc::no_healthy_worker) << error_text(err);
  EXPECT_NE(error_text(err).find("no worker has joined yet"), std::string::npos);
  caf::anon_send_exit(*r, caf::exit_reason::user_shutdown);
  EXPECT_FALSE(spawn_router(sys, router_config{"fastest", {}, 5s}));
}

} // namespace
} // namespace tessera::actors
