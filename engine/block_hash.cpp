#include "engine/block_hash.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <string>

#define XXH_STATIC_LINKING_ONLY // XXH3_state_t on the stack
#include <xxhash.h>

namespace tessera::engine {

namespace {

static_assert(std::endian::native == std::endian::little,
              "block hashes are defined over little-endian bytes");

} // namespace

uint64_t hash_bytes(const void* data, size_t size, uint64_t seed) {
  return XXH3_64bits_withSeed(data, size, seed);
}

uint64_t kv_hash_seed(uint64_t model_fingerprint, int32_t block_tokens,
                      std::string_view kv_dtype_name) {
  std::string buf = "tessera-kv-v1|";
  buf.append(reinterpret_cast<const char*>(&model_fingerprint), sizeof model_fingerprint);
  buf.append(reinterpret_cast<const char*>(&block_tokens), sizeof block_tokens);
  buf.append(kv_dtype_name);
  return XXH3_64bits(buf.data(), buf.size());
}

kv_block_hash kv_hash_root(uint64_t seed, std::string_view cache_salt) {
  return XXH3_64bits_withSeed(cache_salt.data(), cache_salt.size(), seed);
}

kv_block_hash kv_hash_block(uint64_t seed, kv_block_hash parent,
                            std::span<const int32_t> block_tokens) {
  XXH3_state_t state;
  XXH3_64bits_reset_withSeed(&state, seed);
  XXH3_64bits_update(&state, &parent, sizeof parent);
  XXH3_64bits_update(&state, block_tokens.data(), block_tokens.size_bytes());
  return XXH3_64bits_digest(&state);
}

void kv_hash_blocks(uint64_t seed, kv_block_hash root, std::span<const int32_t> tokens,
                    int32_t block_tokens, size_t count, std::vector<kv_block_hash>& out) {
  count = std::min(count, tokens.size() / static_cast<size_t>(block_tokens));
  while (out.size() < count) {
    size_t i = out.size();
    kv_block_hash parent = i == 0 ? root : out[i - 1];
    out.push_back(kv_hash_block(seed, parent, tokens.subspan(i * block_tokens, block_tokens)));
  }
}

} // namespace tessera::engine
