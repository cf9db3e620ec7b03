// The UCX transport's same-host path with a cluster secret: a peer the
// kernel shows to run on this host as this uid (SO_PEERCRED on the front
// door's abstract unix socket), and that proves the secret, puts KV blocks
// one-sided over a shared-memory-only RMA context; every other peer keeps
// the grant path (rendezvous into granted ranges, no key of ours).

#include <gtest/gtest.h>

#include <ucp/api/ucp.h>

#include <arpa/inet.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <future>
#include <thread>

#include "tests/transport/transport_recorder.hpp"
#include "transport/ucx/ucx_front_door.hpp"
#include "transport/ucx/ucx_same_host.hpp"
#include "transport/ucx/ucx_support.hpp"
#include "transport/ucx/ucx_test_access.hpp"
#include "transport/ucx/ucx_transport.hpp"

namespace tessera::transport {
namespace {

using namespace std::chrono_literals;
using detail::ucx_test_access;
using test::completion_log;
using test::recorder;

const std::string secret = "the-cluster-secret-0123456789abcdef";
constexpr uint64_t pool_bytes = 1 << 20;
constexpr uint64_t block_bytes = 64 << 10;

transport_options options(const std::string& id, const std::string& key = secret) {
  transport_options o;
  o.peer_timeout = 2000ms;
  o.cluster_secret = key;
  o.identity = id;
  o.grants_only = !key.empty();
  return o;
}

/// A node as `ucx_tls = "sm,self,tcp"` runs it: error handling off (UCX
/// 1.13 connects no endpoints whose error handling differs), shared memory
/// allowed (where the same-host path applies); `tls` overrides.
ucx_options shm(const std::string& tls = "sm,self,tcp") {
  ucx_options u;
  u.tls = tls;
  u.peer_error_handling = false;
  u.net_address = "127.0.0.1";
  return u;
}

std::unique_ptr<ucx_transport> make(const transport_options& o, const ucx_options& u) {
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

template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds timeout = 10s) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    if (pred())
      return true;
    std::this_thread::sleep_for(5ms);
  }
  return pred();
}

sockaddr_in address_of(const std::string& address) {
  sockaddr_in sa{};
  EXPECT_TRUE(detail::parse_address(address, sa)) << address;
  return sa;
}

/// The receiving node: a listening transport with a 1 MiB pool.
struct node_fixture {
  recorder rec;
  std::unique_ptr<ucx_transport> node;
  allocated_region pool;
  std::string address;

  explicit node_fixture(const ucx_options& u = shm()) {
    node = make(options("decode"), u);
    if (!node)
      return;
    node->set_handler(&rec);
    auto r = node->allocate_region(pool_bytes);
    EXPECT_TRUE(r) << to_string(r.error());
    if (r)
      pool = *r;
    auto a = node->listen("127.0.0.1:0");
    EXPECT_TRUE(a) << to_string(a.error());
    address = a ? *a : "";
  }

  /// The id under which the node knows its `n`-th connected peer.
  peer_id connected(size_t n = 0) {
    EXPECT_TRUE(rec.wait([&] { return rec.connected.size() > n; }));
    std::lock_guard lock{rec.mu};
    return rec.connected.size() > n ? rec.connected.at(n).first : peer_id{0};
  }

  bool pool_is_zero() const {
    return std::all_of(pool.memory.begin(), pool.memory.end(),
                       [](std::byte b) { return b == std::byte{0}; });
  }
};

/// Eight 64 KiB blocks in reverse order plus an odd-sized one at an odd
/// offset, from `src` to `dst`.
transfer_batch scattered(region_id src, region_id dst) {
  transfer_batch b;
  b.batch_id = 42;
  for (uint64_t i = 0; i < 8; ++i)
    b.blocks.push_back({src, i * block_bytes, dst, (7 - i) * block_bytes, block_bytes});
  b.blocks.push_back({src, 9 * block_bytes + 3, dst, 9 * block_bytes + 5, 10007});
  return b;
}

void fill(std::span<std::byte> m) {
  for (size_t i = 0; i < m.size(); ++i)
    m[i] = static_cast<std::byte>((i * 131 + 17) % 251);
}

