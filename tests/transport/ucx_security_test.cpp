// The UCX transport against a rogue peer, on loopback: the attacks a
// stray or hostile process can try on a node's wire. For each one: the
// node stays up, nothing reaches its handler that should not, the refusal
// is counted by reason, and a legitimate peer is still served afterwards.
// (The cluster-level version, with real `tessera node` processes and a
// request checked against one engine alone, is in tests/actors/cluster_test.)

#include <gtest/gtest.h>

#include <ucp/api/ucp.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "tests/support/sockets.hpp"
#include "tests/transport/transport_recorder.hpp"
#include "transport/ucx/ucx_handshake.hpp"
#include "transport/ucx/ucx_test_access.hpp"
#include "transport/ucx/ucx_transport.hpp"

namespace tessera::transport {
namespace {

using namespace std::chrono_literals;
using detail::ucx_test_access;
using test::completion_log;
using test::recorder;

/// Sends `bytes` to 127.0.0.1:`port` as a stray process would.
void raw_send(uint16_t port, const std::vector<uint8_t>& bytes,
              std::chrono::milliseconds linger = std::chrono::milliseconds{3000}) {
  EXPECT_TRUE(tessera::test::raw_send(port, bytes, linger)) << "cannot reach port " << port;
}

const std::string secret = "the-cluster-secret-0123456789abcdef";

transport_options options(const std::string& id, const std::string& key = secret) {
  transport_options o;
  o.peer_timeout = 2000ms;
  o.cluster_secret = key;
  o.identity = id;
  o.grants_only = !key.empty();
  return o;
}

/// `eager_max`: ucx_options::kv_eager_max_bytes (nullopt: the default).
std::unique_ptr<ucx_transport> make(const transport_options& o,
                                    std::optional<uint64_t> eager_max = std::nullopt) {
  ucx_options u;
  u.net_address = "127.0.0.1";
  if (eager_max)
    u.kv_eager_max_bytes = *eager_max;
  auto t = ucx_transport::make(o, u);
  EXPECT_TRUE(t) << (t ? std::string{} : to_string(t.error()));
  return t ? std::move(*t) : nullptr;
}

uint64_t rejected(const transport& t, const std::string& reason) {
  for (const auto& [r, n] : t.rejections())
    if (r == reason)
      return n;
  return 0;
}

/// Waits until `t` counted at least `n` refusals for `reason`.
bool wait_rejected(const transport& t, const std::string& reason, uint64_t n) {
  const auto until = std::chrono::steady_clock::now() + 20s;
  while (std::chrono::steady_clock::now() < until) {
    if (rejected(t, reason) >= n)
      return true;
    std::this_thread::sleep_for(5ms);
  }
  return false;
}

uint16_t port_of(const std::string& address) {
  return static_cast<uint16_t>(std::stoi(address.substr(address.rfind(':') + 1)));
}

/// The node under attack: a listening transport, and a check that a
/// legitimate peer still connects and is heard.
struct node_fixture {
  recorder rec;
  std::unique_ptr<ucx_transport> node;
  std::string address;

  node_fixture() {
    node = make(options("node"));
    if (!node)
      return;
    node->set_handler(&rec);
    auto a = node->listen("127.0.0.1:0");
    EXPECT_TRUE(a) << to_string(a.error());
    address = a ? *a : "";
  }

