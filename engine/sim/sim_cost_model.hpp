#pragma once
/// @file
/// The sim backend's timing model: the roofline time of one batched forward
/// step of a Llama-family model on a GPU.
///
/// For a step over sequences i, each computing n_i new tokens at positions
/// s_i .. s_i + n_i - 1 (context c_i = s_i + n_i after the step), with
/// T = sum n_i tokens and R sequences wanting logits; model shapes h
/// (hidden), q = heads * head_dim, kv = kv_heads * head_dim, f
/// (intermediate), L (layers), V (vocab), w / a / k bytes per weight /
/// activation (2, bf16) / KV element:
///
///   bytes = W                                  weights, read once per step
///         + K * sum_i (c_i + n_i)              KV: context read, new KV written
///         + A * T + 4 * V * R                  activations; f32 logits out
///   flops = 2 * P * T + 2 * V * h * R          matmuls, lm_head for R rows
///         + 4 * L * q * sum_i (n_i * s_i + n_i * (n_i + 1) / 2)
///                                              attention: QK^T and PV over
///                                              each query's causal context
///   memory_s  = bytes / (bandwidth * memory_efficiency * tp)
///   compute_s = flops / (peak_bf16 * compute_efficiency * tp)
///   seconds   = max(memory_s, compute_s) + step_overhead_s
///
/// where W = w * (parameter_count - V * h if the embedding is not tied:
/// the table is only gathered), P = L * (2*h*q + 2*h*kv + 3*h*f) (matmul
/// weights of the layers), K = 2 * L * kv * k (K and V of one token),
/// A = a * L * (8*h + 4*q + 2*kv + 3*f) (each layer's GEMM inputs and
/// outputs, attention in/out, two norms' reads and writes). With tensor
/// parallelism over tp GPUs (default 1), bytes and flops split evenly and
/// communication is not modelled. Weights, KV and the GPU figures are
/// unscaled: the payload scale of the host KV pool changes no time.

#include <cstdint>
#include <span>

#include "engine/dtype.hpp"
#include "engine/model_config.hpp"
#include "engine/sim/sim_gpu.hpp"

namespace tessera::engine::sim {

/// One sequence's part of a step.
struct seq_shape {
  /// Tokens computed this step (n_i).
  int64_t new_tokens = 0;
  /// Position of the first of them (s_i): tokens already in the KV cache.
  int64_t start_pos = 0;
  /// Logits wanted for its last token.
  bool logits = false;
};

/// The modelled cost of one step.
struct step_cost {
  /// Tokens (T) and sequences in the step.
  int64_t tokens = 0;
  int64_t seqs = 0;
  /// Bytes moved to and from GPU memory, all GPUs together.
  double bytes = 0;
  /// Floating-point operations, all GPUs together.
  double flops = 0;
  /// bytes / (bandwidth * memory_efficiency * tp), seconds.
  double memory_s = 0;
  /// flops / (peak * compute_efficiency * tp), seconds.
  double compute_s = 0;
  /// Loading the KV blocks written into the pool since the step before
  /// (sim_backend::write_block) over the host link, seconds.
  double load_s = 0;
  /// max(memory_s, compute_s) + step_overhead_s + load_s: the modelled
  /// step time.
  double seconds = 0;
  /// compute_s > memory_s.
  bool compute_bound = false;
};

/// The roofline model of one model on one GPU. Immutable; thread-safe.
class cost_model {
public:
  /// `cfg` gives the shapes and the weight dtype (torch_dtype); `kv` the
  /// KV cache's element type; `tensor_parallel` >= 1 GPUs share the model.
  cost_model(const model_config& cfg, gpu_spec gpu, gpu_calibration cal, dtype kv,
             int tensor_parallel = 1);

  /// The cost of one step over `seqs`.
  [[nodiscard]] step_cost step(std::span<const seq_shape> seqs) const;

  /// W: weight bytes read per step (all GPUs).
  [[nodiscard]] double weight_bytes() const { return weight_bytes_; }
  /// K: bytes of one token's K and V over all layers (unscaled).
  [[nodiscard]] double kv_bytes_per_token() const { return kv_bytes_per_token_; }
  /// A: activation bytes per token.
  [[nodiscard]] double activation_bytes_per_token() const { return act_bytes_per_token_; }
  /// P: matmul weights of the layers (2 * P flops per token).
  [[nodiscard]] double matmul_params() const { return matmul_params_; }
  /// 4 * L * q: flops per (query, key) pair of attention.
  [[nodiscard]] double attention_flops_per_pair() const { return attn_flops_per_pair_; }
  /// The GPU, its calibration, and how many share the model.
  [[nodiscard]] const gpu_spec& gpu() const { return gpu_; }
  [[nodiscard]] const gpu_calibration& calibration() const { return cal_; }
  [[nodiscard]] int tensor_parallel() const { return tp_; }

private:
  gpu_spec gpu_;
  gpu_calibration cal_;
  int tp_ = 1;
  double vocab_ = 0;
  double hidden_ = 0;
  double weight_bytes_ = 0;
  double kv_bytes_per_token_ = 0;
  double act_bytes_per_token_ = 0;
  double matmul_params_ = 0;
  double attn_flops_per_pair_ = 0;
};

} // namespace tessera::engine::sim
