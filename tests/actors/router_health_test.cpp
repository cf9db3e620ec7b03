// The router's view of worker health as /health and /ready read it: a
// worker whose heartbeats stop turns unhealthy within the heartbeat
// timeout (and gets no more requests), a worker whose canary fails or
// never finishes turns unhealthy with that reason, and a real worker's
// canary passes at the engine's top priority even while its queue is full.
// With panic routing (on by default) a worker that is only late still gets
// requests while no worker is healthy, counted in
// tessera_router_panic_routes_total; one whose node is down never does.

#include "actors/router/router_actor.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <optional>
#include <set>

#include "actors/bridge/bridge_actor.hpp"
#include "actors/common/token_sink.hpp"
#include "actors/router/router_errc.hpp"
#include "actors/worker/worker_actor.hpp"
#include "cluster/metrics.hpp"
#include "common/error.hpp"
#include "engine/engine_errc.hpp"
#include "tests/support/test_model.hpp"
#include "transport/loopback/loopback_transport.hpp"

namespace tessera::actors {
namespace {

using namespace std::chrono_literals;
namespace wire = transport::wire;

/// How a fake worker answers a canary's generate.
enum class fake_mode { refuse, fail, silent };

class RouterHealthTest : public ::testing::Test {
protected:
  RouterHealthTest() : sys(cfg), self(sys) {
    auto protocol = std::make_shared<bridge_protocol>();
    protocol->add<worker_actor>().add<token_sink_actor>().add<router_actor>();
    br = std::make_unique<bridge>(
      sys, std::make_unique<transport::loopback_transport>(transport::loopback_fabric::make()),
      bridge_config{"n", protocol, 10s, {}});
  }

  ~RouterHealthTest() override {
    for (auto& a : actors)
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    if (router)
      caf::anon_send_exit(router, caf::exit_reason::user_shutdown);
  }

  /// Starts the router; canaries on when `canaries`, panic routing on
  /// when `panic`.
  void start_router(health_options h, bool canaries, bool panic = true) {
    router_config rc;
    rc.policy = "round-robin";
    rc.bridge = caf::actor_cast<caf::actor>(br->actor());
    rc.health = h;
    rc.options.panic_routing = panic;
    rc.metrics = metrics;
    if (canaries)
      rc.node = "n";
    auto r = spawn_router(sys, rc);
    ASSERT_TRUE(r) << error_text(r.error());
    router = *r;
    caf::anon_send(br->actor(), publish_atom_v, std::string{"router"}, caf::actor_cast<caf::actor>(router));
  }

  /// Announces a worker `name` (role decode) to the router, as its join
  /// and heartbeat would.
  void beat(const std::string& name, uint64_t id) {
    wire::worker_join j;
    j.worker_id = id;
    j.at = {"n", name};
    j.roles = {wire::node_role::decode};
    j.block_tokens = 16;
    j.num_blocks = 64;
    self->send(router, join_atom_v, j);
    wire::heartbeat h;
    h.node_id = "n/" + name;
    self->send(router, heartbeat_atom_v, h);
  }

  /// Publishes a fake worker `name` that answers every generate as `mode` says.
  void fake_worker(const std::string& name, fake_mode mode) {
    auto bridge = br->actor();
    auto a = sys.spawn([mode, bridge](caf::event_based_actor*) -> caf::behavior {
      return {
        [mode, bridge](generate_atom, const wire::request_handoff& h) -> caf::result<void> {
          if (mode == fake_mode::refuse)
            return engine::make_engine_error(engine::engine_errc::device_error, "the GPU fell off the bus");
          if (mode == fake_mode::fail)
            caf::anon_send(bridge, forward_atom_v, h.reply_to.node, h.reply_to.actor,
                           caf::make_message(failed_atom_v, wire::request_cancel{h.request.id, "engine on fire"}));
          return caf::unit;
        },
        [](cancel_atom, const wire::request_cancel&) {},
      };
    });
    caf::anon_send(br->actor(), publish_atom_v, name, a);
    actors.push_back(a);
  }

