// The engine's side of the lower KV tiers (engine.hpp, "lower KV tiers"):
// hashing a prompt as the prefix cache does, and moving whole cached blocks
// out of and into the pool.
#include "engine/engine.hpp"

#include "engine/scheduler.hpp"

namespace tessera::engine {

std::vector<kv_block_hash> engine::block_hashes(std::span<const int32_t> tokens,
                                                std::string_view cache_salt) const {
  const int32_t bt = backend_->layout().block_tokens;
  std::vector<kv_block_hash> out;
  kv_hash_blocks(hash_seed_, kv_hash_root(hash_seed_, cache_salt), tokens, bt,
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

bool engine::insert_cached_block(kv_block_hash hash, std::span<const std::byte> bytes) {
  if (!cache_->prefix_caching() || bytes.size() != backend_->layout().block_bytes())
    return false;
  if (cache_->find_cached(hash))
    return true;
  std::vector<kv_block_id> got;
  if (!cache_->allocate(1, got))
    return false;
  backend_->write_block(got[0], bytes);
  cache_->cache_block(got[0], hash);
  cache_->free_blocks(got);
  return true;
}

} // namespace tessera::engine
