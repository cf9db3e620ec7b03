// The UCX backend between two processes on 127.0.0.1: this test sends,
// ucx_peer (tests/transport/peer/ucx_peer.cpp, a child process) receives,
// checks and reports back. Control messages arrive in order and none is
// lost; KV blocks land bit-exact in the peer's registered pool; over tcp
// and with shared memory selected, each with both KV paths (put and
// rendezvous). A receiver killed without BYE fails the next send, and a
// batch in flight on either KV path, within peer_timeout; a stopped
// receiver (its sockets stay open) fails a transfer within peer_timeout,
// and does not hold up (or crash) our transport's destructor; a restarted
// receiver can be reached again.

#include "transport/ucx/ucx_transport.hpp"

#include <gtest/gtest.h>

#include <sys/wait.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/child_process.hpp"
#include "engine/block_hash.hpp"
#include "tests/transport/transport_recorder.hpp"

namespace tessera::transport {
namespace {

using test::code;
using test::code_of;
using test::completion_log;
using test::recorder;
using clk = std::chrono::steady_clock;
using std::chrono::milliseconds;

/// Both processes use it; dead-peer detection is asserted against it.
constexpr milliseconds peer_timeout{2000};
/// The stall check runs every peer_timeout / 8 (ucx_transport.hpp).
constexpr milliseconds stall_bound = peer_timeout + peer_timeout / 8;
/// Allowed beyond peer_timeout for a dead peer to be reported.
constexpr milliseconds detection_slack{1000};
/// A peer process's start (UCX init, a 64 MiB pool) or exit.
constexpr milliseconds process_timeout{20000};

/// How both processes configure UCX, and the KV path this (sending) side
/// takes (the receiver takes either).
struct ucx_case {
  std::string name;
  std::string tls;
  bool peer_error_handling = true;
  ucx_kv_path kv_path = ucx_kv_path::automatic;
};

/// tcp with UCP_ERR_HANDLING_MODE_PEER (the default mode, which restricts
/// UCX to tcp lanes anyway), and shared memory, which UCX only picks without
/// it (FACTS.md); tcp stays in the list for the sockaddr connection.
/// Automatic picks rendezvous for the first, put for the second; the _put
/// and _rndv cases force the other.
const ucx_case tcp_case{"tcp", "tcp", true};
const ucx_case tcp_put_case{"tcp_put", "tcp", true, ucx_kv_path::put};
const ucx_case tcp_rndv_case{"tcp_rndv", "tcp", true, ucx_kv_path::am_rndv};
const ucx_case shared_memory_case{"shared_memory", "sm,self,tcp", false};
const ucx_case shared_memory_rndv_case{"shared_memory_rndv", "sm,self,tcp", false,
                                       ucx_kv_path::am_rndv};

void PrintTo(const ucx_case& c, std::ostream* os) {
  *os << c.name;
}

/// A ucx_peer child and what it printed when it was ready.
struct peer_process {
  child_process child;
  region_id pool_region = 0;
  size_t pool_bytes = 0;
  std::string address;
};

/// Starts ucx_peer and reads its REGION and LISTENING lines; nullopt (with
/// the reason recorded as a test failure) if it did not come up.
std::optional<peer_process> spawn_peer(const ucx_case& c, size_t pool_bytes,
                                       const std::string& listen = "127.0.0.1:0") {
  child_options opts;
  // A restarted peer re-binds its predecessor's port (FACTS.md).
  opts.env.push_back("UCX_TCP_CM_REUSEADDR=y");
  auto child = child_process::spawn(
    TESSERA_UCX_PEER,
    {"--tls=" + c.tls, std::string{"--error-handling="} + (c.peer_error_handling ? "peer" : "none"),
     "--peer-timeout-ms=" + std::to_string(peer_timeout.count()),
     "--pool-bytes=" + std::to_string(pool_bytes), "--listen=" + listen},
    opts);
  if (!child) {
    ADD_FAILURE() << to_string(child.error());
    return std::nullopt;
  }
  peer_process p{std::move(*child)};
  auto region_line = p.child.read_line(process_timeout);
  auto listen_line = region_line ? p.child.read_line(process_timeout) : region_line;
  if (!region_line || !listen_line) {
    ADD_FAILURE() << "ucx_peer did not start: "
                  << to_string(region_line ? listen_line.error() : region_line.error());
    return std::nullopt;
  }
  std::istringstream region{*region_line}, listening{*listen_line};
  std::string region_word, listen_word;
  region >> region_word >> p.pool_region >> p.pool_bytes;
  listening >> listen_word >> p.address;
  if (region_word != "REGION" || listen_word != "LISTENING" || p.address.empty()) {
    ADD_FAILURE() << "ucx_peer printed '" << *region_line << "' / '" << *listen_line << "'";
    return std::nullopt;
  }
  return p;
}

/// This process's side: a transport configured like the peer.
std::unique_ptr<ucx_transport> make_sender(const ucx_case& c, recorder& events) {
  transport_options o;
  o.peer_timeout = peer_timeout;
  ucx_options u;
  u.tls = c.tls;
  u.peer_error_handling = c.peer_error_handling;
  u.kv_path = c.kv_path;
  auto t = ucx_transport::make(o, u);
  if (!t) {
    ADD_FAILURE() << to_string(t.error());
    return nullptr;
  }
  (*t)->set_handler(&events);
  return std::move(*t);
}

std::vector<std::byte> chunk_frame(uint64_t id) {
  wire::token_chunk c;
  c.id = id;
  c.tokens = {static_cast<int32_t>(id % 32000)};
  c.text = std::to_string(id);
  auto f = wire::encode(wire::wire_message{c});
  if (!f)
    throw std::runtime_error("encode failed");
  return std::move(*f);
}

/// A completion that records into `log` as operation `i` and keeps `log`
/// alive: a test that stops waiting never leaves a completion pointing at
/// a destroyed log for the transport to run later.
completion record_in(const std::shared_ptr<completion_log>& log, uint64_t i) {
  return [log, done = log->make(i)](const caf::error& err) { done(err); };
}

/// Sends `n` "chunks" messages with ids [first, first + n) and checks that
/// every send completed without error.
void send_chunks(ucx_transport& t, peer_id to, uint64_t first, uint64_t n) {
  auto log = std::make_shared<completion_log>();
  for (uint64_t i = 0; i < n; ++i)
    t.send(to, message{"chunks", chunk_frame(first + i)}, record_in(log, i));
  ASSERT_TRUE(log->wait_for_count(n)) << log->count() << " of " << n << " sends completed";
  for (auto& [i, r] : log->all()) {
    ASSERT_EQ(r.size(), 1u) << "send " << i;
    ASSERT_FALSE(r[0]) << "send " << i << ": " << to_string(r[0]);
  }
}

/// Asks the peer for its counters and waits for the answer: "received",
/// "out_of_order", "verified", "mismatched", "pending", "errors". A
/// wire_error the peer sends first (its first problem) fails the test.
std::map<std::string, uint64_t> ask_report(ucx_transport& t, peer_id to, recorder& events) {
  size_t seen = events.message_count();
  t.send(to, message{"report", test::heartbeat_frame(0)}, {});
  std::map<std::string, uint64_t> counters;
  for (;;) {
    if (!events.wait([&] { return events.messages.size() > seen; })) {
      ADD_FAILURE() << "no report from the peer";
      return counters;
    }
    std::vector<std::byte> frame;
    {
      std::lock_guard lock{events.mu};
      frame = events.messages[seen++].second.frame;
    }
    auto m = wire::decode(frame);
    if (!m) {
      ADD_FAILURE() << "undecodable report: " << to_string(m.error());
      return counters;
    }
    if (auto* e = std::get_if<wire::wire_error>(&*m)) {
      ADD_FAILURE() << "peer: " << e->message;
      continue;
    }
    auto* c = std::get_if<wire::token_chunk>(&*m);
    if (!c) {
      ADD_FAILURE() << "unexpected report message";
      return counters;
    }
    std::istringstream in{c->text};
    std::string item;
    while (in >> item) {
      auto eq = item.find('=');
      counters[item.substr(0, eq)] = std::stoull(item.substr(eq + 1));
    }
    return counters;
  }
}

/// Connects `t` to `peer` and proves the connection with 10 control
/// messages the peer reports back; nullopt (a test failure recorded) when
/// it cannot connect.
std::optional<peer_id> connect_checked(ucx_transport& t, const peer_process& peer, recorder& events) {
  auto to = t.connect(peer.address);
  if (!to) {
    ADD_FAILURE() << "connect: " << to_string(to.error());
    return std::nullopt;
  }
  send_chunks(t, *to, 0, 10);
  EXPECT_EQ(ask_report(t, *to, events)["received"], 10u);
  return *to;
}

/// Waits up to `within` for `events` to report a failed peer, then checks
/// that exactly one was reported: `to`, with peer_failed.
void expect_one_peer_failure(recorder& events, peer_id to, milliseconds within) {
  ASSERT_TRUE(events.wait([&] { return !events.failed.empty(); }, within))
    << "on_peer_failed did not fire within " << within.count() << " ms";
  std::lock_guard lock{events.mu};
  ASSERT_EQ(events.failed.size(), 1u);
  EXPECT_EQ(events.failed[0].first, to);
  EXPECT_EQ(code_of(events.failed[0].second), code(transport_errc::peer_failed))
    << to_string(events.failed[0].second);
}

/// Stops the peer (SIGSTOP) and waits until it is stopped: its kernel
/// keeps its sockets open and acknowledging, its progress thread is frozen.
/// (The signal takes effect asynchronously; without the wait, the peer
/// could still answer what we send next.)
void stop(peer_process& p) {
  p.child.kill(SIGSTOP);
  siginfo_t info{};
  // WNOWAIT: the state stays for child_process::wait to reap later.
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(p.child.pid()), &info, WSTOPPED | WEXITED | WNOWAIT),
            0);
  ASSERT_EQ(info.si_code, CLD_STOPPED);
}

