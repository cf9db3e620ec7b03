// The bridge over the loopback transport: two nodes in one process, each
// with its own transport and bridge, exactly as two processes would have.
// A remote proxy is called through the same typed interface as the local
// actor; replies, errors, ordering, unknown actors and operations, dead
// peers and timeouts are checked.

#include "actors/bridge/bridge_actor.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "actors/bridge/remote_actor.hpp"
#include "common/error.hpp"
#include "engine/engine_errc.hpp"
#include "transport/loopback/loopback_transport.hpp"

namespace tessera::actors {
namespace {

using namespace std::chrono_literals;
using transport::transport_errc;
namespace wire = transport::wire;

using echo_atom = caf::atom_constant<caf::atom("echo")>;
constexpr echo_atom echo_atom_v{};
using ping_atom = caf::atom_constant<caf::atom("ping")>;
constexpr ping_atom ping_atom_v{};
using note_atom = caf::atom_constant<caf::atom("note")>;
constexpr note_atom note_atom_v{};
using count_atom = caf::atom_constant<caf::atom("count")>;
constexpr count_atom count_atom_v{};
using fail_atom = caf::atom_constant<caf::atom("fail")>;
constexpr fail_atom fail_atom_v{};
using stall_atom = caf::atom_constant<caf::atom("stall")>;
constexpr stall_atom stall_atom_v{};

/// A test worker: the kind of interface serving actors publish.
using worker_actor = caf::typed_actor<
  /// Replies with the heartbeat, sequence + 1 and node id prefixed "echo:".
  caf::replies_to<echo_atom, wire::heartbeat>::with<wire::heartbeat>,
  caf::replies_to<ping_atom>::with<void>,
  /// Records a chunk (one-way).
  caf::reacts_to<note_atom, wire::token_chunk>,
  /// Replies with how many chunks arrived (sequence) and whether in order (load 1).
  caf::replies_to<count_atom>::with<wire::heartbeat>,
  /// Fails with an engine error.
  caf::replies_to<fail_atom, wire::heartbeat>::with<wire::heartbeat>,
  /// Never replies.
  caf::replies_to<stall_atom>::with<void>>;

struct worker_state {
  uint64_t chunks = 0;
  bool in_order = true;
  std::vector<caf::response_promise> stalled;
};

worker_actor::behavior_type worker(worker_actor::stateful_pointer<worker_state> self) {
  return {
    [](echo_atom, wire::heartbeat h) {
      h.sequence += 1;
      h.node_id = "echo:" + h.node_id;
      return h;
    },
    [](ping_atom) {},
    [self](note_atom, const wire::token_chunk& c) {
      if (c.id != self->state.chunks)
        self->state.in_order = false;
      ++self->state.chunks;
    },
    [self](count_atom) {
      wire::heartbeat h;
      h.node_id = "count";
      h.sequence = self->state.chunks;
      h.load = self->state.in_order ? 1.0f : 0.0f;
      return h;
    },
    [](fail_atom, const wire::heartbeat&) -> caf::result<wire::heartbeat> {
      return engine::make_engine_error(engine::engine_errc::bad_request, "top_p must be in (0, 1]");
    },
    [self](stall_atom) -> caf::result<void> {
      auto rp = self->make_response_promise<void>();
      self->state.stalled.push_back(rp);
      return rp;
    },
  };
}

std::shared_ptr<const bridge_protocol> protocol() {
  auto p = std::make_shared<bridge_protocol>();
  p->add<worker_actor>();
  return p;
}

/// One node: a transport on the shared fabric and its bridge.
struct node {
  node(caf::actor_system& sys, const std::shared_ptr<transport::loopback_fabric>& fabric,
       const std::string& name, std::chrono::milliseconds call_timeout = 5000ms) {
    auto t = std::make_unique<transport::loopback_transport>(fabric);
    tr = t.get();
    br = std::make_unique<bridge>(sys, std::move(t), bridge_config{name, protocol(), call_timeout, {}});
    address = tr->listen("node-" + name + ":0").value();
  }
  transport::loopback_transport* tr = nullptr; // owned by br
  std::unique_ptr<bridge> br;
  std::string address;
};

class BridgeTest : public ::testing::Test {
protected:
  BridgeTest() : sys(cfg), self(sys), fabric(transport::loopback_fabric::make()) {}

  void connect(node& from, const std::string& to_name, const node& to) {
    caf::error err;
    self->request(from.br->actor(), 5s, connect_atom_v, to_name, to.address)
      .receive([] {}, [&](caf::error& e) { err = e; });
    ASSERT_FALSE(err) << error_text(err);
  }