  /// A peer with the secret connects and sends a message the node hears.
  void expect_still_serving() {
    recorder r;
    auto good = make(options("good"));
    ASSERT_TRUE(good);
    good->set_handler(&r);
    auto p = good->connect(address);
    ASSERT_TRUE(p) << to_string(p.error());
    const auto before = rec.message_count();
    completion_log log;
    good->send(*p, message{"actor", std::vector<std::byte>(16, std::byte{7})}, log.make(0));
    ASSERT_TRUE(log.wait_for_count(1));
    EXPECT_FALSE(log.of(0).at(0));
    EXPECT_TRUE(rec.wait([&] { return rec.messages.size() > before; }));
    std::lock_guard lock{rec.mu};
    EXPECT_EQ(rec.messages.back().second.actor, "actor");
  }
};

TEST(UcxSecurityTest, APeerWithoutTheSecretCannotJoin) {
  node_fixture f;
  ASSERT_TRUE(f.node);
  auto rogue = make(options("rogue", ""));
  ASSERT_TRUE(rogue);
  auto p = rogue->connect(f.address);
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().code(), static_cast<uint8_t>(transport_errc::unauthenticated))
    << to_string(p.error());
  EXPECT_TRUE(f.rec.connected.empty());
  f.expect_still_serving();
}

TEST(UcxSecurityTest, APeerWithAWrongSecretCannotJoinAndIsCounted) {
  node_fixture f;
  ASSERT_TRUE(f.node);
  auto rogue = make(options("rogue", "a-wrong-secret-0123456789abcdef"));
  ASSERT_TRUE(rogue);
  auto p = rogue->connect(f.address);
  ASSERT_FALSE(p);
  EXPECT_NE(to_string(p.error()).find("bad_proof"), std::string::npos) << to_string(p.error());
  // The node closed on the rogue before revealing anything; the rogue's
  // wrong proof of the server was caught on its side, so the node counts
  // the closed handshake.
  EXPECT_TRUE(wait_rejected(*f.node, "closed", 1));
  EXPECT_TRUE(f.rec.connected.empty());
  f.expect_still_serving();
}

TEST(UcxSecurityTest, SeventeenRawBytesATruncatedAndAnOversizedHandshakeAreRefused) {
  node_fixture f;
  ASSERT_TRUE(f.node);
  const auto port = port_of(f.address);
  // UCX 1.13's sockaddr listener aborted the process on exactly this.
  raw_send(port, std::vector<uint8_t>(17, 0));
  EXPECT_TRUE(wait_rejected(*f.node, "malformed", 1));
  // A frame that declares 100 bytes and sends 10, then hangs up.
  std::vector<uint8_t> truncated(14, 'T');
  truncated[0] = 100;
  truncated[1] = truncated[2] = truncated[3] = 0;
  raw_send(port, truncated, 100ms);
  EXPECT_TRUE(wait_rejected(*f.node, "closed", 1));
  // A declared 1 GiB handshake message: refused on its length alone.
  raw_send(port, {0, 0, 0, 0x40});
  EXPECT_TRUE(wait_rejected(*f.node, "oversize", 1));
  EXPECT_TRUE(f.rec.connected.empty());
  f.expect_still_serving();
}

TEST(UcxSecurityTest, APortProbeThatSaysNothingIsNotARefusal) {
  node_fixture f;
  ASSERT_TRUE(f.node);
  const auto port = port_of(f.address);
  // tessera check and load balancers connect and hang up without a word.
  for (int i = 0; i < 3; ++i)
    raw_send(port, {}, 20ms);
  // A peer that starts a handshake and hangs up is still counted.
  std::vector<uint8_t> truncated(14, 'T');
  truncated[0] = 100;
  truncated[1] = truncated[2] = truncated[3] = 0;
  raw_send(port, truncated, 20ms);
  ASSERT_TRUE(wait_rejected(*f.node, "closed", 1));
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(rejected(*f.node, "closed"), 1u) << "the three probes were not counted";
  f.expect_still_serving();
}

TEST(UcxSecurityTest, AReplayedHandshakeIsRefused) {
  node_fixture f;
  ASSERT_TRUE(f.node);
  // Record a real client's messages as an eavesdropper would, by running
  // the client side by hand over a socket.
  const auto port = port_of(f.address);
  auto frame = [](const std::vector<std::byte>& body) {
    std::vector<uint8_t> out(4 + body.size());
    auto n = static_cast<uint32_t>(body.size());
    std::memcpy(out.data(), &n, 4);
    std::memcpy(out.data() + 4, body.data(), body.size());
    return out;
  };
  auto read_frame = [](int fd) {
    uint32_t n = 0;
    EXPECT_EQ(::recv(fd, &n, 4, MSG_WAITALL), 4);
    std::vector<std::byte> body(n);
    EXPECT_EQ(::recv(fd, body.data(), n, MSG_WAITALL), static_cast<ssize_t>(n));
    return body;
  };
  auto open = [&] {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    auto sa = tessera::test::loopback_address(port);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
    return fd;
  };
  std::vector<uint8_t> m1, m3;
  {
    detail::handshake c{detail::handshake::role::client, secret,
                        {"decode", std::vector<std::byte>(40, std::byte{1}), 77}};
    int fd = open();
    auto b1 = c.start();
    m1 = frame(b1);
    ASSERT_EQ(::send(fd, m1.data(), m1.size(), 0), static_cast<ssize_t>(m1.size()));
    auto b3 = c.on_message(read_frame(fd));
    ASSERT_TRUE(b3);
    m3 = frame(*b3);
    ::close(fd); // never sends M3 itself
  }
  const auto bad_before = rejected(*f.node, "bad_proof");
  int fd = open();
  ASSERT_EQ(::send(fd, m1.data(), m1.size(), 0), static_cast<ssize_t>(m1.size()));
  (void) read_frame(fd); // a fresh challenge
  ASSERT_EQ(::send(fd, m3.data(), m3.size(), 0), static_cast<ssize_t>(m3.size()));
  EXPECT_TRUE(wait_rejected(*f.node, "bad_proof", bad_before + 1));
  ::close(fd);
  EXPECT_TRUE(f.rec.connected.empty());
  f.expect_still_serving();
}

TEST(UcxSecurityTest, AUcxEndpointThatBypassedTheFrontDoorReachesNothing) {
  node_fixture f;
  ASSERT_TRUE(f.node);
  // A rogue that learned the node's UCX worker address talks UCX to it
  // directly: its active messages carry no session the node drew.
  auto address = ucx_test_access::worker_address(*f.node);
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_AM;
  ucp_context_h ctx = nullptr;
  ASSERT_EQ(ucp_init(&params, nullptr, &ctx), UCS_OK);
  ucp_worker_params_t wp{};
  ucp_worker_h worker = nullptr;
  ASSERT_EQ(ucp_worker_create(ctx, &wp, &worker), UCS_OK);
  ucp_ep_params_t ep{};
  ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
  ep.address = reinterpret_cast<const ucp_address_t*>(address.data());
  ucp_ep_h h = nullptr;
  ASSERT_EQ(ucp_ep_create(worker, &ep, &h), UCS_OK);
  const char actor[] = "router";
  std::vector<std::byte> body(64, std::byte{0x55});
  for (unsigned id : {1u, 3u, 4u, 5u, 7u, 8u}) {
    // Header: a guessed session, then the actor name.
    std::vector<std::byte> hdr(8 + sizeof(actor));
    uint64_t guess = 0x1234567890abcdefULL + id;
    std::memcpy(hdr.data(), &guess, 8);
    std::memcpy(hdr.data() + 8, actor, sizeof(actor));
    ucp_request_param_t rp{};
    auto* req = ucp_am_send_nbx(h, id, hdr.data(), hdr.size(), body.data(), body.size(), &rp);
    while (UCS_PTR_IS_PTR(req) && ucp_request_check_status(req) == UCS_INPROGRESS)
      ucp_worker_progress(worker);
    if (UCS_PTR_IS_PTR(req))
      ucp_request_free(req);
  }
  EXPECT_TRUE(wait_rejected(*f.node, "no_session", 6));
  ucp_request_param_t cp{};
  cp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  cp.flags = UCP_EP_CLOSE_FLAG_FORCE;
  auto* close = ucp_ep_close_nbx(h, &cp);
  while (UCS_PTR_IS_PTR(close) && ucp_request_check_status(close) == UCS_INPROGRESS)
    ucp_worker_progress(worker);
  if (UCS_PTR_IS_PTR(close))
    ucp_request_free(close);
  ucp_worker_destroy(worker);
  ucp_cleanup(ctx);
  EXPECT_EQ(f.rec.message_count(), 0u);
  EXPECT_TRUE(f.rec.connected.empty());
  f.expect_still_serving();
}

/// A UCX context of the rogue's own, over tcp only (as from another host).
struct rogue_ucx {
  ucp_context_h ctx = nullptr;
  ucp_worker_h worker = nullptr;
  ucp_ep_h ep = nullptr;

