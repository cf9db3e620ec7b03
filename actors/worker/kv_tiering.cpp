#include "actors/worker/kv_tiering.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

namespace tessera::actors {

prefix_need prefix_need_of(const engine::engine& eng, std::span<const int32_t> prompt,
                           std::string_view cache_salt) {
  prefix_need need;
  if (prompt.size() < 2)
    return need;
  need.hashes = eng.block_hashes(prompt.first(prompt.size() - 1), cache_salt);
  need.cached = eng.cached_prefix_blocks(need.hashes);
  return need;
}

fetch_result insert_fetched(engine::engine& eng, std::span<const engine::kv_block_hash> hashes, size_t first,
                            const transport::wire::kv_fetch_reply& reply) {
  fetch_result out;
  const auto& layout = eng.get_backend().layout();
  if (first >= hashes.size() || reply.blocks.empty() || !(reply.layout == layout)) {
    out.cached = eng.cached_prefix_blocks(hashes);
    out.refused = reply.blocks.empty() || reply.layout == layout ? 0 : reply.blocks.size();
    return out;
  }
  const size_t end = std::min(hashes.size(), first + reply.blocks.size());
  out.cached = eng.extend_cached_prefix(hashes.first(end), [&](size_t i, std::span<std::byte> dst) {
    if (i < first)
      return false; // the pool lost a block before the fetched run meanwhile
    const auto& b = reply.blocks[i - first];
    if (b.hash != hashes[i] || b.token_count != layout.block_tokens || b.data.size() != dst.size() ||
        kvstore::payload_checksum(b.data.data(), b.data.size()) != b.checksum) {
      ++out.refused;
      return false;
    }
    std::memcpy(dst.data(), b.data.data(), dst.size());
    return true;
  });
  return out;
}

offer_copy copy_offer(const engine::engine& eng, const kvstore::block_store& store,
                      std::span<const int32_t> tokens, std::string_view cache_salt, uint64_t max_bytes) {
  offer_copy out;
  out.offer.ns = eng.hash_seed();
  if (tokens.size() < 2)
    return out;
  const auto& layout = eng.get_backend().layout();
  const auto hashes = eng.block_hashes(tokens.first(tokens.size() - 1), cache_salt);
  uint64_t bytes = 0;
  for (const auto& h : hashes) {
    if (store.contains({out.offer.ns, h}))
      continue;
    if (bytes + layout.block_bytes() > max_bytes) {
      if (eng.cached_prefix_blocks({&h, 1}) == 0)
        break; // the pool lost it: neither it nor the rest were offerable
      ++out.dropped;
      continue;
    }
    std::vector<std::byte> copy(layout.block_bytes());
    if (!eng.read_cached_block(h, copy))
      break;
    bytes += copy.size();
    out.offer.blocks.push_back({h, kvstore::make_block(layout, layout.block_tokens, std::move(copy))});
  }
  return out;
}

size_t offer_sequence(engine::engine& eng, kvstore::block_store& store, std::span<const int32_t> tokens,
                      std::string_view cache_salt) {
  const auto c = copy_offer(eng, store, tokens, cache_salt, std::numeric_limits<uint64_t>::max());
  return put_offer(store, c.offer);
}

} // namespace tessera::actors
