#include "engine/kv_cache.hpp"

#include <utility>

#include "common/assert.hpp"

namespace tessera::engine {

kv_cache::kv_cache(int32_t num_blocks, int32_t block_tokens, bool enable_prefix_caching)
  : block_tokens_(block_tokens),
    prefix_caching_(enable_prefix_caching),
    ref_(num_blocks, 0),
    hash_(num_blocks),
    hashed_(num_blocks, false),
    prev_(num_blocks, none),
    next_(num_blocks, none) {
  TESSERA_ASSERT(num_blocks > 0 && block_tokens > 0);
  for (kv_block_id i = 0; i < num_blocks; ++i)
    push_free_back(i);
}

int32_t kv_cache::num_cached_free_blocks() const {
  int32_t n = 0;
  for (kv_block_id i = head_; i != none; i = next_[i])
    n += hashed_[i] ? 1 : 0;
  return n;
}

void kv_cache::push_free_back(kv_block_id id) {
  prev_[id] = tail_;
  next_[id] = none;
  if (tail_ != none)
    next_[tail_] = id;
  else
    head_ = id;
  tail_ = id;
  ++free_count_;
}

void kv_cache::unlink_free(kv_block_id id) {
  if (prev_[id] != none)
    next_[prev_[id]] = next_[id];
  else
    head_ = next_[id];
  if (next_[id] != none)
    prev_[next_[id]] = prev_[id];
  else
    tail_ = prev_[id];
  prev_[id] = next_[id] = none;
  --free_count_;
}

void kv_cache::drop_hash(kv_block_id id) {
  if (!hashed_[id])
    return;
  auto it = cached_.find(hash_[id]);
  if (it != cached_.end() && it->second == id) {
    cached_.erase(it);
    if (record_events_)
      events_.push_back({kv_cache_event::kind::removed, hash_[id]});
  }
  hashed_[id] = false;
}

bool kv_cache::allocate(int32_t n, std::vector<kv_block_id>& out) {
  if (n > free_count_)
    return false;
  for (int32_t i = 0; i < n; ++i) {
    kv_block_id id = head_;
    unlink_free(id);
    if (hashed_[id]) {
      drop_hash(id);
      ++stats_.evictions;
    }
    ref_[id] = 1;
    out.push_back(id);
  }
  return true;
}

size_t kv_cache::match_prefix(std::span<const kv_block_hash> hashes,
                              std::vector<kv_block_id>& out) {
  if (!prefix_caching_)
    return 0;
  size_t hits = 0;
  for (auto h : hashes) {
    auto it = cached_.find(h);
    if (it == cached_.end())
      break;
    kv_block_id id = it->second;
    if (ref_[id] == 0)
      unlink_free(id);
    ++ref_[id];
    out.push_back(id);
    ++hits;
  }
  return hits;
}

void kv_cache::cache_block(kv_block_id id, kv_block_hash hash) {
  TESSERA_ASSERT(ref_[id] > 0, "only a held block can be cached");
  if (!prefix_caching_ || hashed_[id])
    return;
  if (cached_.emplace(hash, id).second) {
    hash_[id] = hash;
    hashed_[id] = true;
    if (record_events_)
      events_.push_back({kv_cache_event::kind::stored, hash});
  }
}

void kv_cache::retain(kv_block_id id) {
  TESSERA_ASSERT(ref_[id] > 0, "retain of a free block");
  ++ref_[id];
}

void kv_cache::free_blocks(std::span<const kv_block_id> ids) {
  for (auto it = ids.rbegin(); it != ids.rend(); ++it) {
    kv_block_id id = *it;
    TESSERA_ASSERT(ref_[id] > 0, "double free of a KV block");
    if (--ref_[id] == 0) {
      if (!hashed_[id]) {
        // Nothing to keep: put it at the front so it is reused first.
        prev_[id] = none;
        next_[id] = head_;
        if (head_ != none)
          prev_[head_] = id;
        else
          tail_ = id;
        head_ = id;
        ++free_count_;
      } else {
        push_free_back(id);
      }
    }
  }
}

std::optional<kv_block_id> kv_cache::find_cached(kv_block_hash hash) const {
  auto it = cached_.find(hash);
  if (it == cached_.end())
    return std::nullopt;
  return it->second;
}

std::optional<kv_block_hash> kv_cache::block_hash(kv_block_id id) const {
  if (!hashed_[id])
    return std::nullopt;
  return hash_[id];
}

std::optional<kv_cache::writable_block> kv_cache::make_writable(kv_block_id id) {
  TESSERA_ASSERT(ref_[id] > 0, "make_writable of a free block");
  if (ref_[id] == 1) {
    drop_hash(id);
    return writable_block{id, false};
  }
  std::vector<kv_block_id> fresh;
  if (!allocate(1, fresh))
    return std::nullopt;
  --ref_[id];
  ++stats_.cow_copies;
  return writable_block{fresh[0], true};
}

void kv_cache::record_prefix_query(uint64_t query_tokens, uint64_t hit_tokens) {
  stats_.prefix_query_tokens += query_tokens;
  stats_.prefix_hit_tokens += hit_tokens;
}

std::vector<kv_block_hash> kv_cache::cached_hashes() const {
  std::vector<kv_block_hash> out;
  out.reserve(cached_.size());
  for (const auto& [h, id] : cached_)
    out.push_back(h);
  return out;
}

void kv_cache::reset_prefix_cache() {
  cached_.clear();
  std::fill(hashed_.begin(), hashed_.end(), false);
  if (record_events_) {
    events_.clear();
    events_.push_back({kv_cache_event::kind::cleared, {}});
  }
}

void kv_cache::record_events(bool on) {
  record_events_ = on;
  if (!on)
    events_.clear();
}

std::vector<kv_cache_event> kv_cache::drain_events() {
  return std::exchange(events_, {});
}

} // namespace tessera::engine
