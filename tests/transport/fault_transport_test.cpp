// The fault decorator over the loopback backend: each fault kind does
// exactly what the plan says (which operations, what the receiver sees,
// what the completion reports), the plan is deterministic for a seed, and
// the counters match what was observed.

#include "transport/faults/fault_transport.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <set>
#include <thread>

#include "tests/transport/transport_recorder.hpp"
#include "transport/loopback/loopback_transport.hpp"

namespace tessera::transport {
namespace {

using test::code;
using test::code_of;
using test::completion_log;
using test::drain;
using test::heartbeat_frame;
using test::recorder;
using test::sequence_of;


/// A: the decorator over a loopback; B: a plain loopback listening.
struct fault_fixture {
  std::shared_ptr<loopback_fabric> fabric = loopback_fabric::make();
  recorder ra, rb; // outlive the transports
  std::unique_ptr<loopback_transport> b;
  std::unique_ptr<fault_transport> a;
  peer_id a_to_b = 0;
  peer_id b_to_a = 0;

  explicit fault_fixture(const std::string& plan_text, fault_options opts = {}) {
    auto plan = fault_plan::parse(plan_text);
    EXPECT_TRUE(plan) << to_string(plan.error());
    b = std::make_unique<loopback_transport>(fabric);
    b->set_handler(&rb);
    a = std::make_unique<fault_transport>(std::make_unique<loopback_transport>(fabric), *plan,
                                          std::move(opts));
    a->set_handler(&ra);
    auto addr = b->listen("b:0");
    EXPECT_TRUE(addr);
    auto p = a->connect(*addr);
    EXPECT_TRUE(p);
    a_to_b = *p;
    EXPECT_TRUE(rb.wait([&] { return !rb.connected.empty(); }));
    b_to_a = rb.connected.at(0).first;
  }

  /// Sends heartbeats seq = 1..n from A to B; waits for every completion.
  void send_numbered(uint64_t n, completion_log& done) {
    for (uint64_t i = 1; i <= n; ++i)
      a->send(a_to_b, message{"w", heartbeat_frame(i)}, done.make(i));
    ASSERT_TRUE(done.wait_for_count(n));
  }