void expect_landed(const transfer_batch& b, std::span<const std::byte> src,
                   std::span<const std::byte> dst) {
  for (size_t i = 0; i < b.blocks.size(); ++i) {
    const auto& c = b.blocks[i];
    EXPECT_EQ(std::memcmp(src.data() + c.src_offset, dst.data() + c.dst_offset, c.size), 0)
      << "block " << i << " did not land bit-exact";
  }
}

TEST(UcxSameHostTest, ASameUidPeerPutsOverSharedMemoryAndItsBlocksLandBitExact) {
  node_fixture f;
  ASSERT_TRUE(f.node);
  ASSERT_FALSE(ucx_test_access::same_host_worker_address(*f.node).empty())
    << "the same-host path is on with a secret, sm allowed and error handling off";
  auto sender = make(options("prefill"), shm());
  ASSERT_TRUE(sender);
  auto src = sender->allocate_region(pool_bytes);
  ASSERT_TRUE(src);
  fill(src->memory);
  auto p = sender->connect(f.address);
  ASSERT_TRUE(p) << to_string(p.error());
  // The cluster context still announces no key (grants_only); the path is
  // per peer.
  EXPECT_FALSE(sender->caps().rma);
  EXPECT_TRUE(ucx_test_access::same_host(*sender, *p));
  const auto from = f.connected();
  EXPECT_EQ(f.node->peer_identity(from), "prefill") << "the handshake ran over the unix socket";
  EXPECT_TRUE(eventually([&] { return ucx_test_access::same_host(*f.node, from); }));

  auto g = f.node->grant(from, {{f.pool.id, 0, pool_bytes}});
  ASSERT_TRUE(g) << to_string(g.error());
  auto batch = scattered(src->id, f.pool.id);
  completion_log log;
  sender->transfer(*p, batch, log.make(0));
  ASSERT_TRUE(log.wait_for_count(1));
  ASSERT_FALSE(log.of(0).at(0)) << to_string(log.of(0).at(0));
  ASSERT_TRUE(f.rec.wait([&] { return !f.rec.batches.empty(); }));
  EXPECT_EQ(ucx_test_access::same_host_put_batches(*sender), 1u) << "by put, not rendezvous";
  expect_landed(batch, src->memory, f.pool.memory);
  {
    std::lock_guard lock{f.rec.mu};
    EXPECT_EQ(f.rec.batches.at(0).second.batch_id, 42u);
  }

  // A notice for blocks outside its grants still gets the peer refused.
  f.node->revoke(*g);
  completion_log late;
  sender->transfer(*p, scattered(src->id, f.pool.id), late.make(0));
  EXPECT_TRUE(eventually([&] { return rejected(*f.node, "not_granted") >= 1; }));
  EXPECT_TRUE(f.rec.wait([&] { return !f.rec.failed.empty(); }));
  std::lock_guard lock{f.rec.mu};
  EXPECT_EQ(f.rec.batches.size(), 1u) << "the ungranted batch was reported";
}

TEST(UcxSameHostTest, APeerOverTcpOnlyOrWithTheSameHostPathOffTakesTheGrantPath) {
  node_fixture f;
  ASSERT_TRUE(f.node);
  // tcp only (no shared memory asked for), and the same-host path turned
  // off: neither dials the same-host door.
  ucx_options off = shm();
  off.same_host_rma = false;
  size_t n = 0;
  for (const auto& u : {shm("tcp"), off}) {
    auto sender = make(options("prefill-" + std::to_string(n)), u);
    ASSERT_TRUE(sender);
    EXPECT_TRUE(ucx_test_access::same_host_worker_address(*sender).empty());
    auto src = sender->allocate_region(pool_bytes);
    ASSERT_TRUE(src);
    fill(src->memory);
    auto p = sender->connect(f.address);
    ASSERT_TRUE(p) << to_string(p.error());
    EXPECT_FALSE(ucx_test_access::same_host(*sender, *p));
    const auto from = f.connected(n);
    EXPECT_FALSE(ucx_test_access::same_host(*f.node, from));
    auto batch = scattered(src->id, f.pool.id);
    // Without a grant the runs are refused ...
    completion_log refused;
    sender->transfer(*p, batch, refused.make(0));
    ASSERT_TRUE(refused.wait_for_count(1));
    EXPECT_TRUE(refused.of(0).at(0)) << "an ungranted rendezvous batch was accepted";
    // ... with one, they land by rendezvous.
    auto g = f.node->grant(from, {{f.pool.id, 0, pool_bytes}});
    ASSERT_TRUE(g);
    completion_log log;
    sender->transfer(*p, batch, log.make(0));
    ASSERT_TRUE(log.wait_for_count(1));
    ASSERT_FALSE(log.of(0).at(0)) << to_string(log.of(0).at(0));
    expect_landed(batch, src->memory, f.pool.memory);
    EXPECT_EQ(ucx_test_access::same_host_put_batches(*sender), 0u);
    f.node->revoke(*g);
    std::fill(f.pool.memory.begin(), f.pool.memory.end(), std::byte{0});
    ++n;
  }
}

