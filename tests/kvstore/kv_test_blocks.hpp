#pragma once
/// @file
/// Blocks with known contents for the kv store tests: the bytes of block
/// (ns, hash) are a function of the key, so any read can be checked against
/// what must be there.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kvstore/block.hpp"

namespace tessera::test {

using kvstore::block_key;
using kvstore::stored_block;

/// Namespace used by the tests unless they say otherwise.
inline constexpr uint64_t test_ns = 0x5eedull;

/// A small layout: 4 tokens, 2 layers, 2 KV heads, head_dim `head_dim`, bf16
/// (64 * head_dim bytes per block; 512 at the default 8).
inline engine::kv_layout small_layout(int32_t head_dim = 8) {
  engine::kv_layout l;
  l.block_tokens = 4;
  l.num_layers = 2;
  l.num_kv_heads = 2;
  l.head_dim = head_dim;
  l.kv_dtype = engine::dtype::bf16;
  return l;
}

/// The key of test block `i`.
inline block_key key_of(uint64_t i, uint64_t ns = test_ns) {
  return block_key{ns, {0xC2B2AE3D27D4EB4Full * (i + 1), 0x9E3779B97F4A7C15ull * (i + 1)}};
}

/// The bytes block `key` must hold: a splitmix64 stream seeded by the key.
inline std::vector<std::byte> bytes_for(const block_key& key, size_t n) {
  std::vector<std::byte> out(n);
  uint64_t x = key.hash.lo ^ key.hash.hi ^ (key.ns << 1);
  for (size_t i = 0; i < n; ++i) {
    if (i % 8 == 0) {
      x += 0x9E3779B97F4A7C15ull;
      uint64_t z = x;
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      x = z ^ (z >> 31);
    }
    out[i] = static_cast<std::byte>((x >> (8 * (i % 8))) & 0xff);
  }
  return out;
}

/// The block stored under `key` in the tests, with layout `l`.
inline stored_block block_for(const block_key& key, const engine::kv_layout& l = small_layout()) {
  return kvstore::make_block(l, l.block_tokens, bytes_for(key, l.block_bytes()));
}

/// Whether `b` is exactly the block the tests store under `key`.
inline bool is_block_for(const block_key& key, const stored_block& b) {
  return b.payload && *b.payload == bytes_for(key, b.meta.layout.block_bytes()) &&
         b.meta.token_count == b.meta.layout.block_tokens && kvstore::verify_block(b);
}

} // namespace tessera::test