/// Disconnects from the peer, which then exits: 0 when all its checks held.
void expect_clean_exit(ucx_transport& t, peer_id to, peer_process& p) {
  t.disconnect(to);
  auto status = p.child.wait(process_timeout);
  ASSERT_TRUE(status) << to_string(status.error());
  EXPECT_EQ(*status, 0) << "ucx_peer reported a failed check (see its stderr)";
}

class UcxTwoProcessTest : public ::testing::TestWithParam<ucx_case> {};

TEST_P(UcxTwoProcessTest, TenThousandControlMessagesArriveInOrder) {
  auto peer = spawn_peer(GetParam(), size_t{1} << 20);
  ASSERT_TRUE(peer);
  recorder events; // outlives the transport
  auto t = make_sender(GetParam(), events);
  ASSERT_TRUE(t);
  auto to = t->connect(peer->address);
  ASSERT_TRUE(to) << to_string(to.error());

  constexpr uint64_t n = 10'000;
  send_chunks(*t, *to, 0, n);
  // "report" travels behind the chunks on the same endpoint.
  auto report = ask_report(*t, *to, events);
  EXPECT_EQ(report["received"], n);
  EXPECT_EQ(report["out_of_order"], 0u);
  EXPECT_EQ(report["errors"], 0u);
  expect_clean_exit(*t, *to, *peer);
}

