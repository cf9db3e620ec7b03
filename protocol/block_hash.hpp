#pragma once
/// @file
/// The name of a KV block: a 128-bit chained hash (how it is computed is
/// the engine's, engine/block_hash.hpp, which makes it
/// engine::kv_block_hash). Events, fetches, transfers and the store carry it.

#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace tessera::protocol {

/// A block's chained hash (128 bits).
struct kv_block_hash {
  uint64_t hi = 0;
  uint64_t lo = 0;
  friend bool operator==(const kv_block_hash&, const kv_block_hash&) = default;
  friend auto operator<=>(const kv_block_hash&, const kv_block_hash&) = default;
};

/// 32 lowercase hex digits: hi, then lo.
[[nodiscard]] std::string to_hex(const kv_block_hash& h);

} // namespace tessera::protocol

/// Block hashes are uniformly random already: either half serves a table.
template <>
struct std::hash<tessera::protocol::kv_block_hash> {
  size_t operator()(const tessera::protocol::kv_block_hash& h) const noexcept {
    return static_cast<size_t>(h.lo ^ (h.hi >> 1));
  }
};
