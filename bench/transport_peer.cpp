#include "bench/transport_peer.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>
#include <sstream>

#include <caf/sec.hpp>

#include "common/error.hpp"
#include "transport/ucx/ucx_transport.hpp"
#include "transport/wire/codec.hpp"

namespace tessera::bench {

namespace tt = tessera::transport;

namespace {

caf::error bench_error(const std::string& what) {
  return caf::make_error(caf::sec::runtime_error, what);
}

/// Answers the probe's messages and batches on the transport's progress
/// thread; tells the main thread when the probe left.
class peer_handler final : public tt::transport_handler {
public:
  void attach(tt::transport* t) { transport_ = t; }

  /// Answer each arrived batch with a "blocks_ack" (set before connecting).
  void ack_blocks(bool on) { ack_blocks_ = on; }

  /// With grants, the probe that connects may write the whole region.
  void grant_on_connect(tt::memory_range whole) { grant_ = whole; }

  void on_peer_connected(tt::peer_id peer, const std::string&) override {
    if (grant_.size > 0)
      granted_ = std::thread{[this, peer] {
        // grant() waits for the progress thread: not from its callback.
        if (auto g = transport_->grant(peer, {grant_}); !g)
          std::fprintf(stderr, "peer: grant failed: %s\n", error_text(g.error()).c_str());
        std::lock_guard lock{mu_};
        connected_ = true;
        cv_.notify_all();
      }};
    else {
      std::lock_guard lock{mu_};
      connected_ = true;
      cv_.notify_all();
    }
  }

  /// Waits for the grant made on connect (before the transport goes).
  void join() {
    if (granted_.joinable())
      granted_.join();
  }

  ~peer_handler() override { join(); }

  void on_message(tt::peer_id from, tt::message msg) override {
    if (msg.actor == echo_raw_actor) {
      transport_->send(from, tt::message{std::string{pong_raw_actor}, std::move(msg.frame)}, {});
      return;
    }
    auto seq = control_sequence(msg.frame);
    if (!seq) {
      if (bad_frames_++ == 0)
        std::fprintf(stderr, "peer: bad frame for '%s': %s\n", msg.actor.c_str(),
                     error_text(seq.error()).c_str());
      return;
    }
    if (msg.actor == echo_actor) {
      reply(from, pong_actor, *seq);
    } else if (msg.actor == sink_actor) {
      ++sunk_;
    } else if (msg.actor == sink_end_actor) {
      reply(from, sink_ack_actor, sunk_);
      sunk_ = 0;
    }
  }

  void on_blocks_arrived(tt::peer_id from, const tt::transfer_batch& batch) override {
    if (!ack_blocks_)
      return;
    transport_->send(from, tt::message{std::string{blocks_ack_actor}, ack_frame(batch.batch_id)},
                     {});
  }

  void on_peer_failed(tt::peer_id, const caf::error&) override {
    std::lock_guard lock{mu_};
    left_ = true;
    cv_.notify_all();
  }

  /// Waits until `pred` holds (under the lock) or `timeout` passed.
  template <class Pred>
  bool wait_for(std::chrono::milliseconds timeout, Pred pred) {
    std::unique_lock lock{mu_};
    return cv_.wait_for(lock, timeout, [&] { return pred(connected_, left_); });
  }

  [[nodiscard]] uint64_t bad_frames() const { return bad_frames_; }

private:
  void reply(tt::peer_id to, std::string_view actor, uint64_t seq) {
    transport_->send(to, tt::message{std::string{actor}, control_frame(seq)}, {});
  }

