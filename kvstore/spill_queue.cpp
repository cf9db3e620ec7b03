#include "kvstore/spill_queue.hpp"

#include "common/assert.hpp"

namespace tessera::kvstore {

spill_queue::spill_queue(size_t capacity_blocks, size_t capacity_bytes)
    : capacity_blocks_(capacity_blocks), capacity_bytes_(capacity_bytes) {
  TESSERA_ASSERT(capacity_blocks > 0, "a spill queue needs room for a block");
}

bool spill_queue::has_space_locked(size_t payload_bytes) const {
  if (pending_.empty())
    return true;
  return pending_.size() < capacity_blocks_ && bytes_ + payload_bytes <= capacity_bytes_;
}

bool spill_queue::has_space(size_t payload_bytes) const {
  std::lock_guard lock{mutex_};
  return !closed_ && has_space_locked(payload_bytes);
}

spill_queue::push_result spill_queue::push(const block_key& key, stored_block b,
                                           std::chrono::milliseconds wait) {
  const size_t n = b.payload_bytes();
  std::unique_lock lock{mutex_};
  if (pending_.contains(key))
    return push_result::already_queued;
  if (!closed_ && !has_space_locked(n))
    changed_.wait_for(lock, wait, [&] { return closed_ || has_space_locked(n); });
  // Waiting released the lock: another producer may have queued this key.
  if (pending_.contains(key))
    return push_result::already_queued;
  if (closed_ || !has_space_locked(n))
    return push_result::dropped;
  fifo_.push_back(key);
  pending_.emplace(key, std::move(b));
  bytes_ += n;
  changed_.notify_all();
  return push_result::queued;
}

std::optional<keyed_block> spill_queue::front() {
  std::unique_lock lock{mutex_};
  changed_.wait(lock, [&] {
    if (closed_ && !drain_)
      return true;
    return (!paused_ && fifo_.size() > handed_out_) || (closed_ && fifo_.size() == handed_out_);
  });
  if (fifo_.size() == handed_out_ || (closed_ && !drain_))
    return std::nullopt;
  const block_key& key = fifo_[handed_out_++];
  return keyed_block{key, pending_.at(key)};
}

void spill_queue::done(const block_key& key) {
  std::lock_guard guard{mutex_};
  auto it = pending_.find(key);
  TESSERA_ASSERT(it != pending_.end() && handed_out_ > 0, "done() without front()");
  bytes_ -= it->second.payload_bytes();
  pending_.erase(it);
  for (auto f = fifo_.begin(); f != fifo_.end(); ++f)
    if (*f == key) {
      fifo_.erase(f);
      break;
    }
  --handed_out_;
  changed_.notify_all();
}

std::optional<stored_block> spill_queue::find(const block_key& key) const {
  std::lock_guard guard{mutex_};
  auto it = pending_.find(key);
  if (it == pending_.end())
    return std::nullopt;
  return it->second;
}

bool spill_queue::wait_empty(std::chrono::milliseconds timeout) const {
  std::unique_lock lock{mutex_};
  return changed_.wait_for(lock, timeout, [&] { return pending_.empty(); });
}

void spill_queue::set_paused(bool paused) {
  std::lock_guard guard{mutex_};
  paused_ = paused;
  changed_.notify_all();
}

void spill_queue::close(bool drain) {
  std::lock_guard guard{mutex_};
  closed_ = true;
  drain_ = drain;
  if (drain)
    paused_ = false;
  changed_.notify_all();
}

size_t spill_queue::blocks() const {
  std::lock_guard guard{mutex_};
  return pending_.size();
}

size_t spill_queue::bytes() const {
  std::lock_guard guard{mutex_};
  return bytes_;
}

} // namespace tessera::kvstore
