#include "kvstore/host_tier.hpp"

#include <spdlog/spdlog.h>

#include "common/assert.hpp"
#include "common/log_limiter.hpp"

namespace tessera::kvstore {

host_tier::host_tier(size_t capacity_bytes, event_log* events)
    : capacity_bytes_(capacity_bytes), events_(events) {
  stats_.capacity_bytes = capacity_bytes;
}

size_t host_tier::charge(const stored_block& b) {
  return b.payload_bytes() + entry_overhead_bytes;
}

void host_tier::remove_locked(index::iterator it) {
  used_bytes_ -= it->second.charge;
  lru_.erase(it->second.lru_pos);
  if (events_)
    events_->push(store_event::kind::removed, kv_tier::host, it->first);
  index_.erase(it);
}

host_tier::insert_result host_tier::insert(const block_key& key, stored_block b) {
  TESSERA_ASSERT(b.payload != nullptr, "host_tier::insert needs a payload");
  insert_result result;
  size_t c = charge(b);
  std::lock_guard guard{mutex_};
  if (auto it = index_.find(key); it != index_.end()) {
    lru_.splice(lru_.end(), lru_, it->second.lru_pos);
    return result;
  }
  if (c > capacity_bytes_) {
    result.too_large = true;
    return result;
  }
  while (used_bytes_ + c > capacity_bytes_) {
    TESSERA_ASSERT(!lru_.empty(), "host tier accounting out of step with its index");
    auto victim = index_.find(lru_.front());
    result.evicted.push_back(keyed_block{victim->first, victim->second.block});
    ++stats_.evictions;
    remove_locked(victim);
  }
  lru_.push_back(key);
  index_.emplace(key, entry{std::move(b), c, std::prev(lru_.end())});
  used_bytes_ += c;
  ++stats_.inserts;
  if (events_)
    events_->push(store_event::kind::stored, kv_tier::host, key);
  result.stored = true;
  return result;
}

std::optional<stored_block> host_tier::get(const block_key& key) {
  stored_block b;
  {
    std::lock_guard guard{mutex_};
    auto it = index_.find(key);
    if (it == index_.end()) {
      ++stats_.misses;
      return std::nullopt;
    }
    lru_.splice(lru_.end(), lru_, it->second.lru_pos);
    b = it->second.block;
  }
  // Hash outside the lock: a 1 MiB block takes tens of microseconds.
  if (verify_block(b)) {
    std::lock_guard guard{mutex_};
    ++stats_.hits;
    return b;
  }
  drop_unverified(key, b.payload);
  return std::nullopt;
}

void host_tier::drop_unverified(const block_key& key, const block_payload& payload) {
  {
    std::lock_guard guard{mutex_};
    ++stats_.checksum_failures;
    ++stats_.misses;
    // Drop it only if it is still the same bytes (another thread may have
    // removed it and stored a good copy meanwhile).
    if (auto it = index_.find(key); it != index_.end() && it->second.block.payload == payload)
      remove_locked(it);
  }
  // Bytes that changed in memory: rare and worth a line, but bounded.
  static log_limiter corrupt_log;
  if (auto permit = corrupt_log.admit())
    spdlog::warn("kvstore: block {} in host memory failed verification, dropped and served as a miss{}",
                 to_string(key),
                 permit.suppressed ? " (" + std::to_string(permit.suppressed) + " more since the last line)"
                                   : std::string{});
}

std::vector<std::optional<stored_block>> host_tier::peek(std::span<const block_key> keys) const {
  std::vector<std::optional<stored_block>> out(keys.size());
  std::lock_guard guard{mutex_};
  for (size_t i = 0; i < keys.size(); ++i)
    if (auto it = index_.find(keys[i]); it != index_.end())
      out[i] = it->second.block;
  return out;
}

void host_tier::mark_read(std::span<const block_key> used, size_t misses) {
  std::lock_guard guard{mutex_};
  for (const auto& key : used)
    if (auto it = index_.find(key); it != index_.end())
      lru_.splice(lru_.end(), lru_, it->second.lru_pos);
  stats_.hits += used.size();
  stats_.misses += misses;
}

bool host_tier::touch(const block_key& key) {
  std::lock_guard guard{mutex_};
  auto it = index_.find(key);
  if (it == index_.end()) {
    ++stats_.misses;
    return false;
  }
  lru_.splice(lru_.end(), lru_, it->second.lru_pos);
  ++stats_.hits;
  return true;
}

bool host_tier::contains(const block_key& key) const {
  std::lock_guard guard{mutex_};
  return index_.contains(key);
}

bool host_tier::erase(const block_key& key) {
  std::lock_guard guard{mutex_};
  auto it = index_.find(key);
  if (it == index_.end())
    return false;
  remove_locked(it);
  return true;
}

std::vector<block_key> host_tier::keys_lru_first() const {
  std::lock_guard guard{mutex_};
  return {lru_.begin(), lru_.end()};
}

void host_tier::push_snapshot(event_log& log) const {
  std::lock_guard guard{mutex_};
  for (const auto& key : lru_)
    log.push(store_event::kind::stored, kv_tier::host, key);
}

tier_stats host_tier::stats() const {
  std::lock_guard guard{mutex_};
  tier_stats s = stats_;
  s.blocks = index_.size();
  s.used_bytes = used_bytes_;
  return s;
}

size_t host_tier::used_bytes() const {
  std::lock_guard guard{mutex_};
  return used_bytes_;
}

bool host_tier::corrupt_for_testing(const block_key& key, size_t offset) {
  std::lock_guard guard{mutex_};
  auto it = index_.find(key);
  if (it == index_.end() || offset >= it->second.block.payload_bytes())
    return false;
  // The payload was created non-const (make_block), so writing through the
  // cast is defined; only a test calls this.
  auto& bytes = const_cast<std::vector<std::byte>&>(*it->second.block.payload);
  bytes[offset] = ~bytes[offset];
  return true;
}

} // namespace tessera::kvstore
