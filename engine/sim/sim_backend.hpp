#pragma once
/// @file
/// The sim backend: the engine's backend interface without model math, for
/// running and measuring a cluster at GPU speed on a machine without GPUs
/// (what NVIDIA Dynamo's "mocker" does). The real engine (scheduler, paged
/// KV cache, prefix cache, sampling) runs on top of it unchanged.
///
/// Time. forward() prices the batch with the roofline model of
/// sim_cost_model.hpp for a named GPU, records the cost (last_step(),
/// totals()) and, when time_scale > 0, sleeps until step start +
/// seconds * time_scale (0.1 replays ten times faster than real time).
/// The per-step CPU cost is O(tokens) hashing plus one logits row per
/// sequence that wants one; no attention, no matmul. A block written into
/// the pool from host memory (write_block: a kv store tier's block, a
/// copied hand-off) costs its real bytes over the GPU's host link
/// (gpu_spec::host_link_bytes_s * host_link_efficiency, each of the
/// tensor-parallel GPUs loading its share), added to the next step: the
/// engine waits for its loads, as vLLM's KV connectors do. Where the block
/// came from (disk, another node) is not modelled: that time is the real
/// one of the scaled payload on this machine. RMA puts into the pool
/// (disaggregated hand-offs) cost nothing here.
///
/// Tokens. Each position's KV slot holds an 8-byte digest chained over the
/// sequence: d[p] = mix(d[p-1], token[p], p), d[-1] = the fingerprint. The
/// next token is chosen by a hash of d[last] from `emit_ids` (never BOS or
/// EOS unless eos_probability > 0), and its logits row is 0 there, -1e4 at
/// a second, fallback id (taken when the first is masked, e.g. by
/// min_tokens or a stop id) and -1e9 elsewhere: greedy and any seeded
/// sampling pick the same token, identical prompts give identical outputs,
/// and the output depends on the KV bytes as a real model's does (the digest
/// of the last position is read back from the cache), so a wrong or missing
/// KV transfer shows as different tokens.
///
/// KV payload. The block accounting is the real one: num_blocks blocks of
/// block_tokens tokens, sized from the modelled GPU KV capacity. Each block
/// in host memory is the real block size divided by payload_scale (so a
/// long trace fits this machine's memory and disk), with a self-consistent
/// layout: block_tokens and kv_dtype kept, layers, then kv_heads, then
/// head_dim divided (each by its greatest common divisor with what is left
/// of the scale), so block_bytes() == real block bytes / payload_scale
/// exactly; payload_scale must divide layers * kv_heads * head_dim and
/// leave at least 8 bytes per token. kv_pool_memory() is that host memory,
/// so hand-offs, KV store writes and RMA move real (scaled) bytes.
///
/// Fingerprint: a hash of "sim", the config and payload_scale, so every sim
/// worker of a model with the same scale agrees (block hashes, router) and
/// none matches a cpu backend or a different payload layout.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "engine/backend.hpp"
#include "engine/sim/sim_cost_model.hpp"
#include "engine/sim/sim_gpu.hpp"

namespace tessera::engine::sim {

/// What a user chooses about the sim (CLI --sim-*, TOML [sim]).
struct sim_settings {
  /// GPU preset (gpu_names()). Default: "h100".
  std::string gpu = "h100";
  /// Wall-clock seconds slept per modelled second; 0: never sleep.
  /// Default: 1 (real time).
  double time_scale = 1.0;
  /// Host KV bytes = real KV bytes / payload_scale. Default: 1.
  int32_t payload_scale = 1;
  /// GPUs sharing the model by tensor parallelism (bytes, flops and
  /// memory split evenly; communication not modelled). Default: 1.
  int32_t tensor_parallel = 1;
  /// Overrides of the calibration table (default_calibration(gpu)).
  std::optional<double> memory_efficiency;
  std::optional<double> compute_efficiency;
  std::optional<double> step_overhead_s;
  /// Share of GPU memory for weights + KV when the KV capacity is derived
  /// (kv_cache_bytes 0). Default: 0.9 (vLLM's gpu_memory_utilization).
  double gpu_memory_utilization = 0.9;
  /// Chance that a step emits the model's first EOS id. Default: 0 (never:
  /// requests end at max_tokens).
  double eos_probability = 0;
};

/// Checks every field; errors (engine_errc::bad_request) name it.
[[nodiscard]] caf::error validate(const sim_settings& s);

/// Options of make_sim_backend.
struct sim_backend_options {
  sim_settings settings;
  /// Tokens per KV block. Default: 16.
  int32_t block_tokens = 16;
  /// KV element type (the modelled GPU's). Default: bf16.
  dtype kv_dtype = dtype::bf16;
  /// Blocks in the pool; 0 derives them from kv_cache_bytes. Default: 0.
  int32_t num_blocks = 0;
  /// The modelled GPU KV capacity in real (unscaled) bytes, when num_blocks
  /// is 0; 0 derives it: memory * tensor_parallel * gpu_memory_utilization
  /// minus the weights. Default: 0.
  size_t kv_cache_bytes = 0;
  /// Token ids the sim may emit, each < vocab_size; empty: every id but
  /// the config's BOS and EOS. (backend_factory passes the served
  /// tokenizer's readable, non-special ids.)
  std::vector<int32_t> emit_ids;
  /// Waits until a deadline; empty: std::this_thread::sleep_until. Called
  /// only when time_scale > 0. Tests inject a recorder.
  std::function<void(std::chrono::steady_clock::time_point)> sleep_until;
};

/// Totals over every step so far.
struct sim_totals {
  uint64_t steps = 0;
  uint64_t tokens = 0;
  /// Modelled seconds of all steps, and of the compute-bound ones.
  double modelled_s = 0;
  double compute_bound_s = 0;
  /// Blocks loaded through write_block, and the modelled seconds of those
  /// loads (part of modelled_s).
  uint64_t loaded_blocks = 0;
  double load_s = 0;
};

/// The block layout for a real layout scaled down by `payload_scale` (see
/// the file comment). Errors name the scale and what it must divide.
[[nodiscard]] caf::expected<kv_layout> scaled_layout(const model_config& cfg, int32_t block_tokens,
                                                     dtype kv_dtype, int32_t payload_scale);

/// The sim backend. Not thread-safe (the engine thread calls it), except
/// last_step() / totals() which are only consistent on that thread.
class sim_backend final : public backend {
public:
  ~sim_backend() override;