  std::vector<router_worker_view> views() {
    std::vector<router_worker_view> out;
    self->request(router, 5s, workers_atom_v)
      .receive([&](std::vector<router_worker_view>& v) { out = std::move(v); },
               [](caf::error& e) { ADD_FAILURE() << error_text(e); });
    return out;
  }

  /// The status of worker `name` once `pred` holds for it (polled every
  /// 20 ms), or nullopt after `timeout`.
  std::optional<worker_status> wait_for(const std::string& name, std::chrono::milliseconds timeout,
                                        const std::function<bool(const worker_status&)>& pred) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      for (const auto& v : views())
        if (v.status.name == name && pred(v.status))
          return v.status;
      self->receive(caf::after(20ms) >> [] {});
    }
    return std::nullopt;
  }

  /// Routes a 3-token prompt: the answer, or the router's error.
  caf::expected<route_answer> route(uint64_t id) {
    caf::expected<route_answer> out{caf::make_error(caf::sec::request_timeout)}; // no answer
    self->request(router, 5s, route_atom_v, route_query{id, {1, 2, 3}, "", "", 4})
      .receive([&](route_answer& a) { out = std::move(a); }, [&](caf::error& e) { out = std::move(e); });
    return out;
  }

  double panic_routes() {
    return metrics->counter("tessera_router_panic_routes_total", "").value();
  }

  caf::actor_system_config cfg;
  caf::actor_system sys;
  caf::scoped_actor self;
  std::shared_ptr<cluster::metrics_registry> metrics = std::make_shared<cluster::metrics_registry>();
  std::unique_ptr<bridge> br;
  router_local_actor router;
  std::vector<caf::actor> actors;
};

TEST_F(RouterHealthTest, AWorkerWhoseHeartbeatsStopIsUnhealthyWithinTheTimeoutAndGetsNoRequests) {
  health_options h;
  h.heartbeat_timeout = 300ms;
  start_router(h, false, /*panic=*/false); // with panic routing: the next test
  beat("w0", 1);
  auto healthy = wait_for("w0", 2s, [](const worker_status& s) { return s.healthy; });
  ASSERT_TRUE(healthy);
  EXPECT_EQ(healthy->reason, "");
  EXPECT_EQ(healthy->node, "n");
  EXPECT_EQ(healthy->role, worker_role::decode);
  const auto last_beat = std::chrono::steady_clock::now();
  // No more heartbeats from here on.
  auto down = wait_for("w0", 3s, [](const worker_status& s) { return !s.healthy; });
  const auto detected = std::chrono::steady_clock::now() - last_beat;
  ASSERT_TRUE(down) << "still healthy 3 s after its last heartbeat";
  EXPECT_NE(down->reason.find("no heartbeat for"), std::string::npos) << down->reason;
  EXPECT_GE(down->last_seen_ms, 300);
  EXPECT_LT(detected, 1500ms) << "the timeout is 300 ms";
  EXPECT_FALSE(views().at(0).load.healthy) << "/metrics reads the same";
  caf::error err;
  self->request(router, 5s, route_atom_v, route_query{1, {1, 2, 3}, "", "", 4})
    .receive([](route_answer&) { ADD_FAILURE() << "routed to a dead worker"; }, [&](caf::error& e) { err = e; });
  EXPECT_EQ(err, router_errc::no_healthy_worker) << error_text(err);
  beat("w0", 1);
  EXPECT_TRUE(wait_for("w0", 2s, [](const worker_status& s) { return s.healthy; })) << "back with a heartbeat";
}