  wire::heartbeat beat(uint64_t seq) {
    wire::heartbeat h;
    h.node_id = "n";
    h.sequence = seq;
    return h;
  }

  caf::actor_system_config cfg;
  caf::actor_system sys;
  caf::scoped_actor self;
  std::shared_ptr<transport::loopback_fabric> fabric;
};

TEST_F(BridgeTest, RemoteProxyAnswersLikeTheLocalActor) {
  node a(sys, fabric, "a");
  node b(sys, fabric, "b");
  auto local = sys.spawn(worker);
  self->send(b.br->actor(), publish_atom_v, std::string{"worker"}, caf::actor_cast<caf::actor>(local));
  connect(a, "b", b);
  auto remote = remote_actor<worker_actor>(sys, a.br->actor(), "b", "worker");

  for (const auto& w : {local, remote}) {
    wire::heartbeat got;
    self->request(w, 5s, echo_atom_v, beat(41))
      .receive([&](const wire::heartbeat& h) { got = h; },
               [&](caf::error& e) { FAIL() << error_text(e); });
    EXPECT_EQ(got.sequence, 42u);
    EXPECT_EQ(got.node_id, "echo:n");
    bool pinged = false;
    self->request(w, 5s, ping_atom_v)
      .receive([&] { pinged = true; }, [&](caf::error& e) { FAIL() << error_text(e); });
    EXPECT_TRUE(pinged);
  }
  std::vector<std::string> peers;
  self->request(a.br->actor(), 5s, peers_atom_v)
    .receive([&](std::vector<std::string>& p) { peers = p; }, [](caf::error&) {});
  EXPECT_EQ(peers, std::vector<std::string>{"b"});
  self->request(b.br->actor(), 5s, peers_atom_v)
    .receive([&](std::vector<std::string>& p) { peers = p; }, [](caf::error&) {});
  EXPECT_EQ(peers, std::vector<std::string>{"a"}); // b learnt a's name from the hello
  self->send_exit(local, caf::exit_reason::user_shutdown);
}

TEST_F(BridgeTest, ErrorsComeBackWithTheirCategoryCodeAndText) {
  node a(sys, fabric, "a");
  node b(sys, fabric, "b");
  auto local = sys.spawn(worker);
  self->send(b.br->actor(), publish_atom_v, std::string{"worker"}, caf::actor_cast<caf::actor>(local));
  connect(a, "b", b);
  auto remote = remote_actor<worker_actor>(sys, a.br->actor(), "b", "worker");
  caf::error err;
  self->request(remote, 5s, fail_atom_v, beat(1))
    .receive([](const wire::heartbeat&) { FAIL() << "expected an error"; },
             [&](caf::error& e) { err = e; });
  EXPECT_TRUE(err == engine::engine_errc::bad_request) << error_text(err);
  EXPECT_EQ(error_text(err), "engine: top_p must be in (0, 1]");
  self->send_exit(local, caf::exit_reason::user_shutdown);
}

TEST_F(BridgeTest, OneWayMessagesArriveInOrderNoneLost) {
  node a(sys, fabric, "a");
  node b(sys, fabric, "b");
  auto local = sys.spawn(worker);
  self->send(b.br->actor(), publish_atom_v, std::string{"worker"}, caf::actor_cast<caf::actor>(local));
  connect(a, "b", b);
  auto remote = remote_actor<worker_actor>(sys, a.br->actor(), "b", "worker");
  constexpr uint64_t n = 2000;
  for (uint64_t i = 0; i < n; ++i) {
    wire::token_chunk c;
    c.id = i;
    c.tokens = {static_cast<int32_t>(i % 100)};
    self->send(remote, note_atom_v, c);
  }
  wire::heartbeat count;
  self->request(remote, 5s, count_atom_v)
    .receive([&](const wire::heartbeat& h) { count = h; },
             [&](caf::error& e) { FAIL() << error_text(e); });
  EXPECT_EQ(count.sequence, n);
  EXPECT_EQ(count.load, 1.0f) << "chunks arrived out of order";
  self->send_exit(local, caf::exit_reason::user_shutdown);
}

TEST_F(BridgeTest, UnknownActorOrOperationIsAnErrorNamingIt) {
  node a(sys, fabric, "a");
  node b(sys, fabric, "b");
  auto local = sys.spawn(worker);
  self->send(b.br->actor(), publish_atom_v, std::string{"worker"}, caf::actor_cast<caf::actor>(local));
  connect(a, "b", b);
  auto ghost = remote_actor<worker_actor>(sys, a.br->actor(), "b", "ghost");
  caf::error err;
  self->request(ghost, 5s, ping_atom_v).receive([] { FAIL(); }, [&](caf::error& e) { err = e; });
  EXPECT_TRUE(err == transport_errc::no_such_actor);
  EXPECT_NE(error_text(err).find("node 'b' has no actor 'ghost'"), std::string::npos) << error_text(err);

  // An operation the interface does not declare (echo with a token chunk).
  auto raw = spawn_remote_proxy(sys, a.br->actor(), "b", "worker");
  self->request(raw, 5s, echo_atom_v, wire::token_chunk{})
    .receive([](const wire::heartbeat&) { FAIL(); }, [&](caf::error& e) { err = e; });
  EXPECT_TRUE(err == transport_errc::no_such_actor);
  EXPECT_NE(error_text(err).find("does not accept 'echo' with a token_chunk"), std::string::npos)
    << error_text(err);

  // A message that is not (atom, wire message) never leaves the process.
  self->request(raw, 5s, std::string{"hello"}).receive([] { FAIL(); }, [&](caf::error& e) { err = e; });
  EXPECT_TRUE(err == transport_errc::invalid_message);
  EXPECT_NE(error_text(err).find("is (atom) or (atom, wire message)"), std::string::npos);
  self->send_exit(local, caf::exit_reason::user_shutdown);
}

TEST_F(BridgeTest, CallToANodeNotConnectedFailsAtOnce) {
  node a(sys, fabric, "a");
  auto remote = remote_actor<worker_actor>(sys, a.br->actor(), "nowhere", "worker");
  caf::error err;
  self->request(remote, 5s, ping_atom_v).receive([] { FAIL(); }, [&](caf::error& e) { err = e; });
  EXPECT_TRUE(err == transport_errc::not_connected);
  EXPECT_NE(error_text(err).find("not connected to node 'nowhere'"), std::string::npos);
}

TEST_F(BridgeTest, ConnectingToANodeByTheWrongNameFails) {
  node a(sys, fabric, "a");
  node b(sys, fabric, "b");
  caf::error err;
  self->request(a.br->actor(), 5s, connect_atom_v, std::string{"c"}, b.address)
    .receive([] { FAIL(); }, [&](caf::error& e) { err = e; });
  EXPECT_NE(error_text(err).find("the node at that address is 'b', not 'c'"), std::string::npos)
    << error_text(err);
}

TEST_F(BridgeTest, APeerThatDiesFailsItsPendingCallsWithAPeerError) {
  node a(sys, fabric, "a");
  node b(sys, fabric, "b");
  auto local = sys.spawn(worker);
  self->send(b.br->actor(), publish_atom_v, std::string{"worker"}, caf::actor_cast<caf::actor>(local));
  connect(a, "b", b);
  auto remote = remote_actor<worker_actor>(sys, a.br->actor(), "b", "worker");
  auto start = std::chrono::steady_clock::now();
  auto pending = self->request(remote, 10s, stall_atom_v);
  // A ping answered after the stall was sent: the stall has reached b.
  self->request(remote, 5s, ping_atom_v).receive([] {}, [](caf::error&) {});
  b.tr->kill();
  caf::error err;
  pending.receive([] { FAIL() << "a stalled call cannot succeed"; }, [&](caf::error& e) { err = e; });
  EXPECT_TRUE(err == transport_errc::peer_failed) << error_text(err);
  EXPECT_NE(error_text(err).find("node 'b' failed before replying"), std::string::npos)
    << error_text(err);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  // Later calls fail at once: the node is no longer connected.
  self->request(remote, 5s, ping_atom_v).receive([] { FAIL(); }, [&](caf::error& e) { err = e; });
  EXPECT_TRUE(err == transport_errc::not_connected) << error_text(err);
  self->send_exit(local, caf::exit_reason::user_shutdown);
}

TEST_F(BridgeTest, ACallWithoutAReplyTimesOut) {
  node a(sys, fabric, "a", 200ms);
  node b(sys, fabric, "b", 5000ms);
  auto local = sys.spawn(worker);
  self->send(b.br->actor(), publish_atom_v, std::string{"worker"}, caf::actor_cast<caf::actor>(local));
  connect(a, "b", b);
  auto remote = remote_actor<worker_actor>(sys, a.br->actor(), "b", "worker");
  caf::error err;
  self->request(remote, 10s, stall_atom_v).receive([] { FAIL(); }, [&](caf::error& e) { err = e; });
  EXPECT_TRUE(err == transport_errc::timeout) << error_text(err);
  EXPECT_NE(error_text(err).find("actor 'worker' on node 'b' did not reply within 200 ms"),
            std::string::npos)
    << error_text(err);
  self->send_exit(local, caf::exit_reason::user_shutdown);
}

TEST_F(BridgeTest, TransfersBlocksIntoTheNodesRegion) {
  node a(sys, fabric, "a");
  node b(sys, fabric, "b");
  std::vector<std::byte> src(4096), dst(8192);
  for (size_t i = 0; i < src.size(); ++i)
    src[i] = static_cast<std::byte>(i * 7 + 1);
  auto src_region = a.br->register_region(src).value();
  auto dst_region = b.br->register_region(dst).value();
  connect(a, "b", b);
  transport::transfer_batch batch;
  batch.batch_id = 1;
  batch.blocks = {{src_region, 0, dst_region, 4096, 1024}, {src_region, 1024, dst_region, 0, 3072}};
  caf::error err;
  bool done = false;
  self->request(a.br->actor(), 5s, transfer_atom_v, std::string{"b"}, batch)
    .receive([&] { done = true; }, [&](caf::error& e) { err = e; });
  ASSERT_TRUE(done) << error_text(err);
  EXPECT_EQ(std::memcmp(dst.data() + 4096, src.data(), 1024), 0);
  EXPECT_EQ(std::memcmp(dst.data(), src.data() + 1024, 3072), 0);

  self->request(a.br->actor(), 5s, transfer_atom_v, std::string{"zz"}, batch)
    .receive([] { FAIL(); }, [&](caf::error& e) { err = e; });
  EXPECT_TRUE(err == transport_errc::not_connected);
}

TEST_F(BridgeTest, ActorsOfTheOwnNodeAreReachedTheSameWayWithoutTheWire) {
  node a(sys, fabric, "a");
  auto local = sys.spawn(worker);
  self->send(a.br->actor(), publish_atom_v, std::string{"worker"}, caf::actor_cast<caf::actor>(local));
  auto same = remote_actor<worker_actor>(sys, a.br->actor(), "a", "worker");
  wire::heartbeat got;
  self->request(same, 5s, echo_atom_v, beat(1))
    .receive([&](const wire::heartbeat& h) { got = h; }, [&](caf::error& e) { FAIL() << error_text(e); });
  EXPECT_EQ(got.sequence, 2u);
  for (uint64_t i = 0; i < 100; ++i) {
    wire::token_chunk c;
    c.id = i;
    self->send(same, note_atom_v, c);
  }
  self->request(same, 5s, count_atom_v)
    .receive([&](const wire::heartbeat& h) { got = h; }, [&](caf::error& e) { FAIL() << error_text(e); });
  EXPECT_EQ(got.sequence, 100u);
  EXPECT_EQ(got.load, 1.0f);
  caf::error err;
  auto ghost = remote_actor<worker_actor>(sys, a.br->actor(), "a", "ghost");
  self->request(ghost, 5s, ping_atom_v).receive([] { FAIL(); }, [&](caf::error& e) { err = e; });
  EXPECT_NE(error_text(err).find("node 'a' has no actor 'ghost'"), std::string::npos) << error_text(err);
  self->send_exit(local, caf::exit_reason::user_shutdown);
}

TEST_F(BridgeTest, TransfersBetweenTheOwnNodesRegionsAreCheckedCopies) {
  node a(sys, fabric, "a");
  std::vector<std::byte> src(1024, std::byte{7}), dst(1024);
  auto s_id = a.br->register_region(src).value();
  auto d_id = a.br->register_region(dst).value();
  transport::transfer_batch batch{1, {{s_id, 0, d_id, 512, 512}}};
  caf::error err;
  bool done = false;
  self->request(a.br->actor(), 5s, transfer_atom_v, std::string{"a"}, batch)
    .receive([&] { done = true; }, [&](caf::error& e) { err = e; });
  ASSERT_TRUE(done) << error_text(err);
  EXPECT_EQ(dst[512], std::byte{7});
  EXPECT_EQ(dst[511], std::byte{0});
  batch.blocks.push_back({s_id, 1000, d_id, 0, 100}); // past the end of src
  self->request(a.br->actor(), 5s, transfer_atom_v, std::string{"a"}, batch)
    .receive([] { FAIL(); }, [&](caf::error& e) { err = e; });
  EXPECT_TRUE(err == transport_errc::invalid_message);
  EXPECT_NE(error_text(err).find("block 1 of batch 1 lies outside"), std::string::npos) << error_text(err);
}

} // namespace
} // namespace tessera::actors