  explicit rogue_ucx(const std::vector<std::byte>& address) {
    ucp_config_t* config = nullptr;
    EXPECT_EQ(ucp_config_read(nullptr, nullptr, &config), UCS_OK);
    EXPECT_EQ(ucp_config_modify(config, "TLS", "tcp"), UCS_OK);
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features = UCP_FEATURE_AM | UCP_FEATURE_RMA;
    EXPECT_EQ(ucp_init(&params, config, &ctx), UCS_OK);
    ucp_config_release(config);
    ucp_worker_params_t wp{};
    EXPECT_EQ(ucp_worker_create(ctx, &wp, &worker), UCS_OK);
    ucp_ep_params_t ep_params{};
    ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    ep_params.address = reinterpret_cast<const ucp_address_t*>(address.data());
    EXPECT_EQ(ucp_ep_create(worker, &ep_params, &ep), UCS_OK);
  }

  void wait(ucs_status_ptr_t req) {
    const auto until = std::chrono::steady_clock::now() + 2s;
    while (UCS_PTR_IS_PTR(req) && ucp_request_check_status(req) == UCS_INPROGRESS
           && std::chrono::steady_clock::now() < until)
      ucp_worker_progress(worker);
    if (UCS_PTR_IS_PTR(req)) {
      if (ucp_request_check_status(req) == UCS_INPROGRESS)
        ucp_request_cancel(worker, req);
      ucp_request_free(req);
    }
  }

