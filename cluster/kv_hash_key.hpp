#pragma once
/// @file
/// Where the key of the KV block hash (engine/block_hash.hpp) comes from.
///
/// - A cluster: derived from the cluster secret every node holds, so all
///   nodes name blocks alike, and the secret itself never keys anything
///   else: HMAC-SHA256(secret, "tessera-kv-block-hash-v1"), first 16 bytes.
/// - One `tessera serve` with a disk tier and no cluster secret: a random
///   key kept in the disk tier's folder (kv_hash_key_file_name, 32 hex
///   digits and a newline, mode 0600), made on the first start and read
///   on every later one, so the blocks on disk stay reachable.
/// - Otherwise a random key per process (engine::process_kv_hash_key).
///
/// Keys here are bytes, so this folder needs nothing from the engine:
/// engine::kv_hash_key_from_bytes turns them into a key.

#include <array>
#include <cstddef>
#include <filesystem>
#include <string_view>

#include <caf/expected.hpp>

namespace tessera::cluster {

/// The 16 bytes of a block-hash key.
using kv_hash_key_bytes = std::array<std::byte, 16>;

/// The label the cluster secret is bound to for this one use.
inline constexpr std::string_view kv_hash_key_label = "tessera-kv-block-hash-v1";

/// The key file's name inside the disk tier's folder.
inline constexpr std::string_view kv_hash_key_file_name = "kv_block_hash.key";

/// HMAC-SHA256(secret, kv_hash_key_label), first 16 bytes.
[[nodiscard]] kv_hash_key_bytes kv_hash_key_from_secret(std::string_view secret);

/// Reads the key file in `dir`, or makes it (16 random bytes, created
/// under a temporary name with mode 0600 and linked into place, so a
/// crash or a second process never leaves a half-written or a different
/// key behind) when it does not exist. Errors (caf::sec::invalid_argument)
/// name the file and what is wrong: not a regular file, group or others
/// may read it, not 32 hex digits, cannot be written.
[[nodiscard]] caf::expected<kv_hash_key_bytes> load_or_create_kv_hash_key(const std::filesystem::path& dir);

} // namespace tessera::cluster
