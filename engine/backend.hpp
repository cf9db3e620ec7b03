#pragma once
/// @file
/// The interface between the engine loop and a compute backend (cpu now;
/// cuda and sim later). The engine decides what to compute and which KV
/// blocks hold what; the backend owns the weights, the KV block memory and
/// the math.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "engine/dtype.hpp"
#include "engine/kv_cache.hpp"
#include "engine/model_config.hpp"
#include "protocol/kv_layout.hpp"

namespace tessera::engine {

using protocol::kv_layout;

/// One sequence's share of a forward step: compute `tokens` at positions
/// start_pos.. start_pos+tokens.size()-1, reading and writing the KV cache
/// through `block_table` (block i holds positions [i*block_tokens,
/// (i+1)*block_tokens)). The table covers every position up to the last
/// token, and the blocks written this step are not shared.
struct forward_seq {
  std::span<const int32_t> tokens;
  int32_t start_pos = 0;
  std::span<const kv_block_id> block_table;
  /// Produce logits for the last `logits_rows` tokens (0..tokens.size()),
  /// one row each in token order: 1 for a plain decode or a prompt's last
  /// chunk, 1 + K to verify K speculative drafts. Each row is what the
  /// token alone at its position would give (the kernels are
  /// batch-invariant).
  int32_t logits_rows = 0;
};

/// A compute backend. Not thread-safe: the engine thread calls it.
class backend {
public:
  virtual ~backend() = default;

  /// The model's hyper-parameters.
  [[nodiscard]] virtual const model_config& config() const = 0;
  /// Layout of every KV block.
  [[nodiscard]] virtual const kv_layout& layout() const = 0;
  /// Blocks in the KV pool.
  [[nodiscard]] virtual int32_t num_blocks() const = 0;
  /// Identifies the weights (a hash of the config and the embedding bytes):
  /// two backends with equal fingerprints compute the same KV.
  [[nodiscard]] virtual uint64_t model_fingerprint() const = 0;
  /// Short description for banners and benchmarks, e.g. "cpu avx512 x2".
  [[nodiscard]] virtual std::string description() const = 0;

  /// Entries of each logits row forward() writes: the ids below it. Ids
  /// from it to vocab_size are never sampled (as if their logit were -inf).
  /// Default: config().vocab_size.
  [[nodiscard]] virtual int32_t logits_vocab() const { return config().vocab_size; }
  /// Wall seconds forward() was asked to last so far to emulate a device
  /// (the sim backend: modelled step seconds x time_scale); 0 for a
  /// backend that computes. A worker compares it with the wall time its
  /// steps took to tell whether the host kept up.
  [[nodiscard]] virtual double emulated_wall_seconds() const { return 0; }
  /// Wall seconds a step computing `tokens` prompt tokens after
  /// `start_pos` cached ones is expected to take, where the backend can
  /// tell (the sim backend: its modelled time x time_scale); nullopt
  /// otherwise (a worker then uses its measured token rate).
  [[nodiscard]] virtual std::optional<double> prefill_wall_seconds(int64_t tokens, int64_t start_pos) const {
    (void) tokens;
    (void) start_pos;
    return std::nullopt;
  }
  /// Wall seconds loading `bytes` of blocks (layout().block_bytes() each)
  /// from host memory into the pool is expected to take, where the backend
  /// models its device (the sim backend: the real bytes over the modelled
  /// host link x time_scale, what write_block charges to the next step);
  /// nullopt otherwise. With prefill_wall_seconds it lets a worker weigh a
  /// prefix fetch against computing it in the device's time, not the
  /// host's.
  [[nodiscard]] virtual std::optional<double> load_wall_seconds(uint64_t bytes) const {
    (void) bytes;
    return std::nullopt;
  }

  /// Runs one forward step over `seqs` (all tokens of all sequences as one
  /// batch), writing each computed token's K and V into its block. The
  /// logits rows of every sequence, sequences in order and each one's rows
  /// in token order, go to `logits` ([sum of logits_rows, logits_vocab()]).
  virtual void forward(std::span<const forward_seq> seqs, float* logits) = 0;

  /// Copies block `src`'s bytes to block `dst` (copy-on-write).
  virtual void copy_block(kv_block_id src, kv_block_id dst) = 0;
  /// Copies block `id`'s layout().block_bytes() bytes out.
  virtual void read_block(kv_block_id id, std::span<std::byte> out) const = 0;
  /// Overwrites block `id` with layout().block_bytes() bytes.
  virtual void write_block(kv_block_id id, std::span<const std::byte> in) = 0;

  /// The whole KV pool as host memory, for moving blocks without a copy
  /// (one-sided RMA into or out of the pool, registered with the NIC once).
  /// Block `id` is the layout().block_bytes() bytes at byte offset
  /// id * layout().block_bytes(); the span covers num_blocks() blocks.
  /// Empty when the pool is not host-addressable (device memory): then
  /// blocks move only through read_block / write_block. Owned by the
  /// backend, valid and at the same address for its lifetime. Which blocks
  /// may be written is the engine's business (engine::reserve_import);
  /// writing any other block corrupts the request that holds it.
  /// Default: empty.
  [[nodiscard]] virtual std::span<std::byte> kv_pool_memory() { return {}; }
  /// Read-only view of kv_pool_memory(). Default: empty.
  [[nodiscard]] virtual std::span<const std::byte> kv_pool_memory() const { return {}; }
};

} // namespace tessera::engine
