#pragma once
/// @file
/// The CPU backend: real transformer math (embedding, RMSNorm, RoPE with
/// Llama 3 / linear scaling, GQA attention over the paged KV cache, SwiGLU,
/// logits) on a thread pool, with weights read in their file dtype.

#include <cstddef>
#include <cstdint>
#include <memory>

#include <caf/expected.hpp>

#include "engine/backend.hpp"
#include "engine/weights.hpp"

namespace tessera::engine::cpu {

/// CPU backend settings.
struct cpu_backend_options {
  /// Worker threads, caller included; <= 0 means one per core. Default: 0.
  int threads = 0;
  /// Tokens per KV block. Default: 16 (a multiple of 16 keeps the
  /// vectorised attention path).
  int32_t block_tokens = 16;
  /// Element type of the KV cache. Default: bf16.
  dtype kv_dtype = dtype::bf16;
  /// Number of KV blocks; 0 derives it from kv_cache_bytes. Default: 0.
  int32_t num_blocks = 0;
  /// KV pool size when num_blocks is 0. Default: 512 MiB.
  size_t kv_cache_bytes = size_t{512} << 20;
};

/// Builds a CPU backend over `weights` (shared: several engines may serve
/// the same mapped weights). Errors (engine_errc::bad_request /
/// unsupported) name the bad option.
[[nodiscard]] caf::expected<std::unique_ptr<backend>>
make_cpu_backend(std::shared_ptr<const model_weights> weights, const cpu_backend_options& opts);

} // namespace tessera::engine::cpu
