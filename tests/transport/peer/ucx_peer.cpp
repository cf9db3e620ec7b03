// ucx_peer: the receiving process of ucx_two_process_test. Not a test on
// its own; the test spawns it (tessera::child_process) and talks to it over
// a real UCX connection.
//
//   ucx_peer [--tls=LIST] [--error-handling=peer|none] [--peer-timeout-ms=N]
//            [--pool-bytes=N] [--listen=HOST:PORT]
//
// Defaults: UCX's transports, error handling on, 2000 ms, 64 MiB,
// 127.0.0.1:0. It registers a receive pool of --pool-bytes, listens, and
// prints two lines on stdout:
//
//   REGION <region id> <bytes>      the pool, as the sender addresses it
//   LISTENING <host:port>
//
// Then it checks what senders send it, by the message's actor name:
//
//   "chunks"  wire token_chunk frames whose ids count 0, 1, 2, ... per
//             sender: anything else is counted out of order
//   "expect"  a wire kv_transfer_batch describing one transfer: where each
//             block lands in the pool and its XXH3 checksum. It is matched
//             by batch_id with on_blocks_arrived, in either order (a
//             blocks-arrived notice may be overtaken by a later message),
//             and then each block of the pool is verified
//   "report"  answered with a token_chunk (actor "report") whose text is
//             "received=N out_of_order=N verified=N mismatched=N pending=N
//             errors=N": control messages received, blocks verified and
//             mismatched, batches still waiting for their other half, and
//             malformed input. A wire_error (category "test") with the first
//             problem's text precedes it when there was one.
//
// It exits when every connected sender has gone (disconnect or failure):
// 0 if nothing was out of order, mismatched, pending or malformed, else 1.
// It dies with its parent (PR_SET_PDEATHSIG).

#include <sys/prctl.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <variant>
#include <vector>

#include "engine/block_hash.hpp"
#include "transport/ucx/ucx_transport.hpp"
#include "transport/wire/codec.hpp"

namespace tessera::transport {
namespace {

struct peer_args {
  ucx_options ucx;
  transport_options options;
  size_t pool_bytes = size_t{64} << 20;
  std::string listen = "127.0.0.1:0";
};

bool parse_args(int argc, char** argv, peer_args& a) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto eq = arg.find('=');
    auto key = arg.substr(0, eq);
    auto value = eq == std::string::npos ? std::string{} : arg.substr(eq + 1);
    if (key == "--tls")
      a.ucx.tls = value;
    else if (key == "--error-handling" && (value == "peer" || value == "none"))
      a.ucx.peer_error_handling = value == "peer";
    else if (key == "--peer-timeout-ms")
      a.options.peer_timeout = std::chrono::milliseconds{std::strtoll(value.c_str(), nullptr, 10)};
    else if (key == "--pool-bytes")
      a.pool_bytes = std::strtoull(value.c_str(), nullptr, 10);
    else if (key == "--listen")
      a.listen = value;
    else
      return false;
  }
  return a.pool_bytes > 0 && a.options.peer_timeout.count() > 0;
}

/// The checks. Every callback runs on the transport's progress thread; the
/// main thread reads the counters only after the transport is gone.
class checker : public transport_handler {
public:
  checker(std::span<const std::byte> pool, region_id pool_region)
    : pool_(pool), pool_region_(pool_region) {}

  void set_transport(transport* t) { transport_ = t; }

  void on_peer_connected(peer_id, const std::string&) override {
    std::lock_guard lock{mu_};
    ++connected_;
    had_sender_ = true;
  }

  void on_message(peer_id from, message msg) override {
    auto decoded = wire::decode(msg.frame);
    if (!decoded)
      return problem("undecodable frame for actor '" + msg.actor + "': " + to_string(decoded.error()));
    if (msg.actor == "chunks") {
      auto* c = std::get_if<wire::token_chunk>(&*decoded);
      if (!c)
        return problem("a 'chunks' message is not a token_chunk");
      ++received_;
      auto& next = next_chunk_[from];
      if (c->id != next) {
        ++out_of_order_;
        note("chunk " + std::to_string(c->id) + " arrived when " + std::to_string(next)
             + " was due");
      }
      next = c->id + 1;
    } else if (msg.actor == "expect") {
      auto* b = std::get_if<wire::kv_transfer_batch>(&*decoded);
      if (!b)
        return problem("an 'expect' message is not a kv_transfer_batch");
      auto key = std::pair{from, b->batch_id};
      if (auto it = arrived_.find(key); it != arrived_.end()) {
        verify(*b, it->second);
        arrived_.erase(it);
      } else {
        expected_.emplace(key, std::move(*b));
      }
    } else if (msg.actor == "report") {
      report(from);
    } else {
      problem("unknown actor '" + msg.actor + "'");
    }
  }

  void on_blocks_arrived(peer_id from, const transfer_batch& batch) override {
    auto key = std::pair{from, batch.batch_id};
    if (auto it = expected_.find(key); it != expected_.end()) {
      verify(it->second, batch);
      expected_.erase(it);
    } else {
      arrived_.emplace(key, batch);
    }
  }

  void on_peer_failed(peer_id, const caf::error&) override {
    std::lock_guard lock{mu_};
    --connected_;
    cv_.notify_all();
  }

