// The engine's side of the lower KV tiers (engine.hpp, "lower KV tiers"):
// hashing a prompt as the prefix cache does, and moving whole cached blocks
// out of and into the pool.
#include "engine/engine.hpp"

#include "engine/kv_int8.hpp"
#include "engine/scheduler.hpp"

namespace tessera::engine {

std::vector<kv_block_hash> engine::block_hashes(std::span<const int32_t> tokens,
                                                std::string_view cache_salt) const {
  const int32_t bt = backend_->layout().block_tokens;
  std::vector<kv_block_hash> out;
  kv_hash_blocks(cfg_.hash_key, kv_hash_root(cfg_.hash_key, hash_seed_, cache_salt), tokens, bt,
                 tokens.size() / static_cast<size_t>(bt), out);
  return out;
}

size_t engine::cached_prefix_blocks(std::span<const kv_block_hash> hashes) const {
  size_t n = 0;
  while (n < hashes.size() && cache_->find_cached(hashes[n]))
    ++n;
  return n;
}

bool engine::read_cached_block(kv_block_hash hash, std::span<std::byte> out) const {
  auto id = cache_->find_cached(hash);
  if (!id || out.size() != backend_->layout().block_bytes())
    return false;
  backend_->read_block(*id, out);
  return true;
}

size_t engine::extend_cached_prefix(std::span<const kv_block_hash> hashes, const block_source& fetch) {
  if (!cache_->prefix_caching())
    return 0;
  std::vector<kv_block_id> held;
  size_t n = cache_->match_prefix(hashes, held);
  std::vector<std::byte> bytes(backend_->layout().block_bytes());
  for (; n < hashes.size(); ++n) {
    if (cache_->match_prefix(hashes.subspan(n, 1), held) == 1)
      continue; // cached already (a later block of a chain whose middle was evicted)
    // A fetched block is outside data: an int8 block with a bad scale is
    // not used (the prefix ends before it).
    if (!fetch(n, bytes) || check_kv_block(backend_->layout(), bytes) || !cache_->allocate(1, held))
      break;
    backend_->write_block(held.back(), bytes);
    cache_->cache_block(held.back(), hashes[n]);
  }
  cache_->free_blocks(held); // in reverse: the chain's first block ends most recently freed
  return n;
}

} // namespace tessera::engine