  tt::transport* transport_ = nullptr;
  tt::memory_range grant_;
  bool ack_blocks_ = false;
  std::thread granted_;
  uint64_t sunk_ = 0; // progress thread only
  std::atomic<uint64_t> bad_frames_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool connected_ = false; // guarded by mu_
  bool left_ = false;      // guarded by mu_
};

} // namespace

std::vector<transport_selection> default_transport_selections() {
  return {
    {"tcp", "tcp", "tcp", true, "tcp"},
    {"shm", "shm (err none)", "sm,self,tcp", false, "shm"},
    {"shm_err_peer", "shm (err peer)", "sm,self,tcp", true, "shm"},
  };
}

caf::expected<std::vector<transport_selection>>
with_kv_paths(const std::vector<transport_selection>& selections,
              const std::vector<std::string>& kv_paths) {
  std::vector<transport_selection> out;
  for (const auto& sel : selections)
    for (size_t i = 0; i < kv_paths.size(); ++i) {
      const auto& name = kv_paths[i];
      auto path = tt::parse_kv_path(name);
      if (!path)
        return bench_error("bench: unknown KV path '" + name + "' (known: auto, put, am_rndv)");
      // A path named twice would be two selections with one key.
      if (std::find(kv_paths.begin(), kv_paths.begin() + static_cast<std::ptrdiff_t>(i), name)
          != kv_paths.begin() + static_cast<std::ptrdiff_t>(i))
        continue;
      auto s = sel;
      s.kv_path = *path;
      if (*path != tt::ucx_kv_path::automatic) {
        s.key += "_" + name;
        s.label += " " + name;
      }
      out.push_back(std::move(s));
    }
  return out;
}

std::vector<std::byte> control_frame(uint64_t sequence) {
  tt::wire::heartbeat hb;
  hb.node_id = "bench-node-0";
  hb.sequence = sequence;
  hb.timestamp_us = 1'700'000'000'000'000ull + sequence;
  hb.load = 0.5f;
  hb.queue_depth = 3;
  hb.kv_usage.push_back({tt::wire::kv_tier::g1_pool, uint64_t{1} << 30, uint64_t{4} << 30});
  auto frame = tt::wire::encode(tt::wire::wire_message{std::move(hb)});
  // A valid heartbeat always encodes; failing here is a bug in this file.
  if (!frame) {
    std::fprintf(stderr, "bench: cannot encode a heartbeat: %s\n", error_text(frame.error()).c_str());
    std::abort();
  }
  return std::move(*frame);
}

caf::expected<uint64_t> control_sequence(std::span<const std::byte> frame) {
  auto m = tt::wire::decode(frame);
  if (!m)
    return m.error();
  auto* hb = std::get_if<tt::wire::heartbeat>(&*m);
  if (hb == nullptr)
    return bench_error("bench: expected a heartbeat frame, got "
                       + std::string{tt::wire::to_string(tt::wire::type_of(*m))});
  return hb->sequence;
}

std::vector<std::byte> ack_frame(uint64_t batch_id) {
  std::vector<std::byte> frame(8);
  for (size_t i = 0; i < frame.size(); ++i)
    frame[i] = static_cast<std::byte>(batch_id >> (8 * i));
  return frame;
}

caf::expected<uint64_t> ack_batch_id(std::span<const std::byte> frame) {
  if (frame.size() != 8)
    return bench_error("bench: a blocks_ack of " + std::to_string(frame.size())
                       + " bytes (expected 8)");
  uint64_t id = 0;
  for (size_t i = 0; i < frame.size(); ++i)
    id |= static_cast<uint64_t>(frame[i]) << (8 * i);
  return id;
}

caf::expected<peer_announcement> parse_peer_announcement(std::string_view line) {
  std::istringstream in{std::string{line}};
  std::string listening, region_word;
  peer_announcement a;
  if (!(in >> listening >> a.address >> region_word >> a.region >> a.region_bytes)
      || listening != "LISTENING" || region_word != "REGION")
    return bench_error("bench: the peer said '" + std::string{line}
                       + "', not 'LISTENING <host:port> REGION <id> <bytes>'");
  return a;
}

tt::transport_options bench_transport_options(bool grants) {
  tt::transport_options o;
  if (grants) {
    o.cluster_secret = "tessera-bench-transport-secret";
    o.grants_only = true;
  }
  return o;
}

caf::expected<tt::allocated_region> bench_region(tt::transport& t, bool allocated, uint64_t bytes,
                                                 std::byte fill, std::vector<std::byte>& heap) {
  caf::expected<tt::allocated_region> r{tt::allocated_region{}};
  if (allocated) {
    r = t.allocate_region(bytes);
  } else {
    heap.resize(bytes);
    auto id = t.register_region(heap);
    if (!id)
      return id.error();
    r = tt::allocated_region{*id, heap};
  }
  // Fault the pages in now, not mid-transfer.
  if (r)
    std::memset(r->memory.data(), static_cast<int>(fill), r->memory.size());
  return r;
}

int run_transport_peer(const transport_peer_options& o) {
  using namespace std::chrono_literals;
  tt::ucx_options uopts;
  uopts.tls = o.tls;
  uopts.peer_error_handling = o.peer_error_handling;
  if (o.progress_spin_us >= 0)
    uopts.progress_spin = std::chrono::microseconds{o.progress_spin_us};
  // Declared before the transport: registered memory must outlive it.
  std::vector<std::byte> heap;
  peer_handler handler;
  auto t = tt::ucx_transport::make(bench_transport_options(o.grants), uopts);
  if (!t) {
    std::fprintf(stderr, "peer: %s\n", error_text(t.error()).c_str());
    return 1;
  }
  handler.attach(t->get());
  handler.ack_blocks(o.ack_blocks);
  (*t)->set_handler(&handler);
  auto region = bench_region(**t, o.allocated, o.pool_bytes, std::byte{0x5a}, heap);
  if (!region) {
    std::fprintf(stderr, "peer: %s\n", error_text(region.error()).c_str());
    return 1;
  }
  if (o.grants)
    handler.grant_on_connect({region->id, 0, region->memory.size()});
  auto address = (*t)->listen("127.0.0.1:0");
  if (!address) {
    std::fprintf(stderr, "peer: %s\n", error_text(address.error()).c_str());
    return 1;
  }
  std::printf("LISTENING %s REGION %u %llu\n", address->c_str(), region->id,
              static_cast<unsigned long long>(region->memory.size()));
  std::fflush(stdout);
  const pid_t parent = ::getppid();
  if (!handler.wait_for(o.idle_timeout, [](bool connected, bool) { return connected; })) {
    std::fprintf(stderr, "peer: no probe connected within %lld ms\n",
                 static_cast<long long>(o.idle_timeout.count()));
    return 1;
  }
  // With peer_error_handling off a vanished probe is never reported, so
  // also stop when our parent (the probe) is gone.
  while (!handler.wait_for(1s, [](bool, bool left) { return left; }))
    if (::getppid() != parent) {
      std::fprintf(stderr, "peer: parent process exited\n");
      return 1;
    }
  handler.join();
  return handler.bad_frames() == 0 ? 0 : 1;
}

} // namespace tessera::bench