TEST_P(UcxTwoProcessTest, ThousandBlocksArriveBitExact) {
  constexpr size_t src_bytes = size_t{64} << 20;
  constexpr size_t pool_bytes = size_t{64} << 20;
  constexpr uint64_t max_block = uint64_t{256} << 10;
  std::vector<std::byte> src(src_bytes); // registered: outlives the transport
  std::mt19937_64 rng{20240611};
  for (size_t i = 0; i < src.size(); i += 8) {
    uint64_t v = rng();
    std::memcpy(src.data() + i, &v, 8);
  }
  auto peer = spawn_peer(GetParam(), pool_bytes);
  ASSERT_TRUE(peer);
  ASSERT_EQ(peer->pool_bytes, pool_bytes);
  recorder events;
  auto t = make_sender(GetParam(), events);
  ASSERT_TRUE(t);
  auto src_region = t->register_region(src);
  ASSERT_TRUE(src_region) << to_string(src_region.error());
  auto to = t->connect(peer->address);
  ASSERT_TRUE(to) << to_string(to.error());

  // 1,000 blocks, 1 B .. 256 KiB (log-uniform: small and large sizes both
  // well covered), from random source offsets to unaligned, disjoint
  // places in the pool; 20 batches of 50.
  constexpr size_t n_blocks = 1000, per_batch = 50;
  wire::kv_transfer_batch want; // one per batch, sent as "expect"
  want.layout = {16, 4, 8, 128, protocol::dtype::bf16}; // 256 KiB blocks
  ASSERT_EQ(want.layout.block_bytes(), max_block);
  uint64_t dst_cursor = 0;
  auto log = std::make_shared<completion_log>();
  size_t batches = 0;
  for (size_t i = 0; i < n_blocks; i += per_batch, ++batches) {
    transfer_batch batch;
    batch.batch_id = 1000 + batches;
    want.batch_id = batch.batch_id;
    want.blocks.clear();
    for (size_t k = i; k < i + per_batch; ++k) {
      uint64_t size = k == 0   ? 1
                      : k == 1 ? max_block
                               : 1 + rng() % (uint64_t{1} << (rng() % 19));
      dst_cursor += rng() % 64;
      block_copy c{*src_region, rng() % (src_bytes - size + 1), peer->pool_region, dst_cursor, size};
      dst_cursor += size;
      batch.blocks.push_back(c);
      wire::kv_block_descriptor d;
      d.token_count = 1;
      d.src_offset = c.src_offset;
      d.size_bytes = size;
      d.dst_region = c.dst;
      d.dst_offset = c.dst_offset;
      d.checksum = engine::hash_bytes(src.data() + c.src_offset, size);
      d.hash = {~d.checksum, d.checksum};
      want.blocks.push_back(d);
    }
    auto frame = wire::encode(wire::wire_message{want});
    ASSERT_TRUE(frame) << to_string(frame.error());
    t->send(*to, message{"expect", std::move(*frame)}, {});
    t->transfer(*to, std::move(batch), record_in(log, batches));
  }
  ASSERT_LE(dst_cursor, pool_bytes);
  ASSERT_TRUE(log->wait_for_count(batches));
  for (auto& [b, r] : log->all()) {
    ASSERT_EQ(r.size(), 1u);
    ASSERT_FALSE(r[0]) << "batch " << b << ": " << to_string(r[0]);
  }
  // A transfer's completion means its blocks-arrived notice left; the
  // report request goes behind every notice on the same endpoint.
  auto report = ask_report(*t, *to, events);
  EXPECT_EQ(report["verified"], n_blocks);
  EXPECT_EQ(report["mismatched"], 0u);
  EXPECT_EQ(report["pending"], 0u);
  EXPECT_EQ(report["errors"], 0u);
  expect_clean_exit(*t, *to, *peer);
}