TEST_F(RouterHealthTest, LateWorkersGetRequestsWhileNoneIsHealthyButNeverOnceTheirNodeIsDown) {
  health_options h;
  h.heartbeat_timeout = 600ms;
  start_router(h, false);
  EXPECT_NE(metrics->render().find("tessera_router_panic_routes_total 0"), std::string::npos)
    << "exported from the start: " << metrics->render();
  beat("w0", 1);
  beat("w1", 2);
  ASSERT_TRUE(wait_for("w1", 2s, [](const worker_status& s) { return s.healthy; }));
  ASSERT_TRUE(route(1)) << "healthy";
  EXPECT_EQ(panic_routes(), 0);
  // Neither beats any more: both late, none healthy.
  ASSERT_TRUE(wait_for("w0", 3s, [](const worker_status& s) { return !s.healthy; }));
  ASSERT_TRUE(wait_for("w1", 3s, [](const worker_status& s) { return !s.healthy; }));
  for (const auto& v : views()) {
    EXPECT_EQ(v.status.fault, health_fault::late) << v.status.reason;
    EXPECT_TRUE(v.panic_target) << v.status.name;
    EXPECT_FALSE(v.load.healthy) << "/health and /metrics still tell the truth";
  }
  std::set<std::string> used;
  for (uint64_t id = 2; id < 6; ++id) {
    auto a = route(id);
    ASSERT_TRUE(a) << "refused though both workers are only late: " << error_text(a.error());
    EXPECT_NE(a->reason.find("panic"), std::string::npos) << a->reason;
    used.insert(a->decode.actor);
  }
  EXPECT_EQ(used, (std::set<std::string>{"w0", "w1"}));
  EXPECT_EQ(panic_routes(), 4);
  EXPECT_NE(metrics->render().find("tessera_router_panic_routes_total 4"), std::string::npos) << metrics->render();
  // w1 beats again: the panic ends and w1 alone takes requests.
  beat("w1", 2);
  ASSERT_TRUE(wait_for("w1", 2s, [](const worker_status& s) { return s.healthy; }));
  for (uint64_t id = 6; id < 9; ++id) {
    auto a = route(id);
    ASSERT_TRUE(a) << error_text(a.error());
    EXPECT_EQ(a->decode.actor, "w1");
  }
  EXPECT_EQ(panic_routes(), 4);
  for (const auto& v : views())
    EXPECT_FALSE(v.panic_target) << v.status.name;
  // Their node fails: down is no lateness, and nothing is routed.
  self->send(router, node_down_atom_v, std::string{"n"});
  ASSERT_TRUE(wait_for("w1", 1s, [](const worker_status& s) { return s.fault == health_fault::node_down; }));
  auto refused = route(9);
  ASSERT_FALSE(refused) << "routed to " << refused->decode.actor << " on a node that is down";
  EXPECT_EQ(refused.error(), router_errc::no_healthy_worker) << error_text(refused.error());
  EXPECT_EQ(panic_routes(), 4);
}

TEST_F(RouterHealthTest, ANodeDownFromTheBridgeIsUnhealthyAtOnce) {
  start_router({}, false);
  beat("w0", 1);
  ASSERT_TRUE(wait_for("w0", 2s, [](const worker_status& s) { return s.healthy; }));
  self->send(router, node_down_atom_v, std::string{"n"});
  auto down = wait_for("w0", 1s, [](const worker_status& s) { return !s.healthy; });
  ASSERT_TRUE(down);
  EXPECT_NE(down->reason.find("node 'n' disconnected"), std::string::npos) << down->reason;
}

class RouterCanaryTest : public RouterHealthTest {
protected:
  void SetUp() override {
    health_options h;
    h.heartbeat_timeout = 60s; // only the canaries decide here
    h.canary_interval = 100ms;
    h.canary_timeout = 400ms;
    start_router(h, true);
  }
};

