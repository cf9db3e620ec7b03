// The bridge against a rogue peer that holds the cluster secret (an
// insider, or a node restarted with a stale id) over real UCX transports
// on loopback: it cannot claim another node's id, cannot take over a
// connected node's id, cannot call any actor before its hello, and 10,000
// bad frames leave the node serving. Each refusal is counted in
// tessera_wire_rejected_peers_total{reason}, and the legitimate node keeps
// its mapping and its calls.

#include "actors/bridge/bridge_actor.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "actors/bridge/remote_actor.hpp"
#include "cluster/metrics.hpp"
#include "common/error.hpp"
#include "tests/transport/transport_recorder.hpp"
#include "transport/ucx/ucx_transport.hpp"
#include "transport/wire/codec.hpp"

namespace tessera::actors {
namespace {

using namespace std::chrono_literals;
namespace wire = transport::wire;
using transport::test::recorder;

using echo_atom = caf::atom_constant<caf::atom("echo")>;
constexpr echo_atom echo_atom_v{};
using note_atom = caf::atom_constant<caf::atom("note")>;
constexpr note_atom note_atom_v{};
using count_atom = caf::atom_constant<caf::atom("count")>;
constexpr count_atom count_atom_v{};

/// A published actor: echoes, and counts the one-way notes it got.
using target_actor = caf::typed_actor<caf::replies_to<echo_atom, wire::heartbeat>::with<wire::heartbeat>,
                                      caf::reacts_to<note_atom, wire::token_chunk>,
                                      caf::replies_to<count_atom>::with<wire::heartbeat>>;

struct target_state {
  uint64_t notes = 0;
};

target_actor::behavior_type target(target_actor::stateful_pointer<target_state> self) {
  return {
    [](echo_atom, wire::heartbeat h) {
      h.node_id = "echo:" + h.node_id;
      return h;
    },
    [self](note_atom, const wire::token_chunk&) { ++self->state.notes; },
    [self](count_atom) {
      wire::heartbeat h;
      h.sequence = self->state.notes;
      return h;
    },
  };
}

const std::string secret = "bridge-test-cluster-secret-0123456789";

std::unique_ptr<transport::ucx_transport> make_transport(const std::string& id) {
  transport::transport_options o;
  o.peer_timeout = 2000ms;
  o.cluster_secret = secret;
  o.identity = id;
  o.grants_only = true;
  transport::ucx_options u;
  u.net_address = "127.0.0.1";
  auto t = transport::ucx_transport::make(o, u);
  EXPECT_TRUE(t) << (t ? std::string{} : error_text(t.error()));
  return t ? std::move(*t) : nullptr;
}

std::vector<std::byte> frame(const wire::wire_message& m) {
  auto f = wire::encode(m);
  EXPECT_TRUE(f) << (f ? std::string{} : error_text(f.error()));
  return f ? std::move(*f) : std::vector<std::byte>{};
}

/// An envelope from the rogue: `op` on `to`, carrying `arg`.
transport::message envelope(const std::string& to, wire::envelope_kind kind, uint64_t id,
                            const std::string& op, const wire::wire_message& arg) {
  return {to, frame(wire::envelope{kind, id, op, frame(arg)})};
}

wire::wire_message hello(const std::string& node) {
  wire::membership m;
  m.node_id = node;
  return m;
}

class BridgeSecurityTest : public ::testing::Test {
protected:
  BridgeSecurityTest() : sys(cfg), self(sys) {
    auto p = std::make_shared<bridge_protocol>();
    p->add<target_actor>();
    protocol = p;
    metrics = std::make_shared<cluster::metrics_registry>();
    front = std::make_unique<bridge>(sys, make_transport("front"),
                                     bridge_config{"front", protocol, 5000ms, {}, metrics});
    front_address = front->transport().listen("127.0.0.1:0").value();
    front_target = sys.spawn(target);
    caf::anon_send(front->actor(), publish_atom_v, std::string{"target"},
                   caf::actor_cast<caf::actor>(front_target));
    decode = std::make_unique<bridge>(sys, make_transport("decode"),
                                      bridge_config{"decode", protocol, 5000ms, {}, nullptr});
    decode_target = sys.spawn(target);
    caf::anon_send(decode->actor(), publish_atom_v, std::string{"target"},
                   caf::actor_cast<caf::actor>(decode_target));
    caf::error err;
    self->request(decode->actor(), 10s, connect_atom_v, std::string{"front"}, front_address)
      .receive([] {}, [&](caf::error& e) { err = e; });
    EXPECT_FALSE(err) << error_text(err);
  }

  ~BridgeSecurityTest() override {
    rogue.reset();
    decode.reset();
    front.reset();
    self->send_exit(front_target, caf::exit_reason::user_shutdown);
    self->send_exit(decode_target, caf::exit_reason::user_shutdown);
  }

  /// A rogue transport with the secret, proving `id`, connected to front.
  transport::peer_id connect_rogue(const std::string& id) {
    rogue = make_transport(id);
    rogue->set_handler(&rogue_events);
    auto p = rogue->connect(front_address);
    EXPECT_TRUE(p) << (p ? std::string{} : error_text(p.error()));
    return p ? *p : 0;
  }

  /// The node names front knows.
  std::vector<std::string> front_peers() {
    std::vector<std::string> out;
    self->request(front->actor(), 5s, peers_atom_v)
      .receive([&](std::vector<std::string>& v) { out = v; }, [](caf::error&) {});
    return out;
  }