/// Checks each batch's bytes at the moment it is reported: a notice that
/// overtook its data (a copy or put not finished) shows the previous
/// batch's bytes there.
struct landing_checker : recorder {
  std::span<const std::byte> src; // the sender's region (same process)
  std::span<const std::byte> dst; // the pool
  std::atomic<int> early{0};

  void on_blocks_arrived(peer_id from, const transfer_batch& b) override {
    for (const auto& c : b.blocks)
      if (std::memcmp(src.data() + c.src_offset, dst.data() + c.dst_offset, c.size) != 0)
        ++early;
    recorder::on_blocks_arrived(from, b);
  }
};

// Into a pool the transport allocated (a shared-memory segment the
// sender's key attaches) the sender copies the blocks itself and sends the
// notice right after, with no UCX put or flush; into registered heap
// memory (cma: nothing mapped) it puts and flushes as before. Either way
// every batch's bytes are in place when the receiver hears of it.
TEST(UcxSameHostTest, EveryBatchIsInPlaceWhenReportedWhetherCopiedIntoAMappedPoolOrPut) {
  for (const bool allocated : {true, false}) {
    SCOPED_TRACE(allocated ? "allocated pool: copied" : "registered pool: put and flushed");
    landing_checker rec;
    std::vector<std::byte> heap(pool_bytes); // outlives the node that registers it
    auto node = make(options("decode"), shm());
    ASSERT_TRUE(node);
    node->set_handler(&rec);
    std::span<std::byte> pool;
    region_id pool_id = 0;
    if (allocated) {
      auto r = node->allocate_region(pool_bytes);
      ASSERT_TRUE(r) << to_string(r.error());
      pool = r->memory;
      pool_id = r->id;
    } else {
      auto r = node->register_region(heap);
      ASSERT_TRUE(r) << to_string(r.error());
      pool = heap;
      pool_id = *r;
    }
    auto address = node->listen("127.0.0.1:0");
    ASSERT_TRUE(address) << to_string(address.error());
    auto sender = make(options("prefill"), shm());
    ASSERT_TRUE(sender);
    auto src = sender->allocate_region(pool_bytes);
    ASSERT_TRUE(src);
    rec.src = src->memory;
    rec.dst = pool;
    auto p = sender->connect(*address);
    ASSERT_TRUE(p) << to_string(p.error());
    ASSERT_TRUE(rec.wait([&] { return !rec.connected.empty(); }));
    peer_id from = 0;
    {
      std::lock_guard lock{rec.mu};
      from = rec.connected.at(0).first;
    }
    ASSERT_TRUE(eventually([&] { return ucx_test_access::same_host(*node, from); }));
    auto g = node->grant(from, {{pool_id, 0, pool_bytes}});
    ASSERT_TRUE(g) << to_string(g.error());
    constexpr int batches = 64;
    for (int k = 0; k < batches; ++k) {
      for (size_t i = 0; i < src->memory.size(); ++i)
        src->memory[i] = static_cast<std::byte>((i * 131 + 17 + static_cast<size_t>(k) * 7) % 251);
      auto batch = scattered(src->id, pool_id);
      batch.batch_id = static_cast<uint64_t>(k);
      completion_log log;
      sender->transfer(*p, batch, log.make(0));
      ASSERT_TRUE(log.wait_for_count(1));
      ASSERT_FALSE(log.of(0).at(0)) << to_string(log.of(0).at(0));
      ASSERT_TRUE(rec.wait([&] { return rec.batches.size() == static_cast<size_t>(k) + 1; }));
    }
    EXPECT_EQ(rec.early.load(), 0) << "a batch was reported before its bytes were in place";
    EXPECT_EQ(ucx_test_access::same_host_put_batches(*sender), uint64_t{batches});
    EXPECT_EQ(ucx_test_access::mapped_put_batches(*sender), allocated ? uint64_t{batches} : 0u)
      << "copied into a mapped segment only where the pool is one";
    sender.reset(); // before the pool's owner goes
    node.reset();
  }
}

