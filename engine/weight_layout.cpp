#include "engine/weight_layout.hpp"

namespace tessera::engine {

std::string layer_weight_name(int layer, const char* suffix) {
  return "model.layers." + std::to_string(layer) + "." + suffix;
}

std::vector<weight_entry> weight_layout(const model_config& cfg) {
  const int64_t h = cfg.hidden_size;
  const int64_t q = int64_t{cfg.num_attention_heads} * cfg.head_dim;
  const int64_t kv = int64_t{cfg.num_key_value_heads} * cfg.head_dim;
  const int64_t inter = cfg.intermediate_size;
  const int64_t vocab = cfg.vocab_size;
  using enum weight_role;

  std::vector<weight_entry> out;
  out.push_back({"model.embed_tokens.weight", {vocab, h}, matrix});
  for (int i = 0; i < cfg.num_hidden_layers; ++i) {
    auto name = [i](const char* suffix) { return layer_weight_name(i, suffix); };
    out.push_back({name("input_layernorm.weight"), {h}, norm});
    out.push_back({name("self_attn.q_proj.weight"), {q, h}, matrix});
    out.push_back({name("self_attn.k_proj.weight"), {kv, h}, matrix});
    out.push_back({name("self_attn.v_proj.weight"), {kv, h}, matrix});
    if (cfg.attention_bias) {
      out.push_back({name("self_attn.q_proj.bias"), {q}, bias});
      out.push_back({name("self_attn.k_proj.bias"), {kv}, bias});
      out.push_back({name("self_attn.v_proj.bias"), {kv}, bias});
    }
    out.push_back({name("self_attn.o_proj.weight"), {h, q}, matrix});
    out.push_back({name("post_attention_layernorm.weight"), {h}, norm});
    out.push_back({name("mlp.gate_proj.weight"), {inter, h}, matrix});
    out.push_back({name("mlp.up_proj.weight"), {inter, h}, matrix});
    out.push_back({name("mlp.down_proj.weight"), {h, inter}, matrix});
  }
  out.push_back({"model.norm.weight", {h}, norm});
  if (!cfg.tie_word_embeddings)
    out.push_back({"lm_head.weight", {vocab, h}, matrix});
  return out;
}

} // namespace tessera::engine
