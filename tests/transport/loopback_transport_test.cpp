// The loopback backend: connection set-up, ordered control messages,
// bit-exact block copies into registered memory with bounds checks, peer
// failure (disconnect, destruction, kill), reconnection, and shutdown with
// operations in flight.

#include "transport/loopback/loopback_transport.hpp"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <random>
#include <thread>

#include "tests/transport/transport_recorder.hpp"

namespace tessera::transport {
namespace {

using test::code;
using test::code_of;
using test::completion_log;
using test::drain;
using test::heartbeat_frame;
using test::recorder;
using test::sequence_of;


/// Two transports on one fabric, B listening, A connected to B.
struct pair_fixture {
  std::shared_ptr<loopback_fabric> fabric = loopback_fabric::make();
  recorder ra, rb; // outlive the transports
  std::unique_ptr<loopback_transport> a, b;
  std::string b_address;
  peer_id a_to_b = 0; // A's id for B
  peer_id b_to_a = 0; // B's id for A

  explicit pair_fixture(transport_options opts = {}) {
    a = std::make_unique<loopback_transport>(fabric, opts);
    b = std::make_unique<loopback_transport>(fabric, opts);
    a->set_handler(&ra);
    b->set_handler(&rb);
    auto addr = b->listen("node-b:0");
    EXPECT_TRUE(addr) << to_string(addr.error());
    b_address = *addr;
    auto p = a->connect(b_address);
    EXPECT_TRUE(p) << to_string(p.error());
    a_to_b = *p;
    EXPECT_TRUE(rb.wait([&] { return !rb.connected.empty(); }));
    b_to_a = rb.connected.at(0).first;
  }
};

TEST(LoopbackTransportTest, ListenPicksUniquePortsAndConnectReportsThePeer) {
  pair_fixture f;
  EXPECT_EQ(f.a->caps().backend, "loopback");
  EXPECT_TRUE(f.a->caps().rma);
  EXPECT_EQ(f.b_address.rfind("node-b:", 0), 0u);
  EXPECT_NE(f.b_address, "node-b:0");
  auto second = f.b->listen("node-b:0");
  ASSERT_TRUE(second);
  EXPECT_NE(*second, f.b_address);
  EXPECT_NE(f.a_to_b, 0u);
  std::lock_guard lock{f.rb.mu};
  ASSERT_EQ(f.rb.connected.size(), 1u);
  EXPECT_FALSE(f.rb.connected[0].second.empty());
}

TEST(LoopbackTransportTest, ConnectToUnknownAddressFailsWithPeerUnreachable) {
  auto fabric = loopback_fabric::make();
  loopback_transport a{fabric};
  auto p = a.connect("nowhere:1234");
  ASSERT_FALSE(p);
  EXPECT_EQ(code_of(p.error()), code(transport_errc::peer_unreachable));
  EXPECT_NE(to_string(p.error()).find("nowhere:1234"), std::string::npos);
}

TEST(LoopbackTransportTest, ListenRejectsBoundAndMalformedAddresses) {
  auto fabric = loopback_fabric::make();
  loopback_transport a{fabric};
  loopback_transport b{fabric};
  ASSERT_TRUE(a.listen("host:5000"));
  auto again = b.listen("host:5000");
  ASSERT_FALSE(again);
  EXPECT_EQ(code_of(again.error()), code(transport_errc::address_in_use));
  for (const char* bad : {"no-port", "host:", ":5", "host:70000", "host:x"}) {
    auto r = b.listen(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(code_of(r.error()), code(transport_errc::invalid_message)) << bad;
  }
}

TEST(LoopbackTransportTest, TenThousandControlMessagesArriveInOrderNoneLost) {
  pair_fixture f;
  constexpr uint64_t n = 10'000;
  completion_log done;
  for (uint64_t i = 0; i < n; ++i)
    f.a->send(f.a_to_b, message{"decode-worker", heartbeat_frame(i)}, done.make(i));
  ASSERT_TRUE(done.wait_for_count(n));
  ASSERT_TRUE(f.rb.wait([&] { return f.rb.messages.size() >= n; }));
  drain(*f.b);
  for (const auto& [i, results] : done.all()) {
    ASSERT_EQ(results.size(), 1u) << "completion of message " << i;
    EXPECT_FALSE(results[0]) << to_string(results[0]);
  }
  std::lock_guard lock{f.rb.mu};
  ASSERT_EQ(f.rb.messages.size(), n);
  for (uint64_t i = 0; i < n; ++i) {
    const auto& [from, msg] = f.rb.messages[i];
    ASSERT_EQ(from, f.b_to_a);
    ASSERT_EQ(msg.actor, "decode-worker");
    ASSERT_EQ(sequence_of(msg.frame), static_cast<int64_t>(i)) << "position " << i;
  }
  EXPECT_EQ(f.rb.overlaps.load(), 0);
}

/// Echoes every message back from inside the callback (re-entrant send).
class echo_handler : public recorder {
public:
  transport* self = nullptr;
  void on_message(peer_id from, message msg) override {
    self->send(from, msg, {});
    recorder::on_message(from, std::move(msg));
  }
};

TEST(LoopbackTransportTest, HandlersMaySendFromTheirCallbacks) {
  auto fabric = loopback_fabric::make();
  recorder ra;
  echo_handler rb;
  loopback_transport a{fabric};
  loopback_transport b{fabric};
  a.set_handler(&ra);
  rb.self = &b;
  b.set_handler(&rb);
  auto addr = b.listen("echo:0");
  ASSERT_TRUE(addr);
  auto p = a.connect(*addr);
  ASSERT_TRUE(p);
  for (uint64_t i = 0; i < 1000; ++i)
    a.send(*p, message{"echo", heartbeat_frame(i)}, {});
  ASSERT_TRUE(ra.wait([&] { return ra.messages.size() >= 1000; }));
  std::lock_guard lock{ra.mu};
  for (uint64_t i = 0; i < 1000; ++i)
    ASSERT_EQ(sequence_of(ra.messages[i].second.frame), static_cast<int64_t>(i));
}

TEST(LoopbackTransportTest, OversizedMessageFailsWithMessageTooLarge) {
  transport_options opts;
  opts.max_message_bytes = 64;
  pair_fixture f{opts};
  EXPECT_EQ(f.a->caps().max_message_bytes, 64u);
  completion_log done;
  f.a->send(f.a_to_b, message{"x", std::vector<std::byte>(65)}, done.make(0));
  f.a->send(f.a_to_b, message{std::string(65, 'a'), {}}, done.make(1));
  f.a->send(f.a_to_b, message{"x", std::vector<std::byte>(64)}, done.make(2));
  ASSERT_TRUE(done.wait_for_count(3));
  EXPECT_EQ(code_of(done.of(0).at(0)), code(transport_errc::message_too_large));
  EXPECT_EQ(code_of(done.of(1).at(0)), code(transport_errc::message_too_large));
  EXPECT_FALSE(done.of(2).at(0));
  ASSERT_TRUE(f.rb.wait([&] { return f.rb.messages.size() == 1; }));
}

TEST(LoopbackTransportTest, ThousandBlocksOfVaryingSizesArriveBitExact) {
  pair_fixture f;
  constexpr size_t n_blocks = 1000;
  constexpr size_t per_batch = 10;
  std::mt19937_64 rng{12345};
  std::vector<uint64_t> sizes(n_blocks);
  size_t total = 0;
  for (auto& s : sizes) {
    s = 1 + rng() % 8192; // 1 B .. 8 KiB
    total += s;
  }
  std::vector<std::byte> src(total);
  for (auto& x : src)
    x = static_cast<std::byte>(rng());
  std::vector<std::byte> dst(total + 4096, std::byte{0});
  auto src_id = f.a->register_region(src);
  auto dst_id = f.b->register_region(dst);
  ASSERT_TRUE(src_id && dst_id);

  // Block k of the source lands reversed in the destination, shifted by
  // 4096 bytes, so a copy that ignored offsets would not match.
  std::vector<uint64_t> src_off(n_blocks), dst_off(n_blocks);
  for (size_t k = 0, s = 0; k < n_blocks; s += sizes[k], ++k)
    src_off[k] = s;
  for (size_t k = n_blocks, d = 4096; k-- > 0; d += sizes[k])
    dst_off[k] = d;
  completion_log done;
  for (size_t b = 0; b < n_blocks / per_batch; ++b) {
    transfer_batch batch;
    batch.batch_id = 100 + b;
    for (size_t k = b * per_batch; k < (b + 1) * per_batch; ++k)
      batch.blocks.push_back(block_copy{*src_id, src_off[k], *dst_id, dst_off[k], sizes[k]});
    f.a->transfer(f.a_to_b, std::move(batch), done.make(b));
  }
  ASSERT_TRUE(done.wait_for_count(n_blocks / per_batch));
  for (const auto& [b, results] : done.all()) {
    ASSERT_EQ(results.size(), 1u);
    ASSERT_FALSE(results[0]) << "batch " << b << ": " << to_string(results[0]);
  }
  ASSERT_TRUE(f.rb.wait([&] { return f.rb.batches.size() >= n_blocks / per_batch; }));
  drain(*f.b);
  for (size_t k = 0; k < n_blocks; ++k)
    ASSERT_EQ(XXH3_64bits(src.data() + src_off[k], sizes[k]),
              XXH3_64bits(dst.data() + dst_off[k], sizes[k]))
      << "block " << k;
  for (size_t i = 0; i < 4096; ++i)
    ASSERT_EQ(dst[i], std::byte{0}) << "byte " << i << " outside every block was written";
  std::lock_guard lock{f.rb.mu};
  ASSERT_EQ(f.rb.batches.size(), n_blocks / per_batch);
  std::vector<int> seen(n_blocks / per_batch, 0);
  for (const auto& [from, batch] : f.rb.batches) {
    EXPECT_EQ(from, f.b_to_a);
    ASSERT_GE(batch.batch_id, 100u);
    ASSERT_LT(batch.batch_id - 100, seen.size());
    EXPECT_EQ(batch.blocks.size(), per_batch);
    ++seen[batch.batch_id - 100];
  }
  for (size_t b = 0; b < seen.size(); ++b)
    EXPECT_EQ(seen[b], 1) << "batch " << 100 + b;
}

TEST(LoopbackTransportTest, AllocatedRegionsAreZeroedRegisteredAndReceiveBlocks) {
  pair_fixture f;
  auto empty = f.b->allocate_region(0);
  ASSERT_FALSE(empty);
  EXPECT_EQ(code_of(empty.error()), code(transport_errc::invalid_message));
  std::vector<std::byte> src(4096, std::byte{0x5a});
  auto s = f.a->register_region(src);
  auto d = f.b->allocate_region(8192);
  ASSERT_TRUE(s && d);
  ASSERT_EQ(d->memory.size(), 8192u);
  EXPECT_TRUE(std::all_of(d->memory.begin(), d->memory.end(),
                          [](std::byte b) { return b == std::byte{0}; }));
  completion_log done;
  f.a->transfer(f.a_to_b, transfer_batch{7, {{*s, 0, d->id, 4096, 4096}}}, done.make(0));
  ASSERT_TRUE(done.wait_for_count(1));
  ASSERT_FALSE(done.of(0).at(0)) << to_string(done.of(0).at(0));
  ASSERT_TRUE(f.rb.wait([&] { return !f.rb.batches.empty(); }));
  EXPECT_TRUE(std::equal(src.begin(), src.end(), d->memory.begin() + 4096));
  EXPECT_TRUE(std::all_of(d->memory.begin(), d->memory.begin() + 4096,
                          [](std::byte b) { return b == std::byte{0}; }));
}

TEST(LoopbackTransportTest, OutOfRangeBlockFailsTheBatchWithAClearErrorAndWritesNothing) {
  pair_fixture f;
  std::vector<std::byte> src(8192, std::byte{0x5a});
  std::vector<std::byte> dst(4096, std::byte{0});
  auto src_id = f.a->register_region(src);
  auto dst_id = f.b->register_region(dst);
  ASSERT_TRUE(src_id && dst_id);
  auto batch_with = [&](block_copy bad) {
    transfer_batch batch;
    batch.batch_id = 7;
    batch.blocks.push_back(block_copy{*src_id, 0, *dst_id, 0, 1024}); // valid
    batch.blocks.push_back(bad);
    return batch;
  };
  completion_log done;
  // Destination range [4000, 4200) overruns the 4096-byte region.
  f.a->transfer(f.a_to_b, batch_with({*src_id, 0, *dst_id, 4000, 200}), done.make(0));
  // Source range overruns; offset + size overflows u64.
  f.a->transfer(f.a_to_b, batch_with({*src_id, 8000, *dst_id, 0, 500}), done.make(1));
  f.a->transfer(f.a_to_b, batch_with({*src_id, 1, *dst_id, 0, ~uint64_t{0}}), done.make(2));
  // Unknown regions on either side.
  f.a->transfer(f.a_to_b, batch_with({*src_id, 0, 77, 0, 8}), done.make(3));
  f.a->transfer(f.a_to_b, batch_with({77, 0, *dst_id, 0, 8}), done.make(4));
  ASSERT_TRUE(done.wait_for_count(5));
  for (uint64_t i = 0; i < 5; ++i) {
    auto err = done.of(i).at(0);
    ASSERT_EQ(code_of(err), code(transport_errc::invalid_message)) << i;
    auto text = to_string(err);
    EXPECT_NE(text.find("block 1 of batch 7"), std::string::npos) << text;
    EXPECT_NE(text.find("region"), std::string::npos) << text;
  }
  auto first = to_string(done.of(0).at(0));
  EXPECT_NE(first.find("[4000, 4000 + 200)"), std::string::npos) << first;
  EXPECT_NE(first.find("4096 bytes"), std::string::npos) << first;
  drain(*f.b);
  for (size_t i = 0; i < dst.size(); ++i)
    ASSERT_EQ(dst[i], std::byte{0}) << "byte " << i << " written by a rejected batch";
  std::lock_guard lock{f.rb.mu};
  EXPECT_TRUE(f.rb.batches.empty());
}

TEST(LoopbackTransportTest, DisconnectFailsThePeerExactlyOnceOnBothSides) {
  pair_fixture f;
  f.a->disconnect(f.a_to_b);
  f.a->disconnect(f.a_to_b); // no second event
  f.b->disconnect(f.b_to_a); // already failed: no event
  ASSERT_TRUE(f.rb.wait([&] { return !f.rb.failed.empty(); }));
  ASSERT_TRUE(f.ra.wait([&] { return !f.ra.failed.empty(); }));
  completion_log done;
  f.a->send(f.a_to_b, message{"x", heartbeat_frame(1)}, done.make(0));
  f.b->send(f.b_to_a, message{"x", heartbeat_frame(2)}, done.make(1));
  f.a->send(peer_id{12345}, message{"x", {}}, done.make(2));
  f.a->transfer(f.a_to_b, transfer_batch{}, done.make(3));
  ASSERT_TRUE(done.wait_for_count(4));
  EXPECT_EQ(code_of(done.of(0).at(0)), code(transport_errc::peer_failed));
  EXPECT_EQ(code_of(done.of(1).at(0)), code(transport_errc::peer_failed));
  EXPECT_EQ(code_of(done.of(2).at(0)), code(transport_errc::not_connected));
  EXPECT_EQ(code_of(done.of(3).at(0)), code(transport_errc::peer_failed));
  EXPECT_NE(to_string(done.of(0).at(0)).find("has failed"), std::string::npos);
  drain(*f.a);
  drain(*f.b);
  std::lock_guard la{f.ra.mu};
  std::lock_guard lb{f.rb.mu};
  ASSERT_EQ(f.rb.failed.size(), 1u);
  EXPECT_EQ(f.rb.failed[0].first, f.b_to_a);
  EXPECT_EQ(code_of(f.rb.failed[0].second), code(transport_errc::closed));
  ASSERT_EQ(f.ra.failed.size(), 1u);
  EXPECT_EQ(f.ra.failed[0].first, f.a_to_b);
  EXPECT_EQ(code_of(f.ra.failed[0].second), code(transport_errc::closed));
  EXPECT_TRUE(f.rb.messages.empty());
}

TEST(LoopbackTransportTest, DestroyingATransportFailsItsPeersWithClosed) {
  pair_fixture f;
  f.b.reset();
  ASSERT_TRUE(f.ra.wait([&] { return !f.ra.failed.empty(); }));
  completion_log done;
  f.a->send(f.a_to_b, message{"x", heartbeat_frame(1)}, done.make(0));
  ASSERT_TRUE(done.wait_for_count(1));
  EXPECT_EQ(code_of(done.of(0).at(0)), code(transport_errc::peer_failed));
  auto again = f.a->connect(f.b_address);
  ASSERT_FALSE(again);
  EXPECT_EQ(code_of(again.error()), code(transport_errc::peer_unreachable));
  drain(*f.a);
  std::lock_guard lock{f.ra.mu};
  ASSERT_EQ(f.ra.failed.size(), 1u);
  EXPECT_EQ(code_of(f.ra.failed[0].second), code(transport_errc::closed));
}

TEST(LoopbackTransportTest, KillFailsThePeerOnceAndAReconnectGetsANewPeerId) {
  pair_fixture f;
  std::vector<std::byte> region(64);
  ASSERT_TRUE(f.b->register_region(region));
  f.b->kill();
  f.b->kill(); // idempotent
  ASSERT_TRUE(f.ra.wait([&] { return !f.ra.failed.empty(); }));
  completion_log done;
  f.a->send(f.a_to_b, message{"x", heartbeat_frame(1)}, done.make(0));
  f.b->send(f.b_to_a, message{"x", heartbeat_frame(2)}, done.make(1)); // killed: inline
  EXPECT_EQ(done.of(1).size(), 1u);
  EXPECT_EQ(code_of(done.of(1).at(0)), code(transport_errc::closed));
  ASSERT_TRUE(done.wait_for_count(2));
  EXPECT_EQ(code_of(done.of(0).at(0)), code(transport_errc::peer_failed));

  // A restarted receiver at the same address.
  recorder rc;
  loopback_transport c{f.fabric};
  c.set_handler(&rc);
  auto addr = c.listen(f.b_address);
  ASSERT_TRUE(addr) << to_string(addr.error());
  auto p = f.a->connect(f.b_address);
  ASSERT_TRUE(p) << to_string(p.error());
  EXPECT_NE(*p, f.a_to_b);
  f.a->send(*p, message{"x", heartbeat_frame(3)}, done.make(2));
  ASSERT_TRUE(rc.wait([&] { return rc.messages.size() == 1; }));
  ASSERT_TRUE(done.wait_for_count(3));
  EXPECT_FALSE(done.of(2).at(0));
  drain(*f.a);
  std::lock_guard lock{f.ra.mu};
  ASSERT_EQ(f.ra.failed.size(), 1u);
  EXPECT_EQ(f.ra.failed[0].first, f.a_to_b);
  EXPECT_EQ(code_of(f.ra.failed[0].second), code(transport_errc::peer_failed));
  EXPECT_EQ(f.rb.overlaps.load(), 0);
}

TEST(LoopbackTransportTest, DestroyingWithOperationsInFlightRunsEveryCompletionOnce) {
  auto start = std::chrono::steady_clock::now();
  pair_fixture f;
  std::vector<std::byte> src(1 << 16), dst(1 << 16);
  auto s = f.a->register_region(src);
  auto d = f.b->register_region(dst);
  ASSERT_TRUE(s && d);
  completion_log done;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> issued{0};
  // A keeps sending while B goes away, and A is destroyed with its own
  // completions still queued.
  std::thread sender{[&] {
    for (uint64_t i = 0; !stop.load() || i < 2000; ++i) {
      if (i % 2 == 0)
        f.a->send(f.a_to_b, message{"x", heartbeat_frame(i)}, done.make(i));
      else
        f.a->transfer(f.a_to_b, transfer_batch{i, {{*s, 0, *d, 0, 1 << 16}}}, done.make(i));
      issued.fetch_add(1);
      if (i > 100'000)
        break;
    }
  }};
  ASSERT_TRUE(f.rb.wait([&] { return f.rb.messages.size() >= 100; }));
  f.b.reset();
  stop.store(true);
  sender.join();
  f.a.reset();
  // Every completion ran exactly once: OK, peer_failed or closed.
  auto all = done.all();
  EXPECT_EQ(all.size(), issued.load());
  for (const auto& [i, results] : all) {
    ASSERT_EQ(results.size(), 1u) << "operation " << i;
    auto c = code_of(results[0]);
    EXPECT_TRUE(c == 0 || c == code(transport_errc::peer_failed) ||
                c == code(transport_errc::closed))
      << to_string(results[0]);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds{120});
}

TEST(LoopbackTransportTest, ATransportMayConnectToItself) {
  auto fabric = loopback_fabric::make();
  recorder r;
  loopback_transport a{fabric};
  a.set_handler(&r);
  auto addr = a.listen("self:0");
  ASSERT_TRUE(addr);
  auto p = a.connect(*addr);
  ASSERT_TRUE(p);
  a.send(*p, message{"x", heartbeat_frame(9)}, {});
  ASSERT_TRUE(r.wait([&] { return r.messages.size() == 1 && r.connected.size() == 1; }));
  std::lock_guard lock{r.mu};
  EXPECT_EQ(sequence_of(r.messages[0].second.frame), 9);
  EXPECT_NE(r.messages[0].first, *p); // the listener side's id
}

TEST(LoopbackTransportTest, MessagesFromEachSendingThreadKeepTheirOrder) {
  pair_fixture f;
  constexpr uint64_t threads = 4;
  constexpr uint64_t per_thread = 1000;
  std::vector<std::thread> senders;
  for (uint64_t t = 0; t < threads; ++t)
    senders.emplace_back([&, t] {
      for (uint64_t i = 0; i < per_thread; ++i)
        f.a->send(f.a_to_b, message{"w", heartbeat_frame(t * per_thread + i)}, {});
    });
  for (auto& s : senders)
    s.join();
  ASSERT_TRUE(f.rb.wait([&] { return f.rb.messages.size() >= threads * per_thread; }));
  drain(*f.b);
  std::lock_guard lock{f.rb.mu};
  ASSERT_EQ(f.rb.messages.size(), threads * per_thread);
  std::vector<int64_t> last(threads, -1);
  for (const auto& [from, m] : f.rb.messages) {
    auto seq = sequence_of(m.frame);
    ASSERT_GE(seq, 0);
    auto t = static_cast<uint64_t>(seq) / per_thread;
    ASSERT_LT(t, threads);
    ASSERT_GT(seq, last[t]) << "thread " << t << " reordered";
    last[t] = seq;
  }
  for (uint64_t t = 0; t < threads; ++t)
    EXPECT_EQ(last[t], static_cast<int64_t>((t + 1) * per_thread - 1));
}

} // namespace
} // namespace tessera::transport
