#include "kvstore/store_events.hpp"

namespace tessera::kvstore {

const char* to_string(store_event::kind k) {
  switch (k) {
    case store_event::kind::stored: return "stored";
    case store_event::kind::removed: return "removed";
    case store_event::kind::lost: return "lost";
  }
  return "unknown";
}

event_log::event_log(size_t max_pending_hashes) : max_pending_hashes_(max_pending_hashes) {}

bool event_log::set_recording(bool on) {
  std::lock_guard guard{mutex_};
  bool was = recording_.load(std::memory_order_relaxed);
  recording_.store(on, std::memory_order_relaxed);
  if (!on) {
    runs_.clear();
    pending_hashes_ = 0;
    lost_pushed_ = false;
  }
  return on && !was;
}

void event_log::push(store_event::kind what, kv_tier tier, const block_key& key) {
  // The unlocked check is only a fast path: set_recording(true) is followed
  // by a snapshot taken under each tier's lock, and the pushes that matter
  // happen under that same lock, so they see the flag.
  if (!recording_.load(std::memory_order_relaxed))
    return;
  std::lock_guard guard{mutex_};
  if (!recording_.load(std::memory_order_relaxed))
    return;
  if (pending_hashes_ >= max_pending_hashes_) {
    ++dropped_;
    if (!lost_pushed_) {
      runs_.push_back(store_event{store_event::kind::lost, tier, key.ns, {}});
      lost_pushed_ = true;
    }
    return;
  }
  if (runs_.empty() || runs_.back().what != what || runs_.back().tier != tier ||
      runs_.back().ns != key.ns)
    runs_.push_back(store_event{what, tier, key.ns, {}});
  runs_.back().hashes.push_back(key.hash);
  ++pending_hashes_;
}

std::vector<store_event> event_log::drain() {
  std::lock_guard guard{mutex_};
  std::vector<store_event> out;
  out.swap(runs_);
  pending_hashes_ = 0;
  lost_pushed_ = false;
  return out;
}

uint64_t event_log::dropped() const {
  std::lock_guard guard{mutex_};
  return dropped_;
}

} // namespace tessera::kvstore