  /// Blocks until a sender connected and every sender has gone.
  void wait_until_alone() {
    std::unique_lock lock{mu_};
    cv_.wait(lock, [&] { return had_sender_ && connected_ == 0; });
  }

  [[nodiscard]] bool passed() const {
    return out_of_order_ == 0 && mismatched_ == 0 && errors_ == 0 && expected_.empty()
           && arrived_.empty();
  }

  [[nodiscard]] std::string summary() const {
    return "received=" + std::to_string(received_) + " out_of_order="
           + std::to_string(out_of_order_) + " verified=" + std::to_string(verified_)
           + " mismatched=" + std::to_string(mismatched_)
           + " pending=" + std::to_string(expected_.size() + arrived_.size())
           + " errors=" + std::to_string(errors_);
  }

private:
  void verify(const wire::kv_transfer_batch& want, const transfer_batch& got) {
    if (want.blocks.size() != got.blocks.size())
      problem("batch " + std::to_string(want.batch_id) + ": " + std::to_string(got.blocks.size())
              + " blocks arrived, " + std::to_string(want.blocks.size()) + " expected");
    for (const auto& b : want.blocks) {
      if (b.dst_region != pool_region_ || b.dst_offset > pool_.size()
          || b.size_bytes > pool_.size() - b.dst_offset) {
        ++mismatched_;
        note("batch " + std::to_string(want.batch_id) + ": a block lies outside the pool");
        continue;
      }
      auto sum = engine::hash_bytes(pool_.data() + b.dst_offset, b.size_bytes);
      if (sum == b.checksum) {
        ++verified_;
      } else {
        ++mismatched_;
        note("batch " + std::to_string(want.batch_id) + ": block at "
                + std::to_string(b.dst_offset) + " of " + std::to_string(b.size_bytes)
                + " bytes has the wrong checksum");
      }
    }
  }

  void report(peer_id to) {
    if (!first_problem_.empty()) {
      wire::wire_error e{"test", 1, first_problem_};
      if (auto f = wire::encode(wire::wire_message{e}))
        transport_->send(to, message{"report", std::move(*f)}, {});
    }
    wire::token_chunk c;
    c.text = summary();
    if (auto f = wire::encode(wire::wire_message{c}))
      transport_->send(to, message{"report", std::move(*f)}, {});
  }

  /// Malformed input: counted as an error and noted.
  void problem(const std::string& what) {
    ++errors_;
    note(what);
  }

  /// Keeps the first failed check's text for the report; logs every one.
  void note(const std::string& what) {
    if (first_problem_.empty())
      first_problem_ = what;
    std::fprintf(stderr, "ucx_peer: %s\n", what.c_str());
  }

  std::span<const std::byte> pool_;
  region_id pool_region_;
  transport* transport_ = nullptr;

  std::mutex mu_;
  std::condition_variable cv_;
  int connected_ = 0;       // guarded by mu_
  bool had_sender_ = false; // guarded by mu_

  // Progress thread only (read by main after the transport is gone).
  uint64_t received_ = 0, out_of_order_ = 0, verified_ = 0, mismatched_ = 0, errors_ = 0;
  std::map<peer_id, uint64_t> next_chunk_;
  std::map<std::pair<peer_id, uint64_t>, wire::kv_transfer_batch> expected_;
  std::map<std::pair<peer_id, uint64_t>, transfer_batch> arrived_;
  std::string first_problem_;
};

int run_peer(int argc, char** argv) {
  // Die with the test that spawned us, however it ends (and if it ended
  // before the request took effect, now).
  auto parent = getppid();
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent)
    return 2;
  peer_args args;
  if (!parse_args(argc, argv, args)) {
    std::fprintf(stderr,
                 "usage: ucx_peer [--tls=LIST] [--error-handling=peer|none] "
                 "[--peer-timeout-ms=N] [--pool-bytes=N] [--listen=HOST:PORT]\n");
    return 2;
  }
  std::vector<std::byte> pool(args.pool_bytes); // outlives the transport
  auto made = ucx_transport::make(args.options, args.ucx);
  if (!made) {
    std::fprintf(stderr, "ucx_peer: %s\n", to_string(made.error()).c_str());
    return 2;
  }
  auto& t = **made;
  auto region = t.register_region(pool);
  if (!region) {
    std::fprintf(stderr, "ucx_peer: register_region: %s\n", to_string(region.error()).c_str());
    return 2;
  }
  checker check{pool, *region};
  check.set_transport(&t);
  t.set_handler(&check);
  auto address = t.listen(args.listen);
  if (!address) {
    std::fprintf(stderr, "ucx_peer: listen: %s\n", to_string(address.error()).c_str());
    return 2;
  }
  std::printf("REGION %u %zu\nLISTENING %s\n", *region, pool.size(), address->c_str());
  std::fflush(stdout);
  check.wait_until_alone();
  made->reset(); // no callback runs after this
  std::printf("RESULT %s\n", check.summary().c_str());
  std::fflush(stdout);
  return check.passed() ? 0 : 1;
}

} // namespace
} // namespace tessera::transport

int main(int argc, char** argv) {
  return tessera::transport::run_peer(argc, argv);
}
