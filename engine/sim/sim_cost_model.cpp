#include "engine/sim/sim_cost_model.hpp"

#include <algorithm>
#include <utility>

namespace tessera::engine::sim {

namespace {

// Activations are bf16 in a GPU engine, whatever the weights are.
constexpr double activation_elem_bytes = 2;
// Logits leave the GPU as f32.
constexpr double logit_bytes = 4;

} // namespace

cost_model::cost_model(const model_config& cfg, gpu_spec gpu, gpu_calibration cal, dtype kv,
                       int tensor_parallel)
  : gpu_(std::move(gpu)), cal_(std::move(cal)), tp_(std::max(1, tensor_parallel)) {
  const double h = cfg.hidden_size;
  const double q = static_cast<double>(cfg.num_attention_heads) * cfg.head_dim;
  const double kvw = static_cast<double>(cfg.num_key_value_heads) * cfg.head_dim;
  const double f = cfg.intermediate_size;
  const double layers = cfg.num_hidden_layers;
  vocab_ = cfg.vocab_size;
  hidden_ = h;
  const double embed = cfg.tie_word_embeddings ? 0.0 : vocab_ * h;
  weight_bytes_ = (static_cast<double>(cfg.parameter_count()) - embed) *
                  static_cast<double>(dtype_size(cfg.torch_dtype));
  kv_bytes_per_token_ = 2 * layers * kvw * static_cast<double>(dtype_size(kv));
  act_bytes_per_token_ = activation_elem_bytes * layers * (8 * h + 4 * q + 2 * kvw + 3 * f);
  matmul_params_ = layers * (2 * h * q + 2 * h * kvw + 3 * h * f);
  attn_flops_per_pair_ = 4 * layers * q;
}

step_cost cost_model::step(std::span<const seq_shape> seqs) const {
  step_cost c;
  double kv_tokens = 0, pairs = 0, rows = 0;
  for (const auto& s : seqs) {
    if (s.new_tokens <= 0)
      continue;
    const double n = static_cast<double>(s.new_tokens);
    const double start = static_cast<double>(s.start_pos);
    c.tokens += s.new_tokens;
    ++c.seqs;
    kv_tokens += (start + n) + n;
    pairs += n * start + n * (n + 1) / 2;
    rows += s.logits ? 1 : 0;
  }
  if (c.tokens == 0)
    return c;
  const double t = static_cast<double>(c.tokens);
  c.bytes = weight_bytes_ + kv_bytes_per_token_ * kv_tokens + act_bytes_per_token_ * t +
            logit_bytes * vocab_ * rows;
  c.flops = 2 * matmul_params_ * t + 2 * vocab_ * hidden_ * rows + attn_flops_per_pair_ * pairs;
  c.memory_s = c.bytes / (gpu_.memory_bandwidth_bytes_s * cal_.memory_efficiency * tp_);
  c.compute_s = c.flops / (gpu_.peak_bf16_flops * cal_.compute_efficiency * tp_);
  c.compute_bound = c.compute_s > c.memory_s;
  c.seconds = std::max(c.memory_s, c.compute_s) + cal_.step_overhead_s;
  return c;
}

} // namespace tessera::engine::sim