TEST(UcxSameHostTest, TheSameHostDoorRunsTheHandshakeAndRefusesAPeerWithoutTheSecret) {
  node_fixture f;
  ASSERT_TRUE(f.node);
  const auto sa = address_of(f.address);
  // Real worker addresses (the node makes endpoints to them once a
  // handshake succeeds), of a transport that is not listening.
  auto other = make(options("probe"), shm());
  ASSERT_TRUE(other);
  const auto mine = ucx_test_access::worker_address(*other);
  const auto local = ucx_test_access::same_host_worker_address(*other);
  for (const std::string key : {"", "a-wrong-secret-0123456789abcdef!!"}) {
    auto why = detail::handshake_failure::malformed;
    auto hp = detail::front_door_connect_same_host(
      sa, key, detail::handshake_offer{"rogue", mine, 7}, local, 2000ms, &why);
    ASSERT_FALSE(hp) << "the same-host door let in a peer with secret '" << key << "'";
    EXPECT_EQ(hp.error().code(), static_cast<uint8_t>(transport_errc::unauthenticated));
    EXPECT_EQ(why, detail::handshake_failure::bad_proof) << to_string(hp.error());
  }
  // Garbage where the handshake's first message goes.
  {
    sockaddr_un un{};
    auto len = detail::same_host_socket(sa, un);
    int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    ASSERT_EQ(::connect(fd, reinterpret_cast<const sockaddr*>(&un), len), 0);
    const std::vector<uint8_t> junk(17, 0);
    ASSERT_EQ(::send(fd, junk.data(), junk.size(), MSG_NOSIGNAL), 17);
    EXPECT_TRUE(eventually([&] { return rejected(*f.node, "malformed") >= 1; }));
    ::close(fd);
  }
  EXPECT_TRUE(f.rec.connected.empty());
  // With the secret the door answers with both of the node's addresses.
  auto hp = detail::front_door_connect_same_host(
    sa, secret, detail::handshake_offer{"probe", mine, 7}, local, 2000ms);
  ASSERT_TRUE(hp) << to_string(hp.error());
  EXPECT_EQ(hp->id, "decode");
  EXPECT_EQ(hp->worker_address, ucx_test_access::worker_address(*f.node));
  EXPECT_EQ(hp->same_host_address, ucx_test_access::same_host_worker_address(*f.node));
}

