#pragma once
/// @file
/// A request's KV cache and generation state, exported by one engine and
/// imported by another (prefill -> decode hand-off, migration). Plain data:
/// the transport layer serialises it.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/backend.hpp"
#include "engine/block_hash.hpp"

namespace tessera::engine {

/// KV blocks plus the state needed to continue generating.
struct kv_export {
  /// backend::model_fingerprint of the exporter.
  uint64_t model_fingerprint = 0;
  kv_layout layout;
  /// Prompt followed by the tokens generated so far.
  std::vector<int32_t> tokens;
  int32_t prompt_len = 0;
  /// Tokens whose K/V are in `data` (a prefix of `tokens`).
  int32_t num_computed = 0;
  /// Sampling seed in use (so seeded sampling continues identically).
  uint64_t seed = 0;
  /// Chained hashes of the full computed blocks (block_hash.hpp).
  std::vector<kv_block_hash> block_hashes;
  /// ceil(num_computed / block_tokens) blocks of layout.block_bytes() each.
  std::vector<std::byte> data;
};

} // namespace tessera::engine
