// A frontend's router client (actors/node/router_client.hpp) in front of two
// routers on other nodes, reached through their gateways
// (router_gateway.hpp) over real bridges on a loopback fabric: it routes
// through the first, moves to the second when the first is gone (the same
// query, no error), answers /health's worker list from whichever is live,
// passes the routers' own "no healthy worker" on, and fails only when no
// router is reachable.

#include "actors/node/router_client.hpp"

#include <gtest/gtest.h>

#include <chrono>

#include "actors/bridge/bridge_actor.hpp"
#include "actors/node/router_gateway.hpp"
#include "actors/router/router_errc.hpp"
#include "common/error.hpp"
#include "transport/loopback/loopback_transport.hpp"

namespace tessera::actors {
namespace {

using namespace std::chrono_literals;
namespace wire = transport::wire;

std::shared_ptr<const bridge_protocol> protocol() {
  auto p = std::make_shared<bridge_protocol>();
  p->add<router_actor>().add<router_api_actor>();
  return p;
}

/// A node with a router and its gateway.
struct router_node {
  router_node(caf::actor_system& sys, const std::shared_ptr<transport::loopback_fabric>& fabric,
              const std::string& name) {
    auto t = std::make_unique<transport::loopback_transport>(fabric);
    auto* tr = t.get();
    br = std::make_unique<bridge>(sys, std::move(t), bridge_config{name, protocol(), 5s, {}});
    address = tr->listen("node-" + name + ":0").value();
    router_config rc;
    rc.policy = "round-robin";
    router = spawn_router(sys, rc).value();
    gateway = spawn_router_gateway(sys, router);
    caf::anon_send(br->actor(), publish_atom_v, std::string{router_api_name}, caf::actor_cast<caf::actor>(gateway));
  }
  ~router_node() { stop(); }
  void stop() {
    if (gateway)
      caf::anon_send_exit(gateway, caf::exit_reason::user_shutdown);
    if (router)
      caf::anon_send_exit(router, caf::exit_reason::user_shutdown);
    gateway = router_api_actor{};
    router = router_local_actor{};
  }
  /// A decode worker `name` (on node "w") joins this router.
  void join(const std::string& name, uint64_t id) {
    wire::worker_join j{id, {"w", name}, {wire::node_role::prefill, wire::node_role::decode}, 7, 16, 64, 9};
    caf::anon_send(router, join_atom_v, j);
  }
  std::unique_ptr<bridge> br;
  std::string address;
  router_local_actor router;
  router_api_actor gateway;
};

class RouterClientTest : public ::testing::Test {
protected:
  RouterClientTest()
      : sys(cfg), self(sys), fabric(transport::loopback_fabric::make()), a(sys, fabric, "ra"), b(sys, fabric, "rb") {
    auto t = std::make_unique<transport::loopback_transport>(fabric);
    front = std::make_unique<bridge>(sys, std::move(t), bridge_config{"front", protocol(), 5s, {}});
    for (auto* n : {&a, &b}) {
      caf::error err;
      self->request(front->actor(), 5s, connect_atom_v, std::string{n == &a ? "ra" : "rb"}, n->address)
        .receive([] {}, [&](caf::error& e) { err = e; });
      EXPECT_FALSE(err) << error_text(err);
    }
    router_client_config rc;
    rc.bridge = front->actor();
    rc.routers = {{"ra", {}}, {"rb", {}}};
    rc.attempt_timeout = 1s;
    client = spawn_router_client(sys, rc).value();
  }
  ~RouterClientTest() override { caf::anon_send_exit(client, caf::exit_reason::user_shutdown); }

  caf::expected<route_answer> route(uint64_t id) {
    caf::expected<route_answer> out{route_answer{}};
    self->request(client, 10s, route_atom_v, route_query{id, {1, 2, 3, 4}, "", "", 8})
      .receive([&](route_answer& r) { out = std::move(r); }, [&](caf::error& e) { out = std::move(e); });
    return out;
  }

  std::vector<router_worker_view> workers() {
    std::vector<router_worker_view> out;
    self->request(client, 10s, workers_atom_v)
      .receive([&](std::vector<router_worker_view>& v) { out = std::move(v); },
               [&](caf::error& e) { ADD_FAILURE() << error_text(e); });
    return out;
  }