INSTANTIATE_TEST_SUITE_P(Loopback, UcxTwoProcessTest,
                         ::testing::Values(tcp_case, tcp_put_case, shared_memory_case,
                                           shared_memory_rndv_case),
                         [](const ::testing::TestParamInfo<ucx_case>& info) {
                           return info.param.name;
                         });

// Detecting a dead peer needs UCP_ERR_HANDLING_MODE_PEER: these run over tcp.
TEST(UcxTwoProcessFailureTest, KilledReceiverFailsNextSendWithinPeerTimeout) {
  std::vector<std::byte> src(size_t{1} << 20, std::byte{7});
  auto peer = spawn_peer(tcp_case, size_t{1} << 20);
  ASSERT_TRUE(peer);
  recorder events;
  auto t = make_sender(tcp_case, events);
  ASSERT_TRUE(t);
  auto src_region = t->register_region(src);
  ASSERT_TRUE(src_region);
  auto to = connect_checked(*t, *peer, events);
  ASSERT_TRUE(to);

  // SIGKILL: no BYE. Keep sending, one send at a time, until one fails;
  // each must complete (succeed or fail), none may hang.
  auto killed = clk::now();
  peer->child.kill(SIGKILL);
  auto deadline = killed + peer_timeout + detection_slack;
  caf::error failure;
  uint64_t sends = 0;
  while (!failure) {
    auto left = std::chrono::duration_cast<milliseconds>(deadline - clk::now());
    ASSERT_GT(left.count(), 0) << "no send failed within peer_timeout + slack (" << sends
                               << " sends completed)";
    auto log = std::make_shared<completion_log>();
    t->send(*to, message{"chunks", chunk_frame(10 + sends)}, record_in(log, 0));
    ASSERT_TRUE(log->wait_for_count(1, left)) << "a send to the killed peer hung";
    failure = log->of(0).at(0);
    ++sends;
  }
  auto detected_after = std::chrono::duration_cast<milliseconds>(clk::now() - killed);
  EXPECT_EQ(code_of(failure), code(transport_errc::peer_failed)) << to_string(failure);
  EXPECT_LE(detected_after, peer_timeout + detection_slack);
  RecordProperty("detected_after_ms", static_cast<int>(detected_after.count()));
  std::printf("dead peer: send %llu failed %lld ms after SIGKILL\n",
              static_cast<unsigned long long>(sends),
              static_cast<long long>(detected_after.count()));

  // on_peer_failed fired once, by the same deadline.
  ASSERT_NO_FATAL_FAILURE(expect_one_peer_failure(
    events, *to,
    std::chrono::duration_cast<milliseconds>(std::max(deadline - clk::now(), clk::duration::zero()))));

  // Posted after the failure: a send and a transfer complete with
  // peer_failed at once.
  auto after = std::make_shared<completion_log>();
  t->send(*to, message{"chunks", chunk_frame(0)}, record_in(after, 0));
  transfer_batch batch;
  batch.batch_id = 1;
  batch.blocks.push_back(block_copy{*src_region, 0, peer->pool_region, 0, 4096});
  t->transfer(*to, batch, record_in(after, 1));
  ASSERT_TRUE(after->wait_for_count(2, peer_timeout));
  EXPECT_EQ(code_of(after->of(0).at(0)), code(transport_errc::peer_failed));
  EXPECT_EQ(code_of(after->of(1).at(0)), code(transport_errc::peer_failed));

  auto status = peer->child.wait(process_timeout);
  ASSERT_TRUE(status);
  EXPECT_EQ(*status, 128 + SIGKILL);
}

