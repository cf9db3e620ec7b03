#pragma once
// Test helpers for the transport backends: a handler that records every
// event and lets the test wait for a condition (with a timeout, never a
// sleep), a completion log, and real wire frames as payloads.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <stdexcept>
#include <utility>
#include <variant>
#include <vector>

#include "transport/transport.hpp"
#include "transport/wire/codec.hpp"

namespace tessera::transport::test {

/// Generous: a loaded 2-core CI machine must never hit it.
inline constexpr std::chrono::seconds wait_timeout{60};

/// Records a transport's events. Also checks that callbacks never overlap.
class recorder : public transport_handler {
public:
  void on_peer_connected(peer_id peer, const std::string& address) override {
    enter();
    std::lock_guard lock{mu};
    connected.emplace_back(peer, address);
    leave();
  }
  void on_message(peer_id from, message msg) override {
    enter();
    std::lock_guard lock{mu};
    messages.emplace_back(from, std::move(msg));
    arrivals.push_back(std::chrono::steady_clock::now());
    leave();
  }
  void on_blocks_arrived(peer_id from, const transfer_batch& batch) override {
    enter();
    std::lock_guard lock{mu};
    batches.emplace_back(from, batch);
    leave();
  }
  void on_peer_failed(peer_id peer, const caf::error& why) override {
    enter();
    std::lock_guard lock{mu};
    failed.emplace_back(peer, why);
    leave();
  }

  /// Waits until `pred()` (called under the lock) holds; false on timeout.
  template <class Pred>
  bool wait(Pred pred, std::chrono::milliseconds timeout = wait_timeout) {
    std::unique_lock lock{mu};
    return cv.wait_for(lock, timeout, [&] { return pred(); });
  }

  /// Locked snapshot accessors.
  size_t message_count() {
    std::lock_guard lock{mu};
    return messages.size();
  }
  size_t failed_count() {
    std::lock_guard lock{mu};
    return failed.size();
  }

  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::pair<peer_id, std::string>> connected;
  std::vector<std::pair<peer_id, message>> messages;
  /// When each message arrived (same index as `messages`).
  std::vector<std::chrono::steady_clock::time_point> arrivals;
  std::vector<std::pair<peer_id, transfer_batch>> batches;
  std::vector<std::pair<peer_id, caf::error>> failed;
  std::atomic<int> overlaps{0};

private:
  void enter() {
    if (active_.fetch_add(1) != 0)
      overlaps.fetch_add(1);
  }
  void leave() {
    active_.fetch_sub(1);
    cv.notify_all();
  }
  std::atomic<int> active_{0};
};

/// Completions by operation number.
class completion_log {
public:
  /// A completion that records its result as operation `i`.
  completion make(uint64_t i) {
    return [this, i](const caf::error& err) {
      std::lock_guard lock{mu_};
      results_[i].push_back(err);
      cv_.notify_all();
    };
  }
  /// Waits until `n` completions ran; false on timeout.
  bool wait_for_count(size_t n, std::chrono::milliseconds timeout = wait_timeout) {
    std::unique_lock lock{mu_};
    return cv_.wait_for(lock, timeout, [&] { return count_locked() >= n; });
  }
  /// Results of operation `i` (one entry per time its completion ran).
  std::vector<caf::error> of(uint64_t i) {
    std::lock_guard lock{mu_};
    return results_[i];
  }
  size_t count() {
    std::lock_guard lock{mu_};
    return count_locked();
  }
  std::map<uint64_t, std::vector<caf::error>> all() {
    std::lock_guard lock{mu_};
    return results_;
  }

private:
  size_t count_locked() const {
    size_t n = 0;
    for (const auto& [i, r] : results_)
      n += r.size();
    return n;
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, std::vector<caf::error>> results_;
};

/// A real wire frame: a heartbeat whose sequence is `seq`.
inline std::vector<std::byte> heartbeat_frame(uint64_t seq) {
  wire::heartbeat hb;
  hb.node_id = "node-a";
  hb.sequence = seq;
  hb.timestamp_us = 1'700'000'000'000'000ull + seq;
  hb.load = 0.5f;
  hb.queue_depth = static_cast<uint32_t>(seq % 17);
  auto frame = wire::encode(wire::wire_message{hb});
  if (!frame)
    throw std::runtime_error("heartbeat_frame: encode failed");
  return std::move(*frame);
}

/// The heartbeat sequence a frame carries, or -1 when it does not decode.
inline int64_t sequence_of(const std::vector<std::byte>& frame) {
  auto m = wire::decode(frame);
  if (!m)
    return -1;
  auto* hb = std::get_if<wire::heartbeat>(&*m);
  return hb ? static_cast<int64_t>(hb->sequence) : -1;
}

/// The transport_errc of `err`, or 0 for no error / another category.
inline uint8_t code_of(const caf::error& err) {
  if (!err || err.category() != caf::atom("transport"))
    return 0;
  return err.code();
}

inline uint8_t code(transport_errc c) {
  return static_cast<uint8_t>(c);
}

/// Waits until every event transport `t` queued before this call has run:
/// a completion (of a send to a peer that does not exist) queues behind
/// them on the same progress thread.
inline void drain(transport& t) {
  completion_log log;
  t.send(peer_id{999'999}, message{}, log.make(0));
  ASSERT_TRUE(log.wait_for_count(1));
}

} // namespace tessera::transport::test
