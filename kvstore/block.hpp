#pragma once
/// @file
/// What the kv store holds: a KV-cache block named by its namespace and
/// chained hash (engine/block_hash.hpp), with the metadata needed to use it
/// and a checksum of its bytes. Blocks are immutable once made: the payload
/// is shared, never written, so a tier hands out a pointer, not a copy.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <caf/error.hpp>

#include "engine/backend.hpp"
#include "engine/block_hash.hpp"

namespace tessera::kvstore {

/// The name of a stored block: the namespace seed (engine::kv_hash_seed of
/// model, block size and KV dtype) and the block's chained hash. Equal keys
/// mean equal contents, so a put of a key already held is a no-op.
struct block_key {
  /// engine::kv_hash_seed of the model, block size and KV dtype.
  uint64_t ns = 0;
  /// engine::kv_block_hash of the block (and so of every block before it).
  engine::kv_block_hash hash;
  friend bool operator==(const block_key&, const block_key&) = default;
};

/// Hash functor for unordered containers of block_key.
struct block_key_hasher {
  size_t operator()(const block_key& k) const noexcept {
    // `hash` is already a keyed hash; mixing in ns keeps namespaces apart.
    return std::hash<engine::kv_block_hash>{}(k.hash) ^ static_cast<size_t>(k.ns * 0x9E3779B97F4A7C15ull);
  }
};

/// How a block's payload is encoded. The store's callers see exact blocks
/// only: put() takes them and get() returns them; int8 is how a store may
/// keep them in its tiers (tiered_store_options::tier_codec).
enum class block_codec : uint8_t {
  /// The KV itself, laid out as meta.layout says.
  exact = 0,
  /// int8 with one f32 scale per (layer, K|V, head) slab (block_quant.hpp):
  /// the scales, then the values.
  int8 = 1,
};

/// "exact" or "int8".
const char* to_string(block_codec c);

/// A block's metadata, stored with it in every tier.
struct block_meta {
  /// Shape of the payload (block_tokens, layers, KV heads, head_dim, dtype).
  engine::kv_layout layout;
  /// Tokens of the block that hold KV, 1..layout.block_tokens.
  int32_t token_count = 0;
  /// engine::hash_bytes (XXH3_64, seed 0) of the payload.
  uint64_t checksum = 0;
  /// How the payload encodes the KV. Default: exact.
  block_codec codec = block_codec::exact;
  friend bool operator==(const block_meta&, const block_meta&) = default;
};

/// Immutable block bytes, shared by the tiers and their readers. The bytes
/// are laid out as engine::kv_layout says ([layer][K|V][head][token][dim]).
using block_payload = std::shared_ptr<const std::vector<std::byte>>;

/// A block with its metadata. Copying copies the pointer, not the bytes.
struct stored_block {
  block_meta meta;
  /// Never null in a block a tier returns; size() ==
  /// encoded_payload_bytes(meta.layout, meta.codec).
  block_payload payload;

  /// Payload size in bytes (0 when payload is null).
  [[nodiscard]] size_t payload_bytes() const { return payload ? payload->size() : 0; }
};

/// Which tier a block was found in (DESIGN.md "KV store tiers"): G2 host
/// memory, G3 local disk. A router gives lower credit to lower tiers.
enum class kv_tier : uint8_t {
  /// G2: host memory of the kv store.
  host = 2,
  /// G3: RocksDB on local disk.
  disk = 3,
};

/// "host" or "disk".
const char* to_string(kv_tier t);

/// Makes a block from its layout, token count and bytes, computing the
/// checksum. The bytes are moved into a shared immutable payload.
[[nodiscard]] stored_block make_block(const engine::kv_layout& layout, int32_t token_count,
                                      std::vector<std::byte> bytes);

/// Checksum a block's payload must have: engine::hash_bytes with seed 0.
[[nodiscard]] uint64_t payload_checksum(const void* data, size_t size);

/// Whether `b`'s payload hashes to its stored checksum (false if null).
[[nodiscard]] bool verify_block(const stored_block& b);

/// Payload bytes of a block of layout `l` encoded with `c`: l.block_bytes()
/// for exact; for int8 one byte per element plus 4 per slab.
[[nodiscard]] size_t encoded_payload_bytes(const engine::kv_layout& l, block_codec c);

/// Checks a block handed in from outside: an exact block (codec exact), a
/// payload present, its size equal to layout.block_bytes(), a sane layout,
/// token_count in 1..block_tokens, and the checksum matching. Returns
/// kvstore_errc::bad_block naming the key and the fault, or no error.
[[nodiscard]] caf::error validate_block(const block_key& key, const stored_block& b);

/// Whether a layout is one the store accepts: every count positive, a known
/// dtype, and a block of at most 1 GiB.
[[nodiscard]] bool layout_is_sane(const engine::kv_layout& l);

/// "ns:hash" in hex, for messages.
[[nodiscard]] std::string to_string(const block_key& k);

} // namespace tessera::kvstore