// A batch in flight when its receiver dies (SIGKILL, no BYE) fails with
// peer_failed within peer_timeout, on either KV path; the peer is stopped
// first so that the batch cannot complete before the kill.
class UcxKvFailureTest : public ::testing::TestWithParam<ucx_case> {};

TEST_P(UcxKvFailureTest, BatchInFlightFailsWithPeerFailedWithinPeerTimeout) {
  constexpr size_t bytes = size_t{16} << 20;
  std::vector<std::byte> src(bytes, std::byte{3});
  auto peer = spawn_peer(GetParam(), bytes);
  ASSERT_TRUE(peer);
  recorder events;
  auto t = make_sender(GetParam(), events);
  ASSERT_TRUE(t);
  ASSERT_EQ(t->kv_path(), GetParam().kv_path);
  auto src_region = t->register_region(src);
  ASSERT_TRUE(src_region);
  auto to = connect_checked(*t, *peer, events);
  ASSERT_TRUE(to);

  // 256 blocks of 64 KiB scattered (every other slot of the pool's first
  // half and of the source): 256 runs on the rendezvous path.
  stop(*peer);
  transfer_batch batch;
  batch.batch_id = 5;
  constexpr uint64_t block = uint64_t{64} << 10;
  for (uint64_t i = 0; i < 128; ++i)
    batch.blocks.push_back(block_copy{*src_region, 2 * i * block, peer->pool_region,
                                      2 * i * block, block});
  auto log = std::make_shared<completion_log>();
  t->transfer(*to, batch, record_in(log, 0));
  auto killed = clk::now();
  peer->child.kill(SIGKILL);
  ASSERT_TRUE(log->wait_for_count(1, peer_timeout + detection_slack))
    << "the batch to the killed peer hung";
  auto failed_after = std::chrono::duration_cast<milliseconds>(clk::now() - killed);
  EXPECT_EQ(code_of(log->of(0).at(0)), code(transport_errc::peer_failed))
    << to_string(log->of(0).at(0));
  EXPECT_LE(failed_after, peer_timeout + detection_slack);
  std::printf("killed mid-batch (%s): batch failed %lld ms after SIGKILL\n",
              std::string{to_string(t->kv_path())}.c_str(),
              static_cast<long long>(failed_after.count()));
  ASSERT_NO_FATAL_FAILURE(expect_one_peer_failure(events, *to, detection_slack));
  // Later batches fail at once, never hang.
  auto after = std::make_shared<completion_log>();
  t->transfer(*to, batch, record_in(after, 0));
  ASSERT_TRUE(after->wait_for_count(1, peer_timeout));
  EXPECT_EQ(code_of(after->of(0).at(0)), code(transport_errc::peer_failed));
  auto status = peer->child.wait(process_timeout);
  ASSERT_TRUE(status);
  EXPECT_EQ(*status, 128 + SIGKILL);
}