  /// Front calls decode's target through the bridge: the legitimate
  /// mapping still works.
  void expect_front_reaches_decode() {
    auto proxy = remote_actor<target_actor>(sys, front->actor(), "decode", "target");
    wire::heartbeat h;
    h.node_id = "x";
    std::string got;
    self->request(proxy, 10s, echo_atom_v, h)
      .receive([&](wire::heartbeat& r) { got = r.node_id; },
               [&](caf::error& e) { got = "error: " + error_text(e); });
    EXPECT_EQ(got, "echo:x");
  }

  /// Waits until front exported `n` refusals with `reason`.
  bool wait_counted(const std::string& reason, double n) {
    const auto until = std::chrono::steady_clock::now() + 20s;
    const std::string series = "tessera_wire_rejected_peers_total{reason=\"" + reason + "\"} ";
    while (std::chrono::steady_clock::now() < until) {
      auto text = metrics->render();
      auto at = text.find(series);
      if (at != std::string::npos && std::stod(text.substr(at + series.size())) >= n)
        return true;
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }

  uint64_t notes_of(const target_actor& t) {
    uint64_t n = 0;
    self->request(t, 5s, count_atom_v).receive([&](wire::heartbeat& h) { n = h.sequence; },
                                              [](caf::error&) {});
    return n;
  }

  caf::actor_system_config cfg;
  caf::actor_system sys;
  caf::scoped_actor self;
  std::shared_ptr<const bridge_protocol> protocol;
  std::shared_ptr<cluster::metrics_registry> metrics;
  std::unique_ptr<bridge> front, decode;
  std::string front_address;
  target_actor front_target, decode_target;
  recorder rogue_events; // outlives `rogue`
  std::unique_ptr<transport::ucx_transport> rogue;
};

TEST_F(BridgeSecurityTest, AHelloNamingAnotherNodeThanTheOneProvedIsRefused) {
  auto p = connect_rogue("prefill");
  rogue->send(p, envelope("bridge", wire::envelope_kind::request, 1, "hello", hello("decode")), {});
  EXPECT_TRUE(rogue_events.wait([&] { return !rogue_events.failed.empty(); }))
    << "the front disconnects the impostor";
  EXPECT_TRUE(wait_counted("impersonation", 1));
  EXPECT_EQ(front_peers(), std::vector<std::string>{"decode"});
  expect_front_reaches_decode();
}

TEST_F(BridgeSecurityTest, ASecondPeerClaimingAConnectedNodesIdIsRefusedAndNothingIsRemapped) {
  auto p = connect_rogue("decode");
  rogue->send(p, envelope("bridge", wire::envelope_kind::request, 1, "hello", hello("decode")), {});
  EXPECT_TRUE(rogue_events.wait([&] { return !rogue_events.failed.empty(); }));
  EXPECT_TRUE(wait_counted("duplicate_node", 1));
  EXPECT_EQ(front_peers(), std::vector<std::string>{"decode"});
  // The calls for decode still go to the real decode node, not the rogue.
  expect_front_reaches_decode();
  std::lock_guard lock{rogue_events.mu};
  for (const auto& [from, msg] : rogue_events.messages) {
    auto m = wire::decode(msg.frame);
    auto* env = m ? std::get_if<wire::envelope>(&*m) : nullptr;
    EXPECT_TRUE(env == nullptr || env->kind != wire::envelope_kind::request)
      << "the rogue received a call meant for decode: " << (env ? env->operation : "");
  }
}

TEST_F(BridgeSecurityTest, CallsBeforeHelloReachNoActor) {
  auto p = connect_rogue("stray");
  wire::token_chunk c;
  c.id = 1;
  for (int i = 0; i < 5; ++i)
    rogue->send(p, envelope("target", wire::envelope_kind::tell, 0, "note", c), {});
  wire::heartbeat h;
  h.node_id = "stray";
  rogue->send(p, envelope("target", wire::envelope_kind::request, 9, "echo", h), {});
  EXPECT_TRUE(rogue_events.wait([&] { return !rogue_events.failed.empty(); }));
  EXPECT_TRUE(wait_counted("before_hello", 1));
  EXPECT_EQ(notes_of(front_target), 0u);
  EXPECT_EQ(front_peers(), std::vector<std::string>{"decode"});
  expect_front_reaches_decode();
}

TEST_F(BridgeSecurityTest, TenThousandBadFramesLeaveTheNodeServing) {
  auto p = connect_rogue("noisy");
  // A proper join first: the frames come from a member.
  rogue->send(p, envelope("bridge", wire::envelope_kind::request, 1, "hello", hello("noisy")), {});
  ASSERT_TRUE(rogue_events.wait([&] { return !rogue_events.messages.empty(); }));
  std::vector<std::byte> junk(200);
  for (size_t i = 0; i < junk.size(); ++i)
    junk[i] = static_cast<std::byte>(i * 37 + 11);
  transport::test::completion_log log;
  for (uint64_t i = 0; i < 10000; ++i) {
    junk[0] = static_cast<std::byte>(i);
    rogue->send(p, {"target", junk}, i + 1 == 10000 ? log.make(0) : transport::completion{});
  }
  ASSERT_TRUE(log.wait_for_count(1));
  EXPECT_EQ(notes_of(front_target), 0u);
  expect_front_reaches_decode();
  auto peers = front_peers();
  EXPECT_EQ(peers, (std::vector<std::string>{"decode", "noisy"}));
}

} // namespace
} // namespace tessera::actors
