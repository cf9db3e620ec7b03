#include "engine/block_hash.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>

#include <xxhash.h>

namespace tessera::engine {

namespace {

static_assert(std::endian::native == std::endian::little,
              "block hashes are defined over little-endian bytes");
static_assert(std::is_trivially_copyable_v<kv_block_hash> && sizeof(kv_block_hash) == 16);

// Domain tags: a root's input never reads as a block's.
constexpr unsigned char root_tag = 'R';
constexpr unsigned char block_tag = 'B';

kv_block_hash from_digest(const siphash_digest& d) { return {d.first, d.second}; }

} // namespace

kv_hash_key kv_hash_key_from_bytes(std::span<const std::byte, kv_hash_key_bytes> b) {
  kv_hash_key k;
  std::memcpy(&k.k0, b.data(), 8);
  std::memcpy(&k.k1, b.data() + 8, 8);
  return k;
}

const kv_hash_key& process_kv_hash_key() {
  static const kv_hash_key key = [] {
    std::random_device rd; // /dev/urandom (getrandom) with libstdc++
    auto word = [&] { return (static_cast<uint64_t>(rd()) << 32) | rd(); };
    kv_hash_key k;
    k.k0 = word();
    k.k1 = word();
    return k;
  }();
  return key;
}

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

kv_block_hash kv_hash_root(const kv_hash_key& key, uint64_t ns, std::string_view cache_salt) {
  siphash128 h{key};
  h.update(&root_tag, 1);
  h.update(&ns, sizeof ns);
  h.update(cache_salt.data(), cache_salt.size());
  return from_digest(h.final());
}

kv_block_hash kv_hash_block(const kv_hash_key& key, kv_block_hash parent,
                            std::span<const int32_t> block_tokens) {
  siphash128 h{key};
  unsigned char head[17];
  head[0] = block_tag;
  std::memcpy(head + 1, &parent.hi, 8);
  std::memcpy(head + 9, &parent.lo, 8);
  h.update(head, sizeof head);
  h.update(block_tokens.data(), block_tokens.size_bytes());
  return from_digest(h.final());
}

void kv_hash_blocks(const kv_hash_key& key, kv_block_hash root, std::span<const int32_t> tokens,
                    int32_t block_tokens, size_t count, std::vector<kv_block_hash>& out) {
  count = std::min(count, tokens.size() / static_cast<size_t>(block_tokens));
  out.reserve(count);
  while (out.size() < count) {
    size_t i = out.size();
    kv_block_hash parent = i == 0 ? root : out[i - 1];
    out.push_back(kv_hash_block(key, parent, tokens.subspan(i * block_tokens, block_tokens)));
  }
}

} // namespace tessera::engine