// A stopped process keeps its sockets open and its kernel keeps
// acknowledging: no endpoint error, no keepalive failure. A transfer waits
// for the peer's acknowledgement of its puts (put path) or of the batch
// (rendezvous path); the stall check fails it.
TEST_P(UcxKvFailureTest, StoppedReceiverFailsTransferWithinPeerTimeout) {
  std::vector<std::byte> src(size_t{1} << 20, std::byte{7});
  auto peer = spawn_peer(GetParam(), size_t{1} << 20);
  ASSERT_TRUE(peer);
  recorder events;
  auto t = make_sender(GetParam(), events);
  ASSERT_TRUE(t);
  auto src_region = t->register_region(src);
  ASSERT_TRUE(src_region);
  auto to = connect_checked(*t, *peer, events);
  ASSERT_TRUE(to);

  stop(*peer);
  auto stopped = clk::now();
  transfer_batch batch;
  batch.batch_id = 1;
  batch.blocks.push_back(block_copy{*src_region, 0, peer->pool_region, 0, src.size()});
  auto log = std::make_shared<completion_log>();
  t->transfer(*to, batch, record_in(log, 0));
  ASSERT_TRUE(log->wait_for_count(1, stall_bound + detection_slack))
    << "a transfer to the stopped peer hung";
  auto failed_after = std::chrono::duration_cast<milliseconds>(clk::now() - stopped);
  EXPECT_EQ(code_of(log->of(0).at(0)), code(transport_errc::peer_failed))
    << to_string(log->of(0).at(0));
  EXPECT_GE(failed_after, peer_timeout); // not before the peer had its time
  EXPECT_LE(failed_after, stall_bound + detection_slack);
  RecordProperty("detected_after_ms", static_cast<int>(failed_after.count()));
  std::printf("stopped peer: transfer failed %lld ms after SIGSTOP\n",
              static_cast<long long>(failed_after.count()));
  ASSERT_NO_FATAL_FAILURE(expect_one_peer_failure(events, *to, detection_slack));
  auto after = std::make_shared<completion_log>();
  t->send(*to, message{"chunks", chunk_frame(10)}, record_in(after, 0));
  ASSERT_TRUE(after->wait_for_count(1, peer_timeout));
  EXPECT_EQ(code_of(after->of(0).at(0)), code(transport_errc::peer_failed));

  peer->child.kill(SIGKILL); // a stopped process dies of SIGKILL too
  auto status = peer->child.wait(process_timeout);
  ASSERT_TRUE(status);
  EXPECT_EQ(*status, 128 + SIGKILL);
}