/// A one-sided put of 4 KiB of 0x66 to `target` from a UCX context of
/// `tls` with RMA, on an endpoint to `address`, with a key it packed
/// itself; true if UCX reported it complete (whether or not it landed).
bool rogue_put(const std::vector<std::byte>& address, const char* tls, uint64_t target) {
  ucp_config_t* config = nullptr;
  if (ucp_config_read(nullptr, nullptr, &config) != UCS_OK)
    return false;
  ucp_config_modify(config, "TLS", tls);
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_AM | UCP_FEATURE_RMA;
  ucp_context_h ctx = nullptr;
  auto st = ucp_init(&params, config, &ctx);
  ucp_config_release(config);
  if (st != UCS_OK)
    return false;
  ucp_worker_params_t wp{};
  ucp_worker_h worker = nullptr;
  bool done = false;
  if (ucp_worker_create(ctx, &wp, &worker) == UCS_OK) {
    ucp_ep_params_t ep_params{};
    ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    ep_params.address = reinterpret_cast<const ucp_address_t*>(address.data());
    ucp_ep_h ep = nullptr;
    auto wait = [&](ucs_status_ptr_t req) {
      const auto until = std::chrono::steady_clock::now() + 2s;
      while (UCS_PTR_IS_PTR(req) && ucp_request_check_status(req) == UCS_INPROGRESS
             && std::chrono::steady_clock::now() < until)
        ucp_worker_progress(worker);
      auto ok = !UCS_PTR_IS_ERR(req)
                && (req == nullptr || ucp_request_check_status(req) == UCS_OK);
      if (UCS_PTR_IS_PTR(req)) {
        if (ucp_request_check_status(req) == UCS_INPROGRESS)
          ucp_request_cancel(worker, req);
        ucp_request_free(req);
      }
      return ok;
    };
    if (ucp_ep_create(worker, &ep_params, &ep) == UCS_OK) {
      std::vector<std::byte> mine(4096, std::byte{0x66});
      ucp_mem_map_params_t mp{};
      mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
      mp.address = mine.data();
      mp.length = mine.size();
      ucp_mem_h memh = nullptr;
      void* packed = nullptr;
      size_t packed_len = 0;
      ucp_rkey_h rkey = nullptr;
      if (ucp_mem_map(ctx, &mp, &memh) == UCS_OK) {
        if (ucp_rkey_pack(ctx, memh, &packed, &packed_len) == UCS_OK) {
          if (ucp_ep_rkey_unpack(ep, packed, &rkey) == UCS_OK) {
            ucp_request_param_t rp{};
            done = wait(ucp_put_nbx(ep, mine.data(), mine.size(), target, rkey, &rp));
            ucp_request_param_t fp{};
            done = wait(ucp_ep_flush_nbx(ep, &fp)) && done;
            ucp_rkey_destroy(rkey);
          }
          ucp_rkey_buffer_release(packed);
        }
        ucp_mem_unmap(ctx, memh);
      }
      ucp_request_param_t cp{};
      cp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      cp.flags = UCP_EP_CLOSE_FLAG_FORCE;
      wait(ucp_ep_close_nbx(ep, &cp));
    }
    ucp_worker_destroy(worker);
  }
  ucp_cleanup(ctx);
  return done;
}

/// What the child of another uid reports, one byte per step.
enum child_step : char {
  door_closed = 'd',          // the same-host door closed on it unread,
                              // and its handshake there failed
  connected_over_tcp = 'c',   // connected, and not by the same-host path
  refused_ungranted = 'r',    // its ungranted batch was refused
  rogue_puts_tried = 'p',     // its self-packed puts ran (they must not land)
};