  caf::actor_system_config cfg;
  caf::actor_system sys;
  caf::scoped_actor self;
  std::shared_ptr<transport::loopback_fabric> fabric;
  router_node a;
  router_node b;
  std::unique_ptr<bridge> front;
  router_local_actor client;
};

TEST_F(RouterClientTest, RoutesThroughTheFirstRouterAndMovesToTheSecondWhenItIsGone) {
  a.join("decode-a", 1);
  b.join("decode-b", 2); // which router answers shows in the worker it names
  auto r = route(10);
  ASSERT_TRUE(r) << error_text(r.error());
  EXPECT_EQ(r->decode.node, "w");
  EXPECT_EQ(r->decode.actor, "decode-a");
  auto ws = workers();
  ASSERT_EQ(ws.size(), 1u);
  EXPECT_EQ(ws[0].status.name, "decode-a");
  EXPECT_TRUE(ws[0].status.healthy);
  EXPECT_EQ(ws[0].load.id, 1u);
  // Router a is gone (its gateway answers nothing any more): the same kind
  // of query goes to b, within the attempt timeout, without an error.
  a.stop();
  const auto t0 = std::chrono::steady_clock::now();
  r = route(11);
  ASSERT_TRUE(r) << error_text(r.error());
  EXPECT_EQ(r->decode.actor, "decode-b");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
  ws = workers();
  ASSERT_EQ(ws.size(), 1u);
  EXPECT_EQ(ws[0].status.name, "decode-b");
  // Marked down: the next query goes to b first.
  r = route(12);
  ASSERT_TRUE(r) << error_text(r.error());
  EXPECT_EQ(r->decode.actor, "decode-b");
  self->send(client, finished_atom_v, uint64_t{12}); // to b, which placed it
}

TEST_F(RouterClientTest, ARouterWithoutWorkersPassesToTheNextAndTheirOwnAnswerComesBack) {
  b.join("decode-b", 2); // a knows no worker (e.g. it just restarted)
  auto r = route(20);
  ASSERT_TRUE(r) << error_text(r.error());
  EXPECT_EQ(r->decode.actor, "decode-b");
  // Neither knows a worker: the routers' own error, not a transport one.
  b.stop();
  router_node c(sys, fabric, "rc");
  caf::anon_send_exit(client, caf::exit_reason::user_shutdown);
  self->request(front->actor(), 5s, connect_atom_v, std::string{"rc"}, c.address).receive([] {}, [](caf::error&) {});
  router_client_config rc;
  rc.bridge = front->actor();
  rc.routers = {{"ra", {}}, {"rc", {}}};
  rc.attempt_timeout = 1s;
  client = spawn_router_client(sys, rc).value();
  r = route(21);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), router_errc::no_healthy_worker) << error_text(r.error());
}

TEST_F(RouterClientTest, NoReachableRouterIsAnErrorNotAHang) {
  a.stop();
  b.stop();
  const auto t0 = std::chrono::steady_clock::now();
  auto r = route(30);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error(), router_errc::no_healthy_worker);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 4s);
}

/// A router that never answers a route call (a held call, a slow router)
/// and tells `observer` each request it hears finished.
router_local_actor::behavior_type silent_router(caf::actor observer) {
  return {
    [](join_atom, const wire::worker_join&) {},
    [](kv_events_atom, const wire::kv_event&) {},
    [](heartbeat_atom, const wire::heartbeat&) {},
    [](token_atom, const wire::token_chunk&) {},
    [](failed_atom, const wire::request_cancel&) {},
    [](route_atom, const route_query&) -> caf::result<route_answer> { return caf::delegated<route_answer>{}; },
    [](prefilled_atom, uint64_t) {},
    [observer](finished_atom, uint64_t id) { caf::anon_send(observer, finished_atom_v, id); },
    [](workers_atom) -> caf::result<std::vector<router_worker_view>> {
      return std::vector<router_worker_view>{};
    },
    [](node_down_atom, const std::string&) {},
    [](forget_atom, const std::string&) {},
    [](drain_atom, const std::string&, bool) -> int32_t { return 0; },
  };
}

TEST(RouterClientTimeoutTest, ARouterThatDidNotAnswerInTimeIsToldTheRequestFinished) {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  auto slow = sys.spawn(silent_router, caf::actor{self});
  router_client_config cc;
  cc.routers = {{"local", slow}};
  cc.attempt_timeout = 200ms;
  auto client = spawn_router_client(sys, cc);
  ASSERT_TRUE(client) << error_text(client.error());
  // The call times out there; the router may still hold it (for KV room)
  // or route it late and count it on its workers: it hears it finished.
  self->request(*client, 5s, route_atom_v, route_query{77, {1, 2, 3}, "", "", 8})
    .receive([](route_answer&) { ADD_FAILURE() << "a silent router answered"; },
             [](caf::error& e) { EXPECT_EQ(e, caf::sec::request_timeout) << error_text(e); });
  uint64_t told = 0;
  self->receive([&](finished_atom, uint64_t id) { told = id; }, caf::after(2s) >> [] {});
  EXPECT_EQ(told, 77u);
  caf::anon_send_exit(*client, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(slow, caf::exit_reason::user_shutdown);
}

TEST(RouterGatewayTest, AHeldRouteWaitsWhatTheRemoteCallerAsksAtMostFiveSeconds) {
  route_query q;
  q.request_id = 1;
  q.prompt = {5};
  q.max_wait = 3000ms; // a router client: half its attempt timeout
  auto c = to_wire(q);
  EXPECT_EQ(c.max_wait_ms, 3000);
  EXPECT_EQ(from_wire(c).max_wait, 3000ms);
  q.max_wait = 20000ms;
  EXPECT_EQ(from_wire(to_wire(q)).max_wait, max_remote_route_wait) << "no longer than the gateway waits for its router";
  q.max_wait = 0ms;
  EXPECT_EQ(to_wire(q).max_wait_ms, 1) << "no hold asked: the least one";
  q.max_wait = -1ms; // no limit of its own
  EXPECT_EQ(to_wire(q).max_wait_ms, 0);
  EXPECT_EQ(from_wire(to_wire(q)).max_wait, 1000ms) << "a caller that names none: the default";
}

TEST(RouterClientConfigTest, NoRouterOrARemoteOneWithoutItsNodeIsRefused) {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  EXPECT_FALSE(spawn_router_client(sys, router_client_config{}));
  router_client_config rc;
  rc.routers = {{"", {}}};
  EXPECT_FALSE(spawn_router_client(sys, rc));
}

} // namespace
} // namespace tessera::actors
