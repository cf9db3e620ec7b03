// The UCX backend, two transports in one process over 127.0.0.1: connect,
// unreachable address, ordered control messages (real wire frames),
// bit-exact block transfers with bounds checks over both KV paths (put and
// rendezvous), the receiver's checks of rendezvous block headers,
// disconnect, a destroyed peer, reconnection.

#include "transport/ucx/ucx_transport.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <random>
#include <thread>
#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>

#include "tests/transport/transport_recorder.hpp"
#include "transport/ucx/ucx_test_access.hpp"

namespace tessera::transport {
namespace {

using test::code;
using test::code_of;
using test::completion_log;
using test::recorder;
using clk = std::chrono::steady_clock;

/// Sets UCX's environment once, before the first context exists.
struct ucx_env : ::testing::Environment {
  void SetUp() override {
    setenv("UCX_TCP_CM_REUSEADDR", "y", 0);
  }
};
const auto* env = ::testing::AddGlobalTestEnvironment(new ucx_env);

transport_options opts() {
  transport_options o;
  o.peer_timeout = std::chrono::milliseconds{2000};
  return o;
}

std::vector<std::byte> chunk_frame(uint64_t seq) {
  wire::token_chunk c;
  c.id = seq;
  c.tokens = {static_cast<int32_t>(seq % 32000)};
  c.text = std::to_string(seq);
  c.output_tokens = static_cast<int32_t>(seq % 1000);
  auto f = wire::encode(wire::wire_message{c});
  if (!f)
    throw std::runtime_error("encode failed");
  return std::move(*f);
}

int64_t chunk_id(const std::vector<std::byte>& frame) {
  auto m = wire::decode(frame);
  if (!m)
    return -1;
  auto* c = std::get_if<wire::token_chunk>(&*m);
  return c ? static_cast<int64_t>(c->id) : -1;
}

// A UCX transport with the test options; fails the test if UCX cannot start.
std::unique_ptr<ucx_transport> make_ucx(ucx_options u = {}) {
  auto t = ucx_transport::make(opts(), u);
  EXPECT_TRUE(t) << (t ? std::string{} : to_string(t.error()));
  return t ? std::move(*t) : nullptr;
}

struct pair_fixture {
  recorder ra, rb; // outlive the transports
  std::unique_ptr<ucx_transport> a, b;
  std::string b_address;
  peer_id a_to_b = 0;
  peer_id b_to_a = 0;