TEST(UcxSameHostTest, APeerOfAnotherUidOnThisHostGetsGrantsAndItsPutsDoNotLand) {
  if (::geteuid() != 0)
    GTEST_SKIP() << "needs root to run a child as nobody";
  // Fork before any transport exists: the child has no threads to lose.
  int to_child[2], from_child[2];
  ASSERT_EQ(::pipe(to_child), 0);
  ASSERT_EQ(::pipe(from_child), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(to_child[1]);
    ::close(from_child[0]);
    if (::setgid(65534) != 0 || ::setuid(65534) != 0)
      ::_exit(2);
    // From the parent: its address, region id, the pool's address, and
    // both of its worker addresses (as if they had leaked).
    auto read_all = [&](void* p, size_t n) {
      auto* b = static_cast<char*>(p);
      while (n > 0) {
        auto r = ::read(to_child[0], b, n);
        if (r <= 0)
          ::_exit(3);
        b += r;
        n -= static_cast<size_t>(r);
      }
    };
    auto read_bytes = [&] {
      uint32_t n = 0;
      read_all(&n, 4);
      std::vector<std::byte> v(n);
      read_all(v.data(), n);
      return v;
    };
    auto addr = read_bytes();
    uint32_t region = 0;
    uint64_t base = 0;
    read_all(&region, 4);
    read_all(&base, 8);
    auto cluster_address = read_bytes();
    auto local_address = read_bytes();
    auto report = [&](char c) { [[maybe_unused]] auto n = ::write(from_child[1], &c, 1); };
    std::string where(reinterpret_cast<const char*>(addr.data()), addr.size());
    {
      // Raw: the door hangs up before reading a byte (SO_PEERCRED says
      // uid 65534). Then as a client would, with the right secret.
      sockaddr_in sa{};
      if (!detail::parse_address(where, sa))
        ::_exit(9);
      sockaddr_un un{};
      auto len = detail::same_host_socket(sa, un);
      int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
      if (::connect(fd, reinterpret_cast<const sockaddr*>(&un), len) != 0)
        ::_exit(10);
      char byte = 0;
      if (::recv(fd, &byte, 1, 0) != 0)
        ::_exit(11);
      ::close(fd);
      auto hp = detail::front_door_connect_same_host(
        sa, secret, detail::handshake_offer{"intruder", cluster_address, 7}, local_address, 2000ms);
      if (hp)
        ::_exit(12);
      report(door_closed);
    }
    {
      // Its cluster context over tcp: UCX 1.13's sm transports cannot
      // attach another uid's segments (shmat: permission denied), so a
      // node of another uid on this host is reached over tcp only.
      auto t = ucx_transport::make(options("intruder"), shm("tcp"));
      if (!t)
        ::_exit(4);
      auto src = (*t)->allocate_region(pool_bytes);
      if (!src)
        ::_exit(5);
      fill(src->memory);
      auto p = (*t)->connect(where);
      if (!p)
        ::_exit(6);
      if (ucx_test_access::same_host(**t, *p))
        ::_exit(7);
      report(connected_over_tcp);
      std::promise<caf::error> res;
      auto fut = res.get_future();
      (*t)->transfer(*p, scattered(src->id, region), [&](const caf::error& e) { res.set_value(e); });
      if (fut.wait_for(10s) != std::future_status::ready || !fut.get())
        ::_exit(8);
      report(refused_ungranted);
    }
    // Self-packed keys, over the cluster worker (tcp) and over the
    // same-host worker (shared memory: cma, sysv, posix).
    rogue_put(cluster_address, "tcp", base);
    rogue_put(local_address, "sm,self", base);
    report(rogue_puts_tried);
    ::_exit(0);
  }
  ::close(to_child[0]);
  ::close(from_child[1]);
  {
    node_fixture f;
    ASSERT_TRUE(f.node);
    auto write_bytes = [&](const void* p, uint32_t n) {
      ASSERT_EQ(::write(to_child[1], &n, 4), 4);
      ASSERT_EQ(::write(to_child[1], p, n), static_cast<ssize_t>(n));
    };
    write_bytes(f.address.data(), static_cast<uint32_t>(f.address.size()));
    uint32_t region = static_cast<uint32_t>(f.pool.id);
    uint64_t base = reinterpret_cast<uintptr_t>(f.pool.memory.data());
    ASSERT_EQ(::write(to_child[1], &region, 4), 4);
    ASSERT_EQ(::write(to_child[1], &base, 8), 8);
    auto cluster = ucx_test_access::worker_address(*f.node);
    auto local = ucx_test_access::same_host_worker_address(*f.node);
    write_bytes(cluster.data(), static_cast<uint32_t>(cluster.size()));
    write_bytes(local.data(), static_cast<uint32_t>(local.size()));
    std::string steps;
    char c = 0;
    while (::read(from_child[0], &c, 1) == 1)
      steps += c;
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "child status " << status << " after steps '" << steps << "'";
    EXPECT_EQ(steps, "dcrp");
    // The door refused it by uid (the kernel's word), and it joined over
    // tcp as a grant-path peer.
    EXPECT_GE(rejected(*f.node, "refused"), 2u);
    EXPECT_GE(rejected(*f.node, "not_granted"), 1u);
    EXPECT_TRUE(f.pool_is_zero()) << "a peer of another uid wrote into the pool";
    EXPECT_TRUE(f.rec.batches.empty());
  }
  ::close(to_child[1]);
  ::close(from_child[0]);
}

} // namespace
} // namespace tessera::transport