TEST_F(RouterCanaryTest, ACanaryTheWorkerFailsMakesItUnhealthyWithTheReason) {
  fake_worker("w0", fake_mode::fail);
  beat("w0", 1);
  auto down = wait_for("w0", 3s, [](const worker_status& s) { return !s.healthy; });
  ASSERT_TRUE(down) << "a worker that fails its canary stayed healthy";
  EXPECT_EQ(down->reason, "health canary failed: engine on fire");
  EXPECT_EQ(down->fault, health_fault::canary_failed);
  auto a = route(1);
  ASSERT_FALSE(a) << "panic routing used a worker whose canary failed: " << a->decode.actor;
  EXPECT_EQ(a.error(), router_errc::no_healthy_worker);
}

TEST_F(RouterCanaryTest, ACanaryTheWorkerRefusesMakesItUnhealthyWithTheError) {
  fake_worker("w0", fake_mode::refuse);
  beat("w0", 1);
  auto down = wait_for("w0", 3s, [](const worker_status& s) { return !s.healthy; });
  ASSERT_TRUE(down);
  EXPECT_NE(down->reason.find("health canary failed: not admitted"), std::string::npos) << down->reason;
  EXPECT_NE(down->reason.find("the GPU fell off the bus"), std::string::npos) << down->reason;
}

TEST_F(RouterCanaryTest, ACanaryThatNeverFinishesMakesAWorkerThatStillBeatsUnhealthy) {
  fake_worker("w0", fake_mode::silent);
  beat("w0", 1);
  auto down = wait_for("w0", 3s, [](const worker_status& s) { return !s.healthy; });
  ASSERT_TRUE(down) << "a stuck engine looked healthy";
  EXPECT_NE(down->reason.find("health canary"), std::string::npos) << down->reason;
  EXPECT_LT(down->last_seen_ms, 60000);
  // Unanswered is late, not failed: with no other worker it is used.
  EXPECT_EQ(down->fault, health_fault::late) << down->reason;
  auto a = route(1);
  ASSERT_TRUE(a) << error_text(a.error());
  EXPECT_EQ(a->decode.actor, "w0");
}

TEST_F(RouterCanaryTest, ARealWorkersCanaryPassesWhileItsQueueIsFull) {
  tessera::test::test_engine_options o;
  o.backend.num_blocks = 128;
  o.backend.threads = 1;
  auto eng = tessera::test::make_test_engine("nano", o);
  auto region = br->register_region(eng->get_backend().kv_pool_memory()).value();
  worker_config wc;
  wc.node = "n";
  wc.name = "w0";
  wc.bridge = br->actor();
  wc.pool_region = region;
  wc.router = {"n", "router"};
  wc.worker_id = 7;
  wc.max_waiting = 0; // full for every user request
  auto w = spawn_worker(sys, std::move(eng), wc);
  caf::anon_send(br->actor(), publish_atom_v, wc.name, caf::actor_cast<caf::actor>(w));
  actors.push_back(caf::actor_cast<caf::actor>(w));
  wire::request_handoff h;
  h.request.id = 1;
  h.request.prompt = {5, 6, 7};
  h.request.params.max_tokens = 4;
  caf::error err;
  self->request(w, 5s, generate_atom_v, h).receive([] {}, [&](caf::error& e) { err = e; });
  EXPECT_EQ(err, engine::engine_errc::overloaded) << "the queue is full for users";
  // The canaries get in all the same: it passes them, and stays healthy
  // over several more.
  auto passed = wait_for("w0", 5s, [](const worker_status& s) { return s.healthy && s.canary_ms >= 0; });
  ASSERT_TRUE(passed) << "a full queue made a healthy worker look dead";
  auto later = std::chrono::steady_clock::now() + 500ms;
  while (std::chrono::steady_clock::now() < later) {
    auto v = views();
    ASSERT_EQ(v.size(), 1u);
    EXPECT_TRUE(v[0].status.healthy) << v[0].status.reason;
    self->receive(caf::after(50ms) >> [] {});
  }
}

} // namespace
} // namespace tessera::actors