  explicit pair_fixture(ucx_options u = {}) {
    a = make_ucx(u);
    b = make_ucx(u);
    if (!a || !b)
      return; // make_ucx recorded the failure
    a->set_handler(&ra);
    b->set_handler(&rb);
    auto addr = b->listen("127.0.0.1:0");
    EXPECT_TRUE(addr) << to_string(addr.error());
    b_address = *addr;
    auto p = a->connect(b_address);
    EXPECT_TRUE(p) << to_string(p.error());
    a_to_b = p ? *p : 0;
    EXPECT_TRUE(rb.wait([&] { return !rb.connected.empty(); }));
    b_to_a = rb.connected.empty() ? 0 : rb.connected.at(0).first;
  }
};

TEST(ucx_transport, caps_and_connect) {
  pair_fixture f;
  EXPECT_EQ(f.a->caps().backend, "ucx");
  EXPECT_TRUE(f.a->caps().rma);
  EXPECT_FALSE(f.a->caps().device_memory);
  EXPECT_NE(f.b_address, "127.0.0.1:0");
  EXPECT_NE(f.a_to_b, 0u);
  EXPECT_NE(f.b_to_a, 0u);
}

TEST(ucx_transport, unreachable_address_fails_within_timeout) {
  // A port nobody listens on: bind a socket, read its port, close it.
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(s, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
  socklen_t len = sizeof(sa);
  ASSERT_EQ(::getsockname(s, reinterpret_cast<sockaddr*>(&sa), &len), 0);
  ::close(s);
  auto a_ptr = make_ucx();
  ASSERT_TRUE(a_ptr);
  auto& a = *a_ptr;
  recorder ra;
  a.set_handler(&ra);
  auto start = clk::now();
  auto p = a.connect("127.0.0.1:" + std::to_string(ntohs(sa.sin_port)));
  auto took = clk::now() - start;
  ASSERT_FALSE(p);
  auto c = code_of(p.error());
  EXPECT_TRUE(c == code(transport_errc::peer_unreachable) || c == code(transport_errc::timeout))
    << to_string(p.error());
  EXPECT_LT(took, std::chrono::seconds{10});
  EXPECT_FALSE(a.connect("no-port"));
}

TEST(ucx_transport, ten_thousand_messages_in_order) {
  pair_fixture f;
  constexpr uint64_t n = 10'000;
  completion_log log;
  for (uint64_t i = 0; i < n; ++i)
    f.a->send(f.a_to_b, message{"actor-" + std::to_string(i % 3), chunk_frame(i)}, log.make(i));
  ASSERT_TRUE(log.wait_for_count(n));
  for (auto& [i, r] : log.all()) {
    ASSERT_EQ(r.size(), 1u);
    ASSERT_FALSE(r[0]) << to_string(r[0]);
  }
  ASSERT_TRUE(f.rb.wait([&] { return f.rb.messages.size() >= n; }));
  std::lock_guard lock{f.rb.mu};
  ASSERT_EQ(f.rb.messages.size(), n);
  for (uint64_t i = 0; i < n; ++i) {
    ASSERT_EQ(f.rb.messages[i].first, f.b_to_a);
    ASSERT_EQ(f.rb.messages[i].second.actor, "actor-" + std::to_string(i % 3));
    ASSERT_EQ(chunk_id(f.rb.messages[i].second.frame), static_cast<int64_t>(i)) << i;
  }
  EXPECT_EQ(f.rb.overlaps.load(), 0);
}

/// Answers each message from its callback (on the progress thread, where
/// a send starts at once) with two: actor "a", then "b", the same frame.
struct double_echo : recorder {
  ucx_transport* self = nullptr;
  std::atomic<int> sent_ok{0};
  void on_message(peer_id from, message msg) override {
    auto count = [this](const caf::error& e) {
      if (!e)
        ++sent_ok;
    };
    self->send(from, message{"a", msg.frame}, count);
    self->send(from, message{"b", std::move(msg.frame)}, count);
  }
};

TEST(ucx_transport, sends_from_callbacks_keep_their_order) {
  for (const bool shm : {false, true}) {
    SCOPED_TRACE(shm ? "shm" : "tcp");
    ucx_options u;
    if (shm) {
      u.tls = "sm,self,tcp";
      u.peer_error_handling = false;
    }
    recorder ra;
    double_echo rb;
    auto a = make_ucx(u);
    auto b = make_ucx(u);
    ASSERT_TRUE(a && b);
    a->set_handler(&ra);
    rb.self = b.get();
    b->set_handler(&rb);
    auto addr = b->listen("127.0.0.1:0");
    ASSERT_TRUE(addr) << to_string(addr.error());
    auto p = a->connect(*addr);
    ASSERT_TRUE(p) << to_string(p.error());
    constexpr uint64_t n = 2000;
    for (uint64_t i = 0; i < n; ++i)
      a->send(*p, message{"ping", chunk_frame(i)}, {});
    ASSERT_TRUE(ra.wait([&] { return ra.messages.size() >= 2 * n; }));
    // The sends' completions may run after a saw the messages.
    const auto deadline = clk::now() + std::chrono::seconds{10};
    while (rb.sent_ok.load() < static_cast<int>(2 * n) && clk::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds{1});
    EXPECT_EQ(rb.sent_ok.load(), static_cast<int>(2 * n));
    {
      std::lock_guard lock{ra.mu};
      ASSERT_EQ(ra.messages.size(), 2 * n);
      for (uint64_t i = 0; i < 2 * n; ++i) {
        ASSERT_EQ(ra.messages[i].second.actor, i % 2 == 0 ? "a" : "b") << i;
        ASSERT_EQ(chunk_id(ra.messages[i].second.frame), static_cast<int64_t>(i / 2)) << i;
      }
    }
    // Before the recorders: their handlers must outlive the transports.
    b.reset();
    a.reset();
  }
}

TEST(ucx_transport, allocate_region_refuses_zero_bytes) {
  auto t = make_ucx();
  ASSERT_TRUE(t);
  auto r = t->allocate_region(0);
  ASSERT_FALSE(r);
  EXPECT_EQ(code_of(r.error()), code(transport_errc::invalid_message));
}

TEST(ucx_transport, default_kv_path_is_rendezvous_over_tcp_lanes) {
  // The default options: automatic, UCX's own transport list, peer error
  // handling on, under which UCX 1.13 uses tcp only.
  pair_fixture f;
  EXPECT_EQ(f.a->kv_path(), ucx_kv_path::am_rndv);
  ucx_options put;
  put.kv_path = ucx_kv_path::put;
  auto t = make_ucx(put);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->kv_path(), ucx_kv_path::put);
}

/// A KV path, where both regions come from, and the lanes.
struct kv_case {
  ucx_kv_path path;
  bool allocated; // allocate_region, else heap memory registered
  bool shm;       // "sm,self,tcp" without peer error handling: shared memory
};

class ucx_kv_paths : public ::testing::TestWithParam<kv_case> {};

TEST_P(ucx_kv_paths, blocks_arrive_bit_exact) {
  const auto param = GetParam();
  // Registered memory outlives the transports (declared first, dies last).
  constexpr size_t region_bytes = size_t{64} << 20;
  std::vector<std::byte> src_heap, dst_heap;
  ucx_options u;
  u.kv_path = param.path;
  if (param.shm) {
    u.tls = "sm,self,tcp";
    u.peer_error_handling = false;
  }
  pair_fixture f{u};
  ASSERT_EQ(f.a->kv_path(), param.path);
  // Each side's region: allocated by its transport (zeroed), or heap.
  auto region = [&](ucx_transport& t, std::vector<std::byte>& heap)
    -> caf::expected<allocated_region> {
    if (param.allocated)
      return t.allocate_region(region_bytes);
    heap.resize(region_bytes);
    auto id = t.register_region(heap);
    if (!id)
      return id.error();
    return allocated_region{*id, heap};
  };
  auto rs = region(*f.a, src_heap);
  ASSERT_TRUE(rs) << to_string(rs.error());
  // B registers after the connection: announced to A.
  auto rd = region(*f.b, dst_heap);
  ASSERT_TRUE(rd) << to_string(rd.error());
  ASSERT_EQ(rs->memory.size(), region_bytes);
  ASSERT_EQ(rd->memory.size(), region_bytes);
  EXPECT_TRUE(std::all_of(rd->memory.begin(), rd->memory.end(),
                          [](std::byte b) { return b == std::byte{0}; }));
  auto src = rs->memory;
  auto dst = rd->memory;
  std::mt19937_64 rng{42};
  for (auto& x : src)
    x = static_cast<std::byte>(rng());

  // 1,000 blocks, sizes 1 B .. 256 KiB, non-overlapping destinations.
  std::vector<block_copy> blocks;
  uint64_t dst_off = 0;
  for (int i = 0; i < 1000; ++i) {
    uint64_t size = i == 0 ? 1 : i == 1 ? (256u << 10) : 1 + rng() % (32u << 10);
    block_copy c{rs->id, rng() % (region_bytes - size), rd->id, dst_off, size};
    dst_off += size;
    blocks.push_back(c);
  }
  ASSERT_LE(dst_off, region_bytes);
  // B's region announcement and a later message travel on one endpoint in
  // order: once A has the message, A knows the region.
  f.b->send(f.b_to_a, message{"sync", chunk_frame(0)}, {});
  ASSERT_TRUE(f.ra.wait([&] { return !f.ra.messages.empty(); }));
  completion_log log;
  constexpr size_t per_batch = 50;
  size_t batches = 0;
  for (size_t i = 0; i < blocks.size(); i += per_batch, ++batches) {
    transfer_batch b;
    b.batch_id = 100 + batches;
    b.blocks.assign(blocks.begin() + i, blocks.begin() + std::min(blocks.size(), i + per_batch));
    f.a->transfer(f.a_to_b, b, log.make(batches));
  }
  ASSERT_TRUE(log.wait_for_count(batches));
  for (auto& [i, r] : log.all()) {
    ASSERT_EQ(r.size(), 1u);
    ASSERT_FALSE(r[0]) << i << ": " << to_string(r[0]);
  }
  ASSERT_TRUE(f.rb.wait([&] { return f.rb.batches.size() >= batches; }));
  {
    std::lock_guard lock{f.rb.mu};
    ASSERT_EQ(f.rb.batches.size(), batches);
    for (size_t k = 0; k < batches; ++k) {
      EXPECT_EQ(f.rb.batches[k].second.batch_id, 100 + k);
      EXPECT_EQ(f.rb.batches[k].first, f.b_to_a);
    }
  }
  for (size_t i = 0; i < blocks.size(); ++i) {
    const auto& c = blocks[i];
    ASSERT_EQ(std::memcmp(src.data() + c.src_offset, dst.data() + c.dst_offset, c.size), 0)
      << "block " << i;
  }

  // Out of range: rejected, naming the block, nothing sent.
  std::vector<std::byte> before(dst.begin(), dst.begin() + 4096);
  transfer_batch bad;
  bad.batch_id = 9;
  bad.blocks.push_back(block_copy{rs->id, 0, rd->id, 0, 4096});
  bad.blocks.push_back(block_copy{rs->id, 0, rd->id, region_bytes - 10, 100});
  std::fill(src.begin(), src.begin() + 4096, std::byte{0x5a});
  completion_log bad_log;
  f.a->transfer(f.a_to_b, bad, bad_log.make(0));
  ASSERT_TRUE(bad_log.wait_for_count(1));
  auto err = bad_log.of(0).at(0);
  EXPECT_EQ(code_of(err), code(transport_errc::invalid_message));
  EXPECT_NE(to_string(err).find("block 1"), std::string::npos) << to_string(err);
  // A message sent after it arrives after anything the batch could have
  // sent; then B's memory is unchanged and no batch 9 arrived.
  completion_log m;
  f.a->send(f.a_to_b, message{"x", chunk_frame(1)}, m.make(0));
  ASSERT_TRUE(f.rb.wait([&] { return !f.rb.messages.empty(); }));
  ASSERT_TRUE(m.wait_for_count(1)); // m dies before f.a: let its completion land
  EXPECT_EQ(std::memcmp(before.data(), dst.data(), before.size()), 0);
  std::lock_guard lock{f.rb.mu};
  EXPECT_EQ(f.rb.batches.size(), batches);
}

INSTANTIATE_TEST_SUITE_P(paths, ucx_kv_paths,
                         ::testing::Values(kv_case{ucx_kv_path::put, false, false},
                                           kv_case{ucx_kv_path::am_rndv, false, false},
                                           kv_case{ucx_kv_path::put, true, false},
                                           kv_case{ucx_kv_path::am_rndv, true, false},
                                           kv_case{ucx_kv_path::put, true, true},
                                           kv_case{ucx_kv_path::put, false, true}),
                         [](const ::testing::TestParamInfo<kv_case>& info) {
                           return std::string{to_string(info.param.path)}
                                  + (info.param.allocated ? "_allocated" : "_registered")
                                  + (info.param.shm ? "_shm" : "_tcp");
                         });

// A sender that skips its own checks (as a faulty or hostile one would):
// the receiver refuses each bad run where it would land, counts it, writes
// nothing, reports no batch, and the sender's batch fails with the reason;
// the connection carries good batches afterwards.
TEST(ucx_transport, rendezvous_receiver_drops_block_headers_outside_its_regions) {
  constexpr size_t region_bytes = size_t{1} << 20;
  std::vector<std::byte> src(region_bytes, std::byte{0x11});
  std::vector<std::byte> dst(region_bytes, std::byte{0});
  pair_fixture f;
  auto rs = f.a->register_region(src);
  ASSERT_TRUE(rs) << to_string(rs.error());
  auto rd = f.b->register_region(dst);
  ASSERT_TRUE(rd) << to_string(rd.error());
  f.b->send(f.b_to_a, message{"sync", chunk_frame(0)}, {});
  ASSERT_TRUE(f.ra.wait([&] { return !f.ra.messages.empty(); }));

  struct bad_case {
    const char* what;
    block_copy block;
    const char* reason; // in the sender's error
  };
  const bad_case cases[] = {
    {"unknown region", {*rs, 0, *rd + 100, 0, 4096}, "unknown region"},
    {"past the end", {*rs, 0, *rd, region_bytes - 100, 4096}, "outside region"},
    {"wrapping offset", {*rs, 0, *rd, ~uint64_t{0} - 10, 4096}, "outside region"},
  };
  uint64_t expected_rejected = 0;
  for (const auto& c : cases) {
    transfer_batch batch;
    batch.batch_id = 77;
    // A good block first: it may land (its run is valid), but the batch as
    // a whole must fail and never be reported as arrived.
    batch.blocks.push_back(block_copy{*rs, 0, *rd, 0, 4096});
    batch.blocks.push_back(c.block);
    auto log = std::make_shared<completion_log>();
    detail::ucx_test_access::transfer_unchecked(
      *f.a, f.a_to_b, batch, [log, d = log->make(0)](const caf::error& e) { d(e); });
    ASSERT_TRUE(log->wait_for_count(1)) << c.what;
    auto err = log->of(0).at(0);
    EXPECT_EQ(code_of(err), code(transport_errc::invalid_message)) << c.what << ": " << to_string(err);
    EXPECT_NE(to_string(err).find("peer rejected batch 77"), std::string::npos) << to_string(err);
    EXPECT_NE(to_string(err).find(c.reason), std::string::npos) << c.what << ": " << to_string(err);
    ++expected_rejected;
    EXPECT_EQ(f.b->rejected_block_messages(), expected_rejected) << c.what;
  }
  {
    std::lock_guard lock{f.rb.mu};
    EXPECT_TRUE(f.rb.batches.empty());
  }
  // Nothing was written past the first 4096 bytes (the good runs).
  for (size_t i = 4096; i < dst.size(); ++i)
    ASSERT_EQ(dst[i], std::byte{0}) << "byte " << i;

  // Still usable: a good batch lands and is reported.
  transfer_batch good;
  good.batch_id = 78;
  good.blocks.push_back(block_copy{*rs, 0, *rd, region_bytes - 8192, 8192});
  completion_log ok;
  f.a->transfer(f.a_to_b, good, ok.make(0));
  ASSERT_TRUE(ok.wait_for_count(1));
  EXPECT_FALSE(ok.of(0).at(0)) << to_string(ok.of(0).at(0));
  ASSERT_TRUE(f.rb.wait([&] { return !f.rb.batches.empty(); }));
  EXPECT_EQ(std::memcmp(dst.data() + region_bytes - 8192, src.data(), 8192), 0);
  EXPECT_EQ(f.b->rejected_block_messages(), expected_rejected);
  std::lock_guard lock{f.rb.mu};
  ASSERT_EQ(f.rb.batches.size(), 1u);
  EXPECT_EQ(f.rb.batches[0].second.batch_id, 78u);
}

TEST(ucx_transport, disconnect_fails_both_sides_once) {
  pair_fixture f;
  f.a->disconnect(f.a_to_b);
  ASSERT_TRUE(f.ra.wait([&] { return !f.ra.failed.empty(); }));
  ASSERT_TRUE(f.rb.wait([&] { return !f.rb.failed.empty(); }));
  completion_log log;
  f.a->send(f.a_to_b, message{"x", chunk_frame(1)}, log.make(0));
  f.b->send(f.b_to_a, message{"x", chunk_frame(1)}, log.make(1));
  f.a->send(12345, message{"x", chunk_frame(1)}, log.make(2));
  ASSERT_TRUE(log.wait_for_count(3));
  EXPECT_EQ(code_of(log.of(0).at(0)), code(transport_errc::peer_failed));
  EXPECT_EQ(code_of(log.of(1).at(0)), code(transport_errc::peer_failed));
  EXPECT_EQ(code_of(log.of(2).at(0)), code(transport_errc::not_connected));
  std::lock_guard la{f.ra.mu};
  std::lock_guard lb{f.rb.mu};
  ASSERT_EQ(f.ra.failed.size(), 1u);
  ASSERT_EQ(f.rb.failed.size(), 1u);
  EXPECT_EQ(code_of(f.ra.failed[0].second), code(transport_errc::closed));
  EXPECT_EQ(code_of(f.rb.failed[0].second), code(transport_errc::closed));
}

TEST(ucx_transport, destroyed_receiver_detected_and_replaced) {
  pair_fixture f;
  auto start = clk::now();
  f.b.reset();
  ASSERT_TRUE(f.ra.wait([&] { return !f.ra.failed.empty(); }, std::chrono::seconds{10}));
  completion_log log;
  f.a->send(f.a_to_b, message{"x", chunk_frame(1)}, log.make(0));
  ASSERT_TRUE(log.wait_for_count(1, std::chrono::seconds{10}));
  auto c = code_of(log.of(0).at(0));
  EXPECT_TRUE(c == code(transport_errc::peer_failed) || c == code(transport_errc::closed));
  EXPECT_LT(clk::now() - start, std::chrono::seconds{10});
  {
    std::lock_guard lock{f.ra.mu};
    EXPECT_EQ(f.ra.failed.size(), 1u);
  }

  // A new receiver, connected afterwards.
  recorder rc;
  auto c2_ptr = make_ucx();
  ASSERT_TRUE(c2_ptr);
  auto& c2 = *c2_ptr;
  c2.set_handler(&rc);
  auto addr = c2.listen("127.0.0.1:0");
  ASSERT_TRUE(addr) << to_string(addr.error());
  auto p = f.a->connect(*addr);
  ASSERT_TRUE(p) << to_string(p.error());
  completion_log log2;
  f.a->send(*p, message{"x", chunk_frame(7)}, log2.make(0));
  ASSERT_TRUE(rc.wait([&] { return !rc.messages.empty(); }));
  // The send's completion may still be on its way to log2, which dies
  // before f.a does: wait for it.
  ASSERT_TRUE(log2.wait_for_count(1));
  EXPECT_FALSE(log2.of(0).at(0));
  std::lock_guard lock{rc.mu};
  EXPECT_EQ(chunk_id(rc.messages[0].second.frame), 7);
}

} // namespace
} // namespace tessera::transport
