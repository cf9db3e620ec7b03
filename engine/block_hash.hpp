#pragma once
/// @file
/// The name of a KV-cache block: a chained, keyed 128-bit hash of the
/// block's token ids and of every block before it, so equal hashes mean
/// equal prefixes (in one namespace, under one key).
///
///   root = SipHash128_k("R" || le64(ns) || cache_salt bytes)
///   h[0] = SipHash128_k("B" || parent(root) || le32(tokens of block 0))
///   h[i] = SipHash128_k("B" || parent(h[i-1]) || le32(tokens of block i))
///
/// where parent(h) = le64(h.hi) || le64(h.lo) and SipHash128_k is
/// SipHash-2-4 with 128-bit output (siphash.hpp) under the key k.
///
/// `k` is the per-cluster secret key (kv_hash_key): every node of a
/// cluster derives the same one from the cluster secret
/// (cluster/kv_hash_key.hpp), a single `tessera serve` keeps one beside its
/// disk tier or makes one per process. Without it nobody can compute the
/// name of a block, so a tenant can neither probe another's cached prompts
/// by hash nor forge colliding blocks (XXH3 with a public seed allowed
/// both). `ns` (kv_hash_seed) names the model, block size and KV dtype, so
/// that blocks of different models never match; `cache_salt` (per tenant,
/// may be empty) enters the root so one tenant cannot reach another's
/// blocks. The router index, the KV store and the wire format all name
/// blocks with exactly this function: change it here, and only here.

#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/siphash.hpp"
#include "protocol/block_hash.hpp"

namespace tessera::engine {

using protocol::kv_block_hash;
using protocol::to_hex;

/// The key of the block-hash chain (a SipHash key: 128 secret bits).
using kv_hash_key = siphash_key;

/// Bytes a kv_hash_key is made from (little-endian k0, then k1).
inline constexpr size_t kv_hash_key_bytes = 16;
[[nodiscard]] kv_hash_key kv_hash_key_from_bytes(std::span<const std::byte, kv_hash_key_bytes> b);

/// A random key made once per process (std::random_device): the default
/// of every engine and router of a process not given one, so they agree
/// with each other and with nothing outside the process.
[[nodiscard]] const kv_hash_key& process_kv_hash_key();

/// The blocks' namespace from a model fingerprint and the block layout.
[[nodiscard]] uint64_t kv_hash_seed(uint64_t model_fingerprint, int32_t block_tokens,
                                    std::string_view kv_dtype_name);

/// The parent of block 0 in namespace `ns` for a tenant's cache salt
/// (empty for none).
[[nodiscard]] kv_block_hash kv_hash_root(const kv_hash_key& key, uint64_t ns,
                                         std::string_view cache_salt);

/// Hash of a block whose predecessor hashes to `parent`.
[[nodiscard]] kv_block_hash kv_hash_block(const kv_hash_key& key, kv_block_hash parent,
                                          std::span<const int32_t> block_tokens);

/// Hashes of the first `count` full blocks of `tokens`, appended to `out`
/// starting after the `out.size()` blocks already hashed (so a growing
/// sequence extends its list incrementally). `count` is capped at
/// tokens.size() / block_tokens.
void kv_hash_blocks(const kv_hash_key& key, kv_block_hash root, std::span<const int32_t> tokens,
                    int32_t block_tokens, size_t count, std::vector<kv_block_hash>& out);

/// XXH3_64 of arbitrary bytes with a seed (model fingerprints, checksums;
/// not block names).
[[nodiscard]] uint64_t hash_bytes(const void* data, size_t size, uint64_t seed = 0);

} // namespace tessera::engine