  const model_config& config() const override { return cfg_; }
  /// Up to the highest id it may emit: a step neither writes nor has the
  /// sampler scan 128k-entry rows of which two entries are used (the LM
  /// head's cost is still modelled for the whole vocabulary).
  int32_t logits_vocab() const override { return logits_vocab_; }
  const kv_layout& layout() const override { return layout_; }
  int32_t num_blocks() const override { return num_blocks_; }
  uint64_t model_fingerprint() const override { return fingerprint_; }
  std::string description() const override;
  double emulated_wall_seconds() const override;
  std::optional<double> prefill_wall_seconds(int64_t tokens, int64_t start_pos) const override;
  std::optional<double> load_wall_seconds(uint64_t bytes) const override;
  void forward(std::span<const forward_seq> seqs, float* logits) override;
  void copy_block(kv_block_id src, kv_block_id dst) override;
  void read_block(kv_block_id id, std::span<std::byte> out) const override;
  void write_block(kv_block_id id, std::span<const std::byte> in) override;
  std::span<std::byte> kv_pool_memory() override { return {pool_, pool_bytes_}; }
  std::span<const std::byte> kv_pool_memory() const override { return {pool_, pool_bytes_}; }

  /// The timing model in use.
  [[nodiscard]] const cost_model& costs() const { return costs_; }
  /// The cost of the last forward step (zeros before the first).
  [[nodiscard]] const step_cost& last_step() const { return last_; }
  /// Sums over all steps.
  [[nodiscard]] const sim_totals& totals() const { return totals_; }
  /// Real (modelled GPU) bytes of one block: layout().block_bytes() * payload_scale.
  [[nodiscard]] size_t modelled_block_bytes() const;
  /// The settings it runs with.
  [[nodiscard]] const sim_settings& settings() const { return opts_.settings; }

private:
  friend caf::expected<std::unique_ptr<backend>> make_sim_backend(const model_config&,
                                                                  sim_backend_options);
  sim_backend(const model_config& cfg, sim_backend_options opts, kv_layout layout,
              int32_t num_blocks, cost_model costs);

  /// Modelled seconds loading `host_bytes` of (scaled) blocks over the
  /// host link: their real bytes (x payload_scale) over its bandwidth.
  [[nodiscard]] double load_seconds(uint64_t host_bytes) const;
  [[nodiscard]] std::byte* digest_slot(kv_block_id block, int32_t slot) const;
  void write_logits(uint64_t digest, float* row) const;

  model_config cfg_;
  int32_t logits_vocab_ = 0;
  sim_backend_options opts_;
  kv_layout layout_;
  int32_t num_blocks_ = 0;
  cost_model costs_;
  uint64_t fingerprint_ = 0;
  std::byte* pool_ = nullptr;
  size_t pool_bytes_ = 0;
  std::optional<int32_t> eos_id_;
  step_cost last_;
  sim_totals totals_;
  /// Load seconds of the blocks written since the last step.
  double pending_load_s_ = 0;
  std::vector<seq_shape> shapes_;
};

/// Builds a sim backend for `cfg` (no weights needed). Errors
/// (engine_errc::bad_request) name the bad setting: unknown GPU, a payload
/// scale that does not divide the layout, weights larger than the GPU when
/// the KV capacity is derived, a pool of no block.
[[nodiscard]] caf::expected<std::unique_ptr<backend>> make_sim_backend(const model_config& cfg,
                                                                       sim_backend_options opts);

/// The sim backend behind `be`, or null if it is another backend.
[[nodiscard]] const sim_backend* as_sim_backend(const backend& be);

} // namespace tessera::engine::sim