  ~rogue_ucx() {
    ucp_request_param_t cp{};
    cp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    cp.flags = UCP_EP_CLOSE_FLAG_FORCE;
    wait(ucp_ep_close_nbx(ep, &cp));
    ucp_worker_destroy(worker);
    ucp_cleanup(ctx);
  }
};

TEST(UcxSecurityTest, AOneSidedPutFromABypassingEndpointDoesNotLand) {
  // The strongest thing a process that reaches UCX's port can try: a
  // one-sided put to an address in the node, with a key it packed itself
  // (no key of the node's ever left it). With grants only, the node's
  // UCX context has no RMA and its tcp transport no put support, so there
  // is nothing to carry it out.
  node_fixture f;
  ASSERT_TRUE(f.node);
  std::vector<std::byte> pool(1 << 16, std::byte{0});
  ASSERT_TRUE(f.node->register_region(pool));
  {
    rogue_ucx r{ucx_test_access::worker_address(*f.node)};
    std::vector<std::byte> mine(4096, std::byte{0x66});
    ucp_mem_map_params_t mp{};
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mp.address = mine.data();
    mp.length = mine.size();
    ucp_mem_h memh = nullptr;
    ASSERT_EQ(ucp_mem_map(r.ctx, &mp, &memh), UCS_OK);
    void* packed = nullptr;
    size_t packed_len = 0;
    ASSERT_EQ(ucp_rkey_pack(r.ctx, memh, &packed, &packed_len), UCS_OK);
    ucp_rkey_h rkey = nullptr;
    if (ucp_ep_rkey_unpack(r.ep, packed, &rkey) == UCS_OK) {
      ucp_request_param_t rp{};
      r.wait(ucp_put_nbx(r.ep, mine.data(), mine.size(),
                         reinterpret_cast<uint64_t>(pool.data()), rkey, &rp));
      ucp_request_param_t fp{};
      r.wait(ucp_ep_flush_nbx(r.ep, &fp));
      ucp_rkey_destroy(rkey);
    }
    ucp_rkey_buffer_release(packed);
    ucp_mem_unmap(r.ctx, memh);
  }
  for (size_t i = 0; i < 4096; ++i)
    ASSERT_EQ(pool[i], std::byte{0}) << "byte " << i << " of the node's memory was written";
  f.expect_still_serving();
}

TEST(UcxSecurityTest, ADeclaredGigabyteMessageIsRefusedBeforeAnythingIsAllocated) {
  node_fixture f;
  ASSERT_TRUE(f.node);
  recorder r;
  auto peer = make(options("big"));
  ASSERT_TRUE(peer);
  peer->set_handler(&r);
  auto p = peer->connect(f.address);
  ASSERT_TRUE(p) << to_string(p.error());
  // 1 GiB of address space the sender never touches: only its length
  // travels (rendezvous), unless the receiver asks for the data.
  const size_t gib = size_t{1} << 30;
  void* mem = ::mmap(nullptr, gib, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  completion_log log;
  ucx_test_access::send_unchecked(*peer, *p, "router",
                                  {static_cast<const std::byte*>(mem), gib}, true, log.make(0));
  EXPECT_TRUE(wait_rejected(*f.node, "too_large", 1));
  // The node disconnected the peer.
  EXPECT_TRUE(r.wait([&] { return !r.failed.empty(); }));
  EXPECT_TRUE(log.wait_for_count(1));
  EXPECT_EQ(f.rec.message_count(), 0u);
  peer.reset();
  ::munmap(mem, gib);
  f.expect_still_serving();
}

/// A prefill-side sender connected to the node, for KV transfers: a
/// 1 MiB pool registered on the node (zeros) and a 1 MiB source on the
/// sender (0xAB); `from` is the sender as the node knows it.
struct kv_link {
  std::vector<std::byte> pool = std::vector<std::byte>(1 << 20, std::byte{0});
  region_id region{};
  recorder r;
  std::unique_ptr<ucx_transport> sender;
  std::vector<std::byte> src = std::vector<std::byte>(1 << 20, std::byte{0xAB});
  region_id src_region{};
  peer_id p{};
  peer_id from{};
};

/// Opens `k` to `f`'s node; `eager_max` as make's. Check HasFatalFailure.
void open_kv_link(node_fixture& f, uint64_t eager_max, kv_link& k) {
  auto region = f.node->register_region(k.pool);
  ASSERT_TRUE(region) << to_string(region.error());
  k.region = *region;
  k.sender = make(options("prefill"), eager_max);
  ASSERT_TRUE(k.sender);
  k.sender->set_handler(&k.r);
  auto src_region = k.sender->register_region(k.src);
  ASSERT_TRUE(src_region);
  k.src_region = *src_region;
  EXPECT_FALSE(k.sender->caps().rma) << "no keys to whole regions with grants_only";
  auto p = k.sender->connect(f.address);
  ASSERT_TRUE(p) << to_string(p.error());
  k.p = *p;
  ASSERT_TRUE(f.rec.wait([&] { return !f.rec.connected.empty(); }));
  k.from = f.rec.connected.at(0).first;
  EXPECT_EQ(f.node->peer_identity(k.from), "prefill");
}

/// A sender whose runs go eager (`eager_max` above every run here) or by
/// rendezvous (0) writes only into ranges the node granted it, while the
/// grant lasts: the same refusals either way, and a refused eager run is
/// never copied into place.
void kv_blocks_land_only_in_granted_ranges(uint64_t eager_max) {
  const bool eager = eager_max > 0;
  node_fixture f;
  ASSERT_TRUE(f.node);
  kv_link k;
  open_kv_link(f, eager_max, k);
  if (::testing::Test::HasFatalFailure())
    return;
  auto& [pool, region, r, sender, src, src_region, p, from] = k;
  auto eager_runs = [&] { return ucx_test_access::eager_runs_received(*f.node); };

  auto transfer = [&](uint64_t dst_offset, uint64_t size) {
    completion_log log;
    transfer_batch b;
    b.batch_id = 1;
    b.blocks.push_back({src_region, 0, region, dst_offset, size});
    sender->transfer(p, b, log.make(0));
    EXPECT_TRUE(log.wait_for_count(1));
    return log.of(0).at(0);
  };
  // No grant: refused, the pool untouched.
  auto err = transfer(0, 4096);
  ASSERT_TRUE(err);
  EXPECT_NE(to_string(err).find("not granted"), std::string::npos) << to_string(err);
  EXPECT_EQ(pool[0], std::byte{0});
  EXPECT_GE(rejected(*f.node, "not_granted"), 1u);
  EXPECT_EQ(eager_runs(), 0u) << "a refused run is not copied into place";

  // Two granted blocks; a transfer into them lands.
  auto g = f.node->grant(from, {{region, 8192, 4096}, {region, 12288, 4096}});
  ASSERT_TRUE(g) << to_string(g.error());
  EXPECT_FALSE(transfer(8192, 8192)) << "a run across two adjacent granted blocks";
  EXPECT_EQ(pool[8192], std::byte{0xAB});
  EXPECT_EQ(pool[16383], std::byte{0xAB});
  EXPECT_EQ(eager_runs(), eager ? 1u : 0u) << "the run went the path its sender chose";
  // One byte past the grant: refused, nothing written.
  ASSERT_TRUE(transfer(12288, 4097));
  EXPECT_EQ(pool[16384], std::byte{0});
  // A range the grant does not cover at all.
  ASSERT_TRUE(transfer(0, 4096));
  EXPECT_EQ(pool[0], std::byte{0});
  // Revoked: refused again.
  f.node->revoke(*g);
  ASSERT_TRUE(transfer(8192, 4096));
  EXPECT_EQ(eager_runs(), eager ? 1u : 0u) << "no refused run was copied into place";
  EXPECT_GE(rejected(*f.node, "not_granted"), 4u);
  f.expect_still_serving();
}

TEST(UcxSecurityTest, KvBlocksLandOnlyInGrantedRangesWhileTheGrantLasts) {
  kv_blocks_land_only_in_granted_ranges(0);
}

TEST(UcxSecurityTest, EagerKvRunsLandOnlyInGrantedRangesWhileTheGrantLasts) {
  kv_blocks_land_only_in_granted_ranges(uint64_t{1} << 20);
}

/// A batch whose notice rides in its first run's header (folded,
/// ucx_kv_am.hpp) is checked as strictly as one whose notice came alone:
/// outside the grants it is rejected (the sender's batch fails), counted,
/// and nothing lands or is reported; inside them it lands. A batch whose
/// notice is over the fold limit goes notice first, checked the same way.
/// Runs eager (`eager_max` above every run) or by rendezvous (0).
void folded_batches_are_checked_like_any_other(uint64_t eager_max) {
  node_fixture f;
  ASSERT_TRUE(f.node);
  constexpr uint64_t blk = 4096;
  kv_link k;
  open_kv_link(f, eager_max, k);
  if (::testing::Test::HasFatalFailure())
    return;
  auto& [pool, region, r, sender, src, src_region, p, from] = k;
  auto folded_sent = [&] { return ucx_test_access::folded_batches_sent(*sender); };
  auto folded_received = [&] { return ucx_test_access::folded_batches_received(*f.node); };
  auto arrived = [&] {
    std::lock_guard lock{f.rec.mu};
    return f.rec.batches.size();
  };
  auto transfer = [&](const transfer_batch& b) {
    completion_log log;
    sender->transfer(p, b, log.make(0));
    EXPECT_TRUE(log.wait_for_count(1));
    return log.of(0).at(0);
  };
  // `n` blocks into [dst, dst + n * blk), destination slots reversed so
  // that every block is a run of its own.
  auto scattered = [&](uint64_t dst, uint64_t n) {
    transfer_batch b;
    b.batch_id = n;
    for (uint64_t i = 0; i < n; ++i)
      b.blocks.push_back({src_region, i * blk, region, dst + (n - 1 - i) * blk, blk});
    return b;
  };

  // One block, no grant: one message carried the batch, and it is refused.
  auto err = transfer(scattered(0, 1));
  ASSERT_TRUE(err);
  EXPECT_NE(to_string(err).find("not granted"), std::string::npos) << to_string(err);
  EXPECT_EQ(folded_sent(), 1u);
  EXPECT_TRUE(wait_rejected(*f.node, "not_granted", 1));
  EXPECT_EQ(folded_received(), 1u) << "the refused batch's notice came in its run's header";
  EXPECT_EQ(pool[0], std::byte{0});
  EXPECT_EQ(arrived(), 0u) << "a refused batch is not reported";

  auto g = f.node->grant(from, {{region, 0, 64 * blk}});
  ASSERT_TRUE(g) << to_string(g.error());
  // Granted: the folded batch lands and the node reports it with its
  // blocks (from the folded notice).
  EXPECT_FALSE(transfer(scattered(0, 1)));
  EXPECT_EQ(pool[0], std::byte{0xAB});
  EXPECT_EQ(folded_sent(), 2u);
  EXPECT_EQ(folded_received(), 2u);
  ASSERT_TRUE(f.rec.wait([&] { return f.rec.batches.size() == 1; }));
  {
    std::lock_guard lock{f.rec.mu};
    EXPECT_EQ(f.rec.batches.back().second.batch_id, 1u);
    ASSERT_EQ(f.rec.batches.back().second.blocks.size(), 1u);
  }
  // Three runs, one folded notice; the last run one block past the grant:
  // refused as a whole, the granted runs landing changes nothing reported.
  EXPECT_FALSE(transfer(scattered(blk, 3)));
  EXPECT_EQ(folded_sent(), 3u);
  ASSERT_TRUE(transfer(scattered(62 * blk, 3)));
  EXPECT_EQ(folded_sent(), 4u);
  EXPECT_EQ(pool[64 * blk], std::byte{0});
  EXPECT_TRUE(wait_rejected(*f.node, "not_granted", 2));
  // 32 blocks: a notice over kv_folded_notice_max_bytes goes alone, and the
  // same checks hold.
  EXPECT_FALSE(transfer(scattered(0, 32)));
  EXPECT_EQ(folded_sent(), 4u) << "a 32-block notice is not folded";
  ASSERT_TRUE(transfer(scattered(40 * blk, 32)));
  EXPECT_EQ(pool[64 * blk], std::byte{0});
  EXPECT_TRUE(wait_rejected(*f.node, "not_granted", 3));
  EXPECT_EQ(folded_received(), 4u);
  // A rejected batch is never reported: its ack went back before the
  // sender's batch failed, and the receiver forgot it.
  EXPECT_EQ(arrived(), 3u) << "only the three granted batches were reported";
  f.expect_still_serving();
}

TEST(UcxSecurityTest, FoldedEagerBatchesAreCheckedAgainstTheGrants) {
  folded_batches_are_checked_like_any_other(uint64_t{1} << 20);
}

TEST(UcxSecurityTest, FoldedRendezvousBatchesAreCheckedAgainstTheGrants) {
  folded_batches_are_checked_like_any_other(0);
}

TEST(UcxSecurityTest, EagerAndRendezvousRunsDeliverTheSameBytes) {
  // Two senders, one sending every run eager and one by rendezvous, each
  // into its own granted half of the node's pool: the same batch (runs of
  // one block and of several, up to 1 MiB, and a block out of order) of
  // the same patterned source lands byte for byte in both halves.
  node_fixture f;
  ASSERT_TRUE(f.node);
  constexpr uint64_t half = uint64_t{2} << 20;
  std::vector<std::byte> pool(2 * half, std::byte{0});
  auto region = f.node->register_region(pool);
  ASSERT_TRUE(region) << to_string(region.error());
  std::vector<std::byte> src(half);
  for (size_t i = 0; i < src.size(); ++i)
    src[i] = static_cast<std::byte>((i * 2654435761u) >> 13);
  constexpr uint64_t blk = 64 << 10;
  // (source offset, destination offset in a half, size): 16 contiguous
  // blocks (one 1 MiB run), one block alone, two swapped blocks, a tail
  // of an odd size.
  const std::vector<std::array<uint64_t, 3>> layout = {
    {0, 0, 16 * blk}, {17 * blk, 16 * blk, blk}, {20 * blk, 22 * blk, blk},
    {21 * blk, 21 * blk, blk}, {24 * blk, 24 * blk, 4097},
  };
  struct sender_side {
    recorder rec;
    std::unique_ptr<ucx_transport> t;
    peer_id to = 0;
    region_id src = 0;
  };
  auto send_into = [&](sender_side& s, uint64_t base) {
    completion_log log;
    transfer_batch b;
    b.batch_id = 7;
    for (const auto& [so, d, size] : layout)
      b.blocks.push_back({s.src, so, *region, base + d, size});
    s.t->transfer(s.to, b, log.make(0));
    EXPECT_TRUE(log.wait_for_count(1));
    EXPECT_FALSE(log.of(0).at(0)) << to_string(log.of(0).at(0));
  };
  sender_side eager, rndv;
  size_t connected = 0;
  for (auto* s : {&eager, &rndv}) {
    const bool is_eager = s == &eager;
    s->t = make(options(is_eager ? "eager" : "rndv"), is_eager ? half : 0);
    ASSERT_TRUE(s->t);
    s->t->set_handler(&s->rec);
    auto sr = s->t->register_region(src);
    ASSERT_TRUE(sr);
    s->src = *sr;
    auto p = s->t->connect(f.address);
    ASSERT_TRUE(p) << to_string(p.error());
    s->to = *p;
    ++connected;
    ASSERT_TRUE(f.rec.wait([&] { return f.rec.connected.size() >= connected; }));
    const peer_id from = f.rec.connected.at(connected - 1).first;
    ASSERT_TRUE(f.node->grant(from, {{*region, is_eager ? 0 : half, half}}));
  }
  const auto eager_before = ucx_test_access::eager_runs_received(*f.node);
  send_into(eager, 0);
  const auto eager_runs = ucx_test_access::eager_runs_received(*f.node) - eager_before;
  // 16 blocks merge into one run; the other four are runs of their own.
  EXPECT_EQ(eager_runs, 5u) << "every run of the eager sender went eager";
  send_into(rndv, half);
  EXPECT_EQ(ucx_test_access::eager_runs_received(*f.node) - eager_before, eager_runs)
    << "none of the rendezvous sender's did";
  for (const auto& [so, d, size] : layout) {
    EXPECT_EQ(std::memcmp(pool.data() + d, src.data() + so, size), 0) << "eager, at " << d;
    EXPECT_EQ(std::memcmp(pool.data() + half + d, src.data() + so, size), 0)
      << "rendezvous, at " << d;
  }
  EXPECT_EQ(std::memcmp(pool.data(), pool.data() + half, half), 0)
    << "both halves hold the same bytes";
  f.expect_still_serving();
}

/// The "address:port" entries (hex, as /proc/net/tcp writes them) this
/// process listens on (TCP, IPv4 and IPv6): the sockets whose inodes are
/// among this process's descriptors.
std::set<std::string> listening_sockets() {
  std::set<std::string> inodes;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    auto target = std::filesystem::read_symlink(e.path(), ec).string();
    if (!ec && target.rfind("socket:[", 0) == 0)
      inodes.insert(target.substr(8, target.size() - 9));
  }
  std::set<std::string> out;
  for (const char* table : {"/proc/self/net/tcp", "/proc/self/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line); // header
    while (std::getline(in, line)) {
      std::istringstream ls(line);
      std::string sl, local, remote, state, queues, timer, retr, uid, timeout, inode;
      ls >> sl >> local >> remote >> state >> queues >> timer >> retr >> uid >> timeout >> inode;
      if (state == "0A" && inodes.contains(inode))
        out.insert(local);
    }
  }
  return out;
}

TEST(UcxSecurityTest, ANodeOnLoopbackListensOnLoopbackOnly) {
  node_fixture f;
  ASSERT_TRUE(f.node);
  f.expect_still_serving(); // endpoints up: UCX's tcp transport is listening too
  auto socks = listening_sockets();
  ASSERT_FALSE(socks.empty());
  for (const auto& a : socks)
    EXPECT_EQ(a.substr(0, a.find(':')), "0100007F")
      << "a listening socket on another address (hex, /proc/net/tcp): " << a;
}

TEST(UcxSecurityTest, GarbageOnEveryPortTheNodeListensOnLeavesItServing) {
  // Not only the front door: UCX's own tcp transport listens too (for the
  // endpoints made from worker addresses). Stray bytes there must not take
  // the process down either.
  node_fixture f;
  ASSERT_TRUE(f.node);
  f.expect_still_serving();
  std::vector<uint8_t> garbage(4096);
  for (size_t i = 0; i < garbage.size(); ++i)
    garbage[i] = static_cast<uint8_t>(i * 131 + 7);
  const auto socks = listening_sockets();
  EXPECT_GE(socks.size(), 2u) << "the front door and UCX's own tcp listener";
  for (const auto& a : socks) {
    auto port = static_cast<uint16_t>(std::stoul(a.substr(a.find(':') + 1), nullptr, 16));
    raw_send(port, std::vector<uint8_t>(17, 0), 200ms);
    raw_send(port, garbage, 200ms);
    raw_send(port, std::vector<uint8_t>(17, 0xff), 200ms);
  }
  f.expect_still_serving();
  EXPECT_EQ(f.rec.message_count(), 2u) << "only the two legitimate messages";
}

} // namespace
} // namespace tessera::transport
