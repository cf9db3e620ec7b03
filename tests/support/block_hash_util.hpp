#pragma once
/// @file
/// Block hashes for tests: bh(n) is a distinct 128-bit hash per n with both
/// halves set (so a codec that drops either half fails a round trip), and
/// gtest prints hashes as hex.

#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <vector>

#include "protocol/block_hash.hpp"

namespace tessera::protocol {

inline void PrintTo(const kv_block_hash& h, std::ostream* os) { *os << to_hex(h); }

} // namespace tessera::protocol

namespace tessera::test {

/// The test hash numbered `n`.
inline protocol::kv_block_hash bh(uint64_t n) { return {n ^ 0xA5A5'0000'0000'0000ull, n}; }

/// Test hashes numbered `ns`, in order.
inline std::vector<protocol::kv_block_hash> bhs(std::initializer_list<uint64_t> ns) {
  std::vector<protocol::kv_block_hash> out;
  for (auto n : ns)
    out.push_back(bh(n));
  return out;
}

} // namespace tessera::test
