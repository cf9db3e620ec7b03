#pragma once
/// @file
/// The name of a KV-cache block: a chained 64-bit hash of the block's token
/// ids and of every block before it, so equal hashes mean equal prefixes.
///
///   root   = XXH3_64(cache_salt bytes, seed)
///   h[0]   = XXH3_64(le64(root)   || le32(tokens of block 0), seed)
///   h[i]   = XXH3_64(le64(h[i-1]) || le32(tokens of block i), seed)
///
/// `seed` names the namespace (model, block size, KV dtype) so that blocks of
/// different models never match; `cache_salt` (per tenant, may be empty)
/// enters the root so one tenant cannot probe another's cached prompts.
/// The router index, the KV store and the wire format all name blocks with
/// exactly this function: change it here, and only here.
///
/// Hardening note: XXH3 is fast but not collision-resistant against an
/// adversary who knows the seed; keep the seed secret per deployment or
/// swap in a keyed cryptographic hash here (vLLM moved to SHA-256).

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace tessera::engine {

/// A block's chained hash.
using kv_block_hash = uint64_t;

/// Namespace seed from a model fingerprint and the block layout.
[[nodiscard]] uint64_t kv_hash_seed(uint64_t model_fingerprint, int32_t block_tokens,
                                    std::string_view kv_dtype_name);

/// The parent of block 0 for a tenant's cache salt (empty for none).
[[nodiscard]] kv_block_hash kv_hash_root(uint64_t seed, std::string_view cache_salt);

/// Hash of a block whose predecessor hashes to `parent`.
[[nodiscard]] kv_block_hash kv_hash_block(uint64_t seed, kv_block_hash parent,
                                          std::span<const int32_t> block_tokens);

/// Hashes of the first `count` full blocks of `tokens`, appended to `out`
/// starting after the `out.size()` blocks already hashed (so a growing
/// sequence extends its list incrementally). `count` is capped at
/// tokens.size() / block_tokens.
void kv_hash_blocks(uint64_t seed, kv_block_hash root, std::span<const int32_t> tokens,
                    int32_t block_tokens, size_t count, std::vector<kv_block_hash>& out);

/// XXH3_64 of arbitrary bytes with a seed (model fingerprints, checksums).
[[nodiscard]] uint64_t hash_bytes(const void* data, size_t size, uint64_t seed = 0);

} // namespace tessera::engine
