#include "actors/router/session_table.hpp"

#include "engine/block_hash.hpp"

namespace tessera::actors {

namespace {
// Any fixed value: keys only need to be stable within one router process.
constexpr uint64_t session_key_seed = 0x7365'7373'696f'6e31ull; // "session1"
} // namespace

session_table::session_table(size_t capacity) : capacity_(capacity) {}

uint64_t session_table::key_of(std::string_view session_id) {
  return engine::hash_bytes(session_id.data(), session_id.size(), session_key_seed);
}

std::optional<session_binding> session_table::find(uint64_t key) {
  auto it = index_.find(key);
  if (it == index_.end())
    return std::nullopt;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

void session_table::put(uint64_t key, const session_binding& binding) {
  if (capacity_ == 0)
    return;
  if (auto it = index_.find(key); it != index_.end()) {
    it->second->second = binding;
    lru_.splice(lru_.begin(), lru_, it->second);
    return;
  }
  if (index_.size() >= capacity_) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
    ++evictions_;
  }
  lru_.emplace_front(key, binding);
  index_.emplace(key, lru_.begin());
}

bool session_table::erase(uint64_t key) {
  auto it = index_.find(key);
  if (it == index_.end())
    return false;
  lru_.erase(it->second);
  index_.erase(it);
  return true;
}

} // namespace tessera::actors