  /// Sequences B received, in arrival order (-1: did not decode).
  std::vector<int64_t> received() {
    drain(*b);
    std::lock_guard lock{rb.mu};
    std::vector<int64_t> out;
    for (const auto& [from, m] : rb.messages)
      out.push_back(sequence_of(m.frame));
    return out;
  }
};

std::vector<uint64_t> op_indices(const std::vector<fault_event>& h) {
  std::vector<uint64_t> out;
  for (const auto& e : h)
    out.push_back(e.op_index);
  return out;
}

TEST(FaultTransportTest, DropsExactlyEveryThirdSendAndReportsSuccess) {
  fault_fixture f{"seed=1; drop,op=send,every=3"};
  EXPECT_EQ(f.a->caps().backend, "faults(loopback)");
  completion_log done;
  f.send_numbered(30, done);
  std::vector<int64_t> expected;
  for (int64_t i = 1; i <= 30; ++i)
    if (i % 3 != 0)
      expected.push_back(i);
  ASSERT_TRUE(f.rb.wait([&] { return f.rb.messages.size() >= expected.size(); }));
  EXPECT_EQ(f.received(), expected);
  for (uint64_t i = 1; i <= 30; ++i)
    EXPECT_FALSE(done.of(i).at(0)) << i; // a lossy network: the send "succeeded"
  auto c = f.a->counters();
  EXPECT_EQ(c.operations, 30u);
  EXPECT_EQ(c.of(fault_kind::drop), 10u);
  EXPECT_EQ(op_indices(f.a->history()),
            (std::vector<uint64_t>{3, 6, 9, 12, 15, 18, 21, 24, 27, 30}));
}

TEST(FaultTransportTest, DuplicatesExactlyThePlannedMessages) {
  fault_fixture f{"duplicate,every=4"};
  completion_log done;
  f.send_numbered(20, done);
  std::vector<int64_t> expected;
  for (int64_t i = 1; i <= 20; ++i) {
    expected.push_back(i);
    if (i % 4 == 0)
      expected.push_back(i);
  }
  ASSERT_TRUE(f.rb.wait([&] { return f.rb.messages.size() >= expected.size(); }));
  EXPECT_EQ(f.received(), expected);
  for (uint64_t i = 1; i <= 20; ++i) {
    ASSERT_EQ(done.of(i).size(), 1u) << "completion of " << i << " ran more than once";
    EXPECT_FALSE(done.of(i)[0]);
  }
  EXPECT_EQ(f.a->counters().of(fault_kind::duplicate), 5u);
}

TEST(FaultTransportTest, ReorderSwapsPairsAndFlushReleasesTheLastHeld) {
  fault_fixture f{"reorder,every=2"};
  completion_log done;
  for (uint64_t i = 1; i <= 10; ++i)
    f.a->send(f.a_to_b, message{"w", heartbeat_frame(i)}, done.make(i));
  // 10 is held until flushed.
  ASSERT_TRUE(done.wait_for_count(9));
  ASSERT_TRUE(f.rb.wait([&] { return f.rb.messages.size() >= 9; }));
  EXPECT_EQ(f.received(), (std::vector<int64_t>{1, 3, 2, 5, 4, 7, 6, 9, 8}));
  EXPECT_TRUE(done.of(10).empty());
  f.a->flush();
  ASSERT_TRUE(done.wait_for_count(10));
  ASSERT_TRUE(f.rb.wait([&] { return f.rb.messages.size() >= 10; }));
  EXPECT_EQ(f.received().back(), 10);
  EXPECT_EQ(f.a->counters().of(fault_kind::reorder), 5u);
}

TEST(FaultTransportTest, CorruptedFramesAreExactlyTheOnesTheDecoderRejects) {
  fault_fixture f{"seed=7; corrupt,op=send,every=5"};
  completion_log done;
  f.send_numbered(50, done);
  ASSERT_TRUE(f.rb.wait([&] { return f.rb.messages.size() >= 50; }));
  drain(*f.b);
  std::lock_guard lock{f.rb.mu};
  ASSERT_EQ(f.rb.messages.size(), 50u);
  for (size_t k = 0; k < 50; ++k) {
    auto seq = k + 1;
    auto decoded = wire::decode(f.rb.messages[k].second.frame);
    if (seq % 5 == 0) {
      ASSERT_FALSE(decoded) << "corrupted frame " << seq << " decoded";
      auto c = code_of(decoded.error());
      EXPECT_TRUE(c == code(transport_errc::checksum_mismatch) ||
                  c == code(transport_errc::bad_frame))
        << to_string(decoded.error());
      // Exactly one byte differs from the frame that was sent.
      auto original = heartbeat_frame(seq);
      const auto& got = f.rb.messages[k].second.frame;
      ASSERT_EQ(got.size(), original.size());
      size_t diffs = 0;
      for (size_t i = 0; i < got.size(); ++i)
        diffs += got[i] != original[i];
      EXPECT_EQ(diffs, 1u) << "frame " << seq;
    } else {
      ASSERT_TRUE(decoded) << "frame " << seq << ": " << to_string(decoded.error());
    }
  }
  EXPECT_EQ(f.a->counters().of(fault_kind::corrupt), 10u);
}

TEST(FaultTransportTest, FailEveryNthCompletesExactlyThoseWithTheError) {
  fault_fixture f{"fail,op=send,every=4,err=peer_failed"};
  completion_log done;
  f.send_numbered(12, done);
  for (uint64_t i = 1; i <= 12; ++i) {
    auto err = done.of(i).at(0);
    if (i % 4 == 0) {
      EXPECT_EQ(code_of(err), code(transport_errc::peer_failed)) << i;
      EXPECT_NE(to_string(err).find("injected"), std::string::npos) << to_string(err);
    } else {
      EXPECT_FALSE(err) << i << ": " << to_string(err);
    }
  }
  ASSERT_TRUE(f.rb.wait([&] { return f.rb.messages.size() >= 9; }));
  EXPECT_EQ(f.received(), (std::vector<int64_t>{1, 2, 3, 5, 6, 7, 9, 10, 11}));
  EXPECT_EQ(f.a->counters().of(fault_kind::fail), 3u);
}

TEST(FaultTransportTest, DelayedMessagesArriveNoEarlierThanTheDelay) {
  fault_fixture f{"delay,op=send,every=2,ms=40"};
  completion_log done;
  auto sent_at = std::chrono::steady_clock::now();
  f.send_numbered(10, done);
  ASSERT_TRUE(f.rb.wait([&] { return f.rb.messages.size() >= 10; }));
  auto got = f.received();
  std::multiset<int64_t> all(got.begin(), got.end());
  EXPECT_EQ(all, (std::multiset<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
  // The undelayed ones keep their order among themselves.
  std::vector<int64_t> odd;
  for (auto s : got)
    if (s % 2 != 0)
      odd.push_back(s);
  EXPECT_EQ(odd, (std::vector<int64_t>{1, 3, 5, 7, 9}));
  std::lock_guard lock{f.rb.mu};
  for (size_t k = 0; k < got.size(); ++k) {
    if (got[k] % 2 == 0) {
      EXPECT_GE(f.rb.arrivals[k] - sent_at, std::chrono::milliseconds{40}) << got[k];
    }
  }
  for (uint64_t i = 1; i <= 10; ++i)
    EXPECT_FALSE(done.of(i).at(0));
  EXPECT_EQ(f.a->counters().of(fault_kind::delay), 5u);
}

TEST(FaultTransportTest, PartitionFromOperationNRefusesBothWaysUntilHealed) {
  fault_fixture f{"partition,peer=1,from=3,limit=1"};
  ASSERT_EQ(f.a_to_b, 1u); // the plan names the peer by id
  completion_log done;
  f.send_numbered(5, done);
  EXPECT_FALSE(done.of(1).at(0));
  EXPECT_FALSE(done.of(2).at(0));
  for (uint64_t i = 3; i <= 5; ++i)
    EXPECT_EQ(code_of(done.of(i).at(0)), code(transport_errc::peer_unreachable)) << i;
  EXPECT_TRUE(f.a->partitioned(f.a_to_b));
  // B -> A is cut as well: B's send "succeeds", A never sees it.
  completion_log back;
  f.b->send(f.b_to_a, message{"w", heartbeat_frame(100)}, back.make(0));
  ASSERT_TRUE(back.wait_for_count(1));
  drain(f.a->inner()); // the inner transport has handed 100 to the relay
  f.a->heal(f.a_to_b);
  EXPECT_FALSE(f.a->partitioned(f.a_to_b));
  f.b->send(f.b_to_a, message{"w", heartbeat_frame(101)}, back.make(1));
  f.a->send(f.a_to_b, message{"w", heartbeat_frame(6)}, done.make(6));
  ASSERT_TRUE(done.wait_for_count(6));
  EXPECT_FALSE(done.of(6).at(0));
  ASSERT_TRUE(f.ra.wait([&] { return !f.ra.messages.empty(); }));
  ASSERT_TRUE(f.rb.wait([&] { return f.rb.messages.size() >= 3; }));
  EXPECT_EQ(f.received(), (std::vector<int64_t>{1, 2, 6}));
  {
    std::lock_guard lock{f.ra.mu};
    ASSERT_EQ(f.ra.messages.size(), 1u);
    EXPECT_EQ(sequence_of(f.ra.messages[0].second.frame), 101);
  }
  EXPECT_EQ(f.a->counters().of(fault_kind::partition), 3u);
  // The manual API.
  f.a->partition(f.a_to_b);
  f.a->send(f.a_to_b, message{"w", heartbeat_frame(7)}, done.make(7));
  ASSERT_TRUE(done.wait_for_count(7));
  EXPECT_EQ(code_of(done.of(7).at(0)), code(transport_errc::peer_unreachable));
}

TEST(FaultTransportTest, PeerFilterLimitsARuleToOnePeer) {
  fault_fixture f{"drop,peer=2"};
  recorder rc;
  loopback_transport c{f.fabric};
  c.set_handler(&rc);
  auto addr = c.listen("c:0");
  ASSERT_TRUE(addr);
  auto to_c = f.a->connect(*addr);
  ASSERT_TRUE(to_c);
  ASSERT_EQ(*to_c, 2u);
  completion_log done;
  for (uint64_t i = 1; i <= 10; ++i) {
    f.a->send(f.a_to_b, message{"w", heartbeat_frame(i)}, done.make(2 * i));
    f.a->send(*to_c, message{"w", heartbeat_frame(i)}, done.make(2 * i + 1));
  }
  ASSERT_TRUE(done.wait_for_count(20));
  ASSERT_TRUE(f.rb.wait([&] { return f.rb.messages.size() >= 10; }));
  drain(c);
  EXPECT_EQ(rc.message_count(), 0u);
  EXPECT_EQ(f.a->counters().of(fault_kind::drop), 10u);
}

TEST(FaultTransportTest, ARuleNamesItsPeerByIdentityAndSetPlanReplacesTheRulesAndHeals) {
  auto fabric = loopback_fabric::make();
  recorder rb, rc, ra;
  auto with_identity = [](const char* id) {
    transport_options o;
    o.identity = id;
    return o;
  };
  loopback_transport b{fabric, with_identity("decode-b")};
  loopback_transport c{fabric, with_identity("decode-c")};
  b.set_handler(&rb);
  c.set_handler(&rc);
  auto plan = fault_plan::parse("partition,peer=decode-b");
  ASSERT_TRUE(plan) << to_string(plan.error());
  EXPECT_EQ(plan->rules[0].peer_name, "decode-b");
  EXPECT_EQ(fault_plan::parse(plan->to_string())->rules[0].peer_name, "decode-b");
  fault_transport a{std::make_unique<loopback_transport>(fabric, with_identity("front")), *plan};
  a.set_handler(&ra);
  auto to_b = a.connect(*b.listen("b:0"));
  auto to_c = a.connect(*c.listen("c:0"));
  ASSERT_TRUE(to_b && to_c);
  EXPECT_EQ(a.peer_identity(*to_b), "decode-b");
  completion_log done;
  a.send(*to_b, message{"w", heartbeat_frame(1)}, done.make(1));
  a.send(*to_c, message{"w", heartbeat_frame(2)}, done.make(2));
  ASSERT_TRUE(done.wait_for_count(2));
  EXPECT_EQ(code_of(done.of(1).at(0)), code(transport_errc::peer_unreachable)) << "decode-b is cut off";
  EXPECT_FALSE(done.of(2).at(0)) << "decode-c is not";
  EXPECT_TRUE(a.partitioned(*to_b));
  // A harness replaces the plan at run time: the partition heals and the
  // new rule drops what goes to decode-c.
  a.set_plan(*fault_plan::parse("seed=3; drop,peer=decode-c"));
  EXPECT_FALSE(a.partitioned(*to_b));
  EXPECT_NE(a.plan().to_string().find("peer=decode-c"), std::string::npos) << a.plan().to_string();
  a.send(*to_b, message{"w", heartbeat_frame(3)}, done.make(3));
  a.send(*to_c, message{"w", heartbeat_frame(4)}, done.make(4));
  ASSERT_TRUE(done.wait_for_count(4));
  EXPECT_FALSE(done.of(3).at(0));
  EXPECT_FALSE(done.of(4).at(0)) << "a drop reports success";
  ASSERT_TRUE(rb.wait([&] { return rb.messages.size() >= 1; })); // wait() holds rb.mu
  drain(c);
  EXPECT_EQ(rc.message_count(), 1u) << "only message 2 reached decode-c";
  // An empty plan injects nothing.
  a.set_plan({});
  a.send(*to_c, message{"w", heartbeat_frame(5)}, done.make(5));
  ASSERT_TRUE(done.wait_for_count(5));
  ASSERT_TRUE(rc.wait([&] { return rc.messages.size() >= 2; }));
}

TEST(FaultTransportTest, AllocatedRegionsAreForwardedAndCorruptibleLikeRegisteredOnes) {
  fault_fixture f{"corrupt,op=transfer,every=2"};
  constexpr size_t block = 1024;
  auto s = f.a->allocate_region(block);
  auto d = f.b->allocate_region(2 * block);
  ASSERT_TRUE(s) << to_string(s.error());
  ASSERT_TRUE(d) << to_string(d.error());
  ASSERT_EQ(s->memory.size(), block);
  for (size_t i = 0; i < block; ++i)
    s->memory[i] = static_cast<std::byte>(i * 13 + 1);
  const std::vector<std::byte> want(s->memory.begin(), s->memory.end());
  completion_log done;
  // Transfer 1 goes through untouched; transfer 2 is corrupted in flight.
  f.a->transfer(f.a_to_b, transfer_batch{1, {{s->id, 0, d->id, 0, block}}}, done.make(1));
  f.a->transfer(f.a_to_b, transfer_batch{2, {{s->id, 0, d->id, block, block}}}, done.make(2));
  ASSERT_TRUE(done.wait_for_count(2));
  drain(*f.b);
  EXPECT_TRUE(std::equal(want.begin(), want.end(), d->memory.begin()));
  EXPECT_FALSE(std::equal(want.begin(), want.end(), d->memory.begin() + block));
  EXPECT_TRUE(std::equal(want.begin(), want.end(), s->memory.begin()))
    << "the source region was modified";
}

TEST(FaultTransportTest, TransferFaultsDropFailAndCorruptAtTheDestinationOnly) {
  fault_fixture f{"seed=3; drop,op=transfer,every=4; fail,op=transfer,every=3; "
                  "corrupt,op=transfer,every=2"};
  constexpr size_t block = 256;
  constexpr size_t n = 12;
  std::vector<std::byte> src(block * n);
  for (size_t i = 0; i < src.size(); ++i)
    src[i] = static_cast<std::byte>(i * 31 + 7);
  auto src_copy = src;
  std::vector<std::byte> dst(block * n * 2, std::byte{0});
  auto s = f.a->register_region(src);
  auto d = f.b->register_region(dst);
  ASSERT_TRUE(s && d);
  completion_log done;
  // Batch i: block i -> dst slot 2i, and a second block i -> slot 2i+1.
  for (uint64_t i = 1; i <= n; ++i) {
    uint64_t off = (i - 1) * block;
    f.a->transfer(f.a_to_b,
                  transfer_batch{i, {{*s, off, *d, 2 * off, block}, {*s, off, *d, 2 * off + block, block}}},
                  done.make(i));
  }
  ASSERT_TRUE(done.wait_for_count(n));
  drain(*f.b);
  EXPECT_EQ(src, src_copy) << "the source region was modified";
  std::set<uint64_t> arrived;
  {
    std::lock_guard lock{f.rb.mu};
    for (const auto& [from, batch] : f.rb.batches)
      arrived.insert(batch.batch_id);
  }
  // First firing rule wins: 4, 8, 12 drop; 3, 6, 9 fail; 2, 10 corrupt.
  for (uint64_t i = 1; i <= n; ++i) {
    auto err = done.of(i).at(0);
    uint64_t off = (i - 1) * block;
    auto first = std::span{dst}.subspan(2 * off, block);
    auto second = std::span{dst}.subspan(2 * off + block, block);
    auto want = std::span{src_copy}.subspan(off, block);
    auto diffs = [&](std::span<std::byte> got) {
      size_t n_diff = 0;
      for (size_t k = 0; k < block; ++k)
        n_diff += got[k] != want[k];
      return n_diff;
    };
    if (i % 4 == 0) {
      EXPECT_EQ(code_of(err), code(transport_errc::timeout)) << i;
      EXPECT_EQ(arrived.count(i), 0u) << i;
    } else if (i % 3 == 0) {
      EXPECT_EQ(code_of(err), code(transport_errc::injected_fault)) << i;
      EXPECT_EQ(arrived.count(i), 0u) << i;
    } else if (i % 2 == 0) {
      EXPECT_FALSE(err) << i;
      EXPECT_EQ(arrived.count(i), 1u) << i;
      EXPECT_EQ(diffs(first), 1u) << "batch " << i << ": exactly one byte flipped";
      EXPECT_EQ(diffs(second), 0u) << "batch " << i;
    } else {
      EXPECT_FALSE(err) << i;
      EXPECT_EQ(arrived.count(i), 1u) << i;
      EXPECT_EQ(diffs(first), 0u) << i;
      EXPECT_EQ(diffs(second), 0u) << i;
    }
  }
  auto c = f.a->counters();
  EXPECT_EQ(c.of(fault_kind::drop), 3u);
  EXPECT_EQ(c.of(fault_kind::fail), 3u);
  EXPECT_EQ(c.of(fault_kind::corrupt), 2u);
}

/// Runs `plan` over 200 sends; returns the fault history and what B got.
std::pair<std::vector<fault_event>, std::vector<int64_t>> run_plan(const std::string& plan) {
  fault_fixture f{plan};
  completion_log done;
  for (uint64_t i = 1; i <= 200; ++i)
    f.a->send(f.a_to_b, message{"w", heartbeat_frame(i)}, done.make(i));
  f.a->flush(); // a held (reordered) last send completes only when released
  EXPECT_TRUE(done.wait_for_count(200));
  auto history = f.a->history();
  size_t expected = 200;
  for (const auto& e : history) {
    if (e.kind == fault_kind::drop)
      --expected;
    if (e.kind == fault_kind::duplicate)
      ++expected;
  }
  EXPECT_TRUE(f.rb.wait([&] { return f.rb.messages.size() >= expected; }));
  auto got = f.received();
  EXPECT_EQ(got.size(), expected);
  auto c = f.a->counters();
  for (size_t k = 0; k < fault_kind_count; ++k) {
    uint64_t n = 0;
    for (const auto& e : history)
      n += static_cast<size_t>(e.kind) == k;
    EXPECT_EQ(c.injected[k], n) << to_string(static_cast<fault_kind>(k));
  }
  return {history, got};
}

TEST(FaultTransportTest, SameSeedAndPlanGiveTheSameFaultsDifferentSeedDifferent) {
  const std::string rules = "; drop,p=0.2; duplicate,p=0.1; corrupt,p=0.1; reorder,p=0.1";
  auto first = run_plan("seed=42" + rules);
  auto second = run_plan("seed=42" + rules);
  auto other = run_plan("seed=43" + rules);
  EXPECT_GT(first.first.size(), 20u);
  EXPECT_EQ(first.first, second.first);
  EXPECT_EQ(first.second, second.second);
  EXPECT_NE(first.first, other.first);
}

TEST(FaultTransportTest, PlanTextParsesRoundTripsAndRejectsMistakesByName) {
  auto plan = fault_plan::parse(
    "seed=9; delay,op=send,every=2,ms=25; partition,peer=3,from=10,limit=1; "
    "fail,op=transfer,p=0.5,err=timeout,after_ms=100");
  ASSERT_TRUE(plan) << to_string(plan.error());
  EXPECT_EQ(plan->seed, 9u);
  ASSERT_EQ(plan->rules.size(), 3u);
  EXPECT_EQ(plan->rules[0].kind, fault_kind::delay);
  EXPECT_EQ(plan->rules[0].delay, std::chrono::milliseconds{25});
  EXPECT_EQ(plan->rules[1].peer, peer_id{3});
  EXPECT_EQ(plan->rules[1].from, 10u);
  EXPECT_EQ(plan->rules[2].error, transport_errc::timeout);
  EXPECT_EQ(plan->rules[2].probability, 0.5);
  EXPECT_EQ(plan->rules[2].after, std::chrono::milliseconds{100});
  auto again = fault_plan::parse(plan->to_string());
  ASSERT_TRUE(again);
  EXPECT_EQ(again->to_string(), plan->to_string());
  for (const char* bad : {"explode", "drop,every=x", "drop,p=1.5", "drop,colour=red",
                          "drop;fail,err=nope", "seed=abc", "drop,every"}) {
    auto r = fault_plan::parse(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(code_of(r.error()), code(transport_errc::invalid_message)) << bad;
  }
  auto r = fault_plan::parse("drop; fail,colour=red");
  ASSERT_FALSE(r);
  EXPECT_NE(to_string(r.error()).find("rule 1"), std::string::npos) << to_string(r.error());
  EXPECT_NE(to_string(r.error()).find("colour"), std::string::npos) << to_string(r.error());
}

TEST(FaultTransportTest, RulesStartAfterTheirTimeOnTheInjectedClock) {
  auto now = std::make_shared<std::atomic<int64_t>>(0);
  fault_options opts;
  opts.clock = [now] { return std::chrono::steady_clock::time_point{} + std::chrono::milliseconds{now->load()}; };
  fault_fixture f{"fail,after_ms=500", opts};
  completion_log done;
  f.a->send(f.a_to_b, message{"w", heartbeat_frame(1)}, done.make(1));
  now->store(499);
  f.a->send(f.a_to_b, message{"w", heartbeat_frame(2)}, done.make(2));
  now->store(500);
  f.a->send(f.a_to_b, message{"w", heartbeat_frame(3)}, done.make(3));
  ASSERT_TRUE(done.wait_for_count(3));
  EXPECT_FALSE(done.of(1).at(0));
  EXPECT_FALSE(done.of(2).at(0));
  EXPECT_EQ(code_of(done.of(3).at(0)), code(transport_errc::injected_fault));
}

TEST(FaultTransportTest, DestroyingWithDelayedAndHeldOperationsCompletesThemWithClosed) {
  completion_log done;
  {
    // 2 and 4 are delayed by 10 minutes; 3 is held and released by 4; 6 is
    // held at the end.
    fault_fixture f{"reorder,op=send,every=3; delay,op=send,every=2,ms=600000"};
    for (uint64_t i = 1; i <= 6; ++i)
      f.a->send(f.a_to_b, message{"w", heartbeat_frame(i)}, done.make(i));
    f.a.reset(); // must not wait for the 10-minute delays
  }
  ASSERT_EQ(done.count(), 6u);
  for (uint64_t i = 1; i <= 6; ++i) {
    ASSERT_EQ(done.of(i).size(), 1u) << i;
    auto c = code_of(done.of(i)[0]);
    if (i == 2 || i == 4 || i == 6)
      EXPECT_EQ(c, code(transport_errc::closed)) << i;
    else
      EXPECT_TRUE(c == 0 || c == code(transport_errc::closed)) << i;
  }
}

TEST(FaultTransportTest, EventsFromTheInnerTransportReachTheUser) {
  fault_fixture f{""};
  f.b->send(f.b_to_a, message{"w", heartbeat_frame(5)}, {});
  ASSERT_TRUE(f.ra.wait([&] { return f.ra.messages.size() == 1; }));
  f.b->kill();
  ASSERT_TRUE(f.ra.wait([&] { return f.ra.failed.size() == 1; }));
  std::lock_guard lock{f.ra.mu};
  EXPECT_EQ(code_of(f.ra.failed[0].second), code(transport_errc::peer_failed));
  EXPECT_EQ(f.ra.overlaps.load(), 0);
}

TEST(FaultTransportTest, ConcurrentSendersGetEveryCompletionExactlyOnce) {
  fault_fixture f{"seed=5; drop,p=0.1; duplicate,p=0.1; reorder,p=0.2; "
                  "delay,p=0.05,ms=1; fail,p=0.05"};
  constexpr uint64_t threads = 4;
  constexpr uint64_t per_thread = 500;
  completion_log done;
  std::vector<std::thread> senders;
  for (uint64_t t = 0; t < threads; ++t)
    senders.emplace_back([&, t] {
      for (uint64_t i = 0; i < per_thread; ++i) {
        uint64_t id = t * per_thread + i + 1;
        f.a->send(f.a_to_b, message{"w", heartbeat_frame(id)}, done.make(id));
      }
    });
  for (auto& s : senders)
    s.join();
  f.a->flush();
  ASSERT_TRUE(done.wait_for_count(threads * per_thread));
  auto c = f.a->counters();
  EXPECT_EQ(c.operations, threads * per_thread);
  uint64_t expected = threads * per_thread - c.of(fault_kind::drop) - c.of(fault_kind::fail) +
                      c.of(fault_kind::duplicate);
  ASSERT_TRUE(f.rb.wait([&] { return f.rb.messages.size() >= expected; }));
  EXPECT_EQ(f.received().size(), expected);
  uint64_t failed = 0;
  for (const auto& [id, results] : done.all()) {
    ASSERT_EQ(results.size(), 1u) << "operation " << id;
    failed += results[0] ? 1 : 0;
  }
  EXPECT_EQ(failed, c.of(fault_kind::fail));
  EXPECT_EQ(f.ra.overlaps.load(), 0);
}

} // namespace
} // namespace tessera::transport
