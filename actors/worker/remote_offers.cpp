#include "actors/worker/remote_offers.hpp"

#include <algorithm>

#include "kvstore/block.hpp"

namespace tessera::actors {

void remote_store_memory::remember(std::span<const engine::kv_block_hash> hashes) {
  if (max_ == 0)
    return;
  for (const auto& h : hashes) {
    if (!set_.insert(h).second)
      continue;
    order_.push_back(h);
    while (set_.size() > max_ && !order_.empty()) {
      set_.erase(order_.front());
      order_.pop_front();
    }
  }
  // Forgotten hashes stay in order_ until they reach its front: keep it
  // from growing without bound under remember/forget churn.
  if (order_.size() > 2 * max_ + 1024) {
    std::deque<engine::kv_block_hash> live;
    for (const auto& h : order_)
      if (set_.contains(h))
        live.push_back(h);
    order_ = std::move(live);
  }
}

void remote_store_memory::forget(std::span<const engine::kv_block_hash> hashes) {
  for (const auto& h : hashes)
    set_.erase(h);
}

void remote_store_memory::clear() {
  set_.clear();
  order_.clear();
}

remote_offer_copy copy_remote_offer(const engine::engine& eng, const remote_store_memory& held,
                                    std::span<const int32_t> tokens, std::string_view cache_salt, uint64_t max_bytes,
                                    uint64_t chunk_bytes) {
  remote_offer_copy out;
  if (tokens.size() < 2)
    return out;
  const auto& layout = eng.get_backend().layout();
  const auto block_bytes = layout.block_bytes();
  const auto hashes = eng.block_hashes(tokens.first(tokens.size() - 1), cache_salt);
  uint64_t bytes = 0;
  uint64_t chunk = 0;
  for (const auto& h : hashes) {
    if (held.holds(h))
      continue;
    if (bytes + block_bytes > max_bytes) {
      if (eng.cached_prefix_blocks({&h, 1}) == 0)
        break; // the pool lost it: neither it nor the rest were offerable
      ++out.dropped;
      continue;
    }
    std::vector<std::byte> copy(block_bytes);
    if (!eng.read_cached_block(h, copy))
      break;
    if (out.offers.empty() || (chunk > 0 && chunk + block_bytes > chunk_bytes)) {
      out.offers.emplace_back().layout = layout;
      chunk = 0;
    }
    const auto sum = kvstore::payload_checksum(copy.data(), copy.size());
    out.offers.back().blocks.push_back({h, layout.block_tokens, sum, std::move(copy)});
    bytes += block_bytes;
    chunk += block_bytes;
  }
  return out;
}

std::vector<engine::kv_block_hash> hashes_of(const transport::wire::kv_fetch_reply& offer) {
  std::vector<engine::kv_block_hash> out;
  out.reserve(offer.blocks.size());
  for (const auto& b : offer.blocks)
    out.push_back(b.hash);
  return out;
}

void note_fetched(remote_store_memory& held, std::span<const engine::kv_block_hash> asked,
                  const transport::wire::kv_fetch_reply& reply) {
  if (reply.busy)
    return;
  const auto got = std::min(asked.size(), reply.blocks.size());
  held.remember(asked.first(got));
  if (!reply.more) // the store stopped at a block it lacks: it lacks the rest of the chain too
    held.forget(asked.subspan(got));
}

} // namespace tessera::actors