// Detecting a dead peer needs UCP_ERR_HANDLING_MODE_PEER: tcp only.
INSTANTIATE_TEST_SUITE_P(Tcp, UcxKvFailureTest, ::testing::Values(tcp_put_case, tcp_rndv_case),
                         [](const ::testing::TestParamInfo<ucx_case>& info) {
                           return info.param.name;
                         });

// The destructor says BYE and closes gracefully, bounded by peer_timeout;
// a peer that never answers must not make it hang or abort.
TEST(UcxTwoProcessFailureTest, DestroyingTransportWithStoppedReceiverReturnsInPeerTimeout) {
  auto peer = spawn_peer(tcp_case, size_t{1} << 20);
  ASSERT_TRUE(peer);
  recorder events;
  auto t = make_sender(tcp_case, events);
  ASSERT_TRUE(t);
  auto to = connect_checked(*t, *peer, events);
  ASSERT_TRUE(to);
  stop(*peer);
  auto start = clk::now();
  t.reset();
  EXPECT_LE(clk::now() - start, peer_timeout + detection_slack);
  peer->child.kill(SIGKILL);
  auto status = peer->child.wait(process_timeout);
  ASSERT_TRUE(status);
  EXPECT_EQ(*status, 128 + SIGKILL);
}

TEST(UcxTwoProcessFailureTest, RestartedReceiverIsReachableAgain) {
  recorder events;
  auto t = make_sender(tcp_case, events);
  ASSERT_TRUE(t);
  auto first = spawn_peer(tcp_case, size_t{1} << 20);
  ASSERT_TRUE(first);
  auto old_peer = t->connect(first->address);
  ASSERT_TRUE(old_peer) << to_string(old_peer.error());
  send_chunks(*t, *old_peer, 0, 10);
  first->child.kill(SIGKILL);
  ASSERT_TRUE(events.wait([&] { return !events.failed.empty(); }, peer_timeout + detection_slack));
  auto status = first->child.wait(process_timeout);
  ASSERT_TRUE(status);

  // A new process at the same address (its listener re-binds the port).
  auto second = spawn_peer(tcp_case, size_t{1} << 20, first->address);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->address, first->address);
  auto new_peer = t->connect(second->address);
  ASSERT_TRUE(new_peer) << to_string(new_peer.error());
  EXPECT_NE(*new_peer, *old_peer);
  send_chunks(*t, *new_peer, 0, 100);
  auto report = ask_report(*t, *new_peer, events);
  EXPECT_EQ(report["received"], 100u);
  EXPECT_EQ(report["out_of_order"], 0u);
  expect_clean_exit(*t, *new_peer, *second);
  // The old peer failed; the new one was closed by our disconnect.
  std::lock_guard lock{events.mu};
  ASSERT_EQ(events.failed.size(), 2u);
  EXPECT_EQ(events.failed[0].first, *old_peer);
  EXPECT_EQ(code_of(events.failed[0].second), code(transport_errc::peer_failed));
  EXPECT_EQ(events.failed[1].first, *new_peer);
  EXPECT_EQ(code_of(events.failed[1].second), code(transport_errc::closed));
}

} // namespace
} // namespace tessera::transport
