#pragma once
/// @file
/// A block store for actor tests whose calls a test can stall: every call
/// goes to an inner store, and put, get and get_prefix each pass a gate of
/// their own first, which the test holds shut (a disk that hangs) and
/// opens again, counting the calls waiting at it and those done.

#include <chrono>
#include <condition_variable>
#include <limits>
#include <memory>
#include <mutex>
#include <span>
#include <utility>

#include "kvstore/block_store.hpp"

namespace tessera::test {

/// Calls wait here while the gate is held.
class store_gate {
public:
  void hold() {
    std::lock_guard lk{m_};
    held_ = true;
  }
  void release() {
    std::lock_guard lk{m_};
    held_ = false;
    limit_ = std::numeric_limits<size_t>::max();
    cv_.notify_all();
  }
  /// Lets the next `n` calls pass, then holds the gate (a store that
  /// answers `n` times, then hangs).
  void hold_after(size_t n) {
    std::lock_guard lk{m_};
    held_ = false;
    limit_ = entered_ + n;
    cv_.notify_all();
  }
  /// Runs `call` once the gate is open, counted waiting meanwhile and done
  /// after it returned.
  template <class F>
  auto pass(F&& call) {
    {
      std::unique_lock lk{m_};
      ++waiting_;
      cv_.notify_all();
      cv_.wait(lk, [&] { return !held_ && entered_ < limit_; });
      --waiting_;
      ++entered_;
    }
    auto out = std::forward<F>(call)();
    std::lock_guard lk{m_};
    ++done_;
    cv_.notify_all();
    return out;
  }
  /// Waits until `n` calls wait at the gate; false after `timeout`.
  bool wait_waiting(size_t n, std::chrono::milliseconds timeout) {
    std::unique_lock lk{m_};
    return cv_.wait_for(lk, timeout, [&] { return waiting_ == n; });
  }
  /// Waits until `n` calls have passed and returned; false after `timeout`.
  bool wait_done(size_t n, std::chrono::milliseconds timeout) {
    std::unique_lock lk{m_};
    return cv_.wait_for(lk, timeout, [&] { return done_ == n; });
  }
  size_t waiting() {
    std::lock_guard lk{m_};
    return waiting_;
  }
  size_t done() {
    std::lock_guard lk{m_};
    return done_;
  }

private:
  std::mutex m_;
  std::condition_variable cv_;
  bool held_ = false;
  size_t limit_ = std::numeric_limits<size_t>::max(); // calls that may pass in all
  size_t entered_ = 0;
  size_t waiting_ = 0;
  size_t done_ = 0;
};

/// `Inner` (a block store) behind gates on put, get and get_prefix.
template <class Inner = kvstore::block_store>
class gated_store final : public kvstore::block_store {
public:
  explicit gated_store(std::unique_ptr<Inner> inner) : inner_(std::move(inner)) {}

  store_gate put_gate, get_gate, prefix_gate;

  Inner& inner() { return *inner_; }

  caf::error put(const kvstore::block_key& key, kvstore::stored_block b) override {
    return put_gate.pass([&] { return inner_->put(key, std::move(b)); });
  }
  std::optional<kvstore::block_hit> get(const kvstore::block_key& key) override {
    return get_gate.pass([&] { return inner_->get(key); });
  }
  kvstore::prefix_read get_prefix(uint64_t ns, std::span<const engine::kv_block_hash> chain,
                                  uint64_t max_bytes) override {
    return prefix_gate.pass([&] { return inner_->get_prefix(ns, chain, max_bytes); });
  }
  kvstore::prefix_match lookup(uint64_t ns, std::span<const engine::kv_block_hash> chain,
                               kvstore::lookup_mode mode) override {
    return inner_->lookup(ns, chain, mode);
  }
  bool contains(const kvstore::block_key& key) const override { return inner_->contains(key); }
  void record_events(bool on) override { inner_->record_events(on); }
  std::vector<kvstore::store_event> drain_events() override { return inner_->drain_events(); }
  kvstore::store_stats stats() const override { return inner_->stats(); }
  kvstore::disk_open_report disk_report() const override { return inner_->disk_report(); }

private:
  std::unique_ptr<Inner> inner_;
};

} // namespace tessera::test
