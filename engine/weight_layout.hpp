#pragma once
/// @file
/// The Hugging Face tensor names and shapes of a Llama-family model
/// (llama, mistral, qwen2). Private to the engine's loader and writer.

#include <cstdint>
#include <string>
#include <vector>

#include "engine/model_config.hpp"

namespace tessera::engine {

/// What a tensor is for; decides how a random model initialises it.
enum class weight_role : uint8_t {
  norm,   ///< RMSNorm scale, initialised to 1
  matrix, ///< linear weight or embedding, N(0, std)
  bias,   ///< projection bias, N(0, std)
};

/// One tensor the architecture defines.
struct weight_entry {
  std::string name;           ///< e.g. "model.layers.3.mlp.up_proj.weight"
  std::vector<int64_t> shape; ///< row-major; linears are [out, in]
  weight_role role = weight_role::matrix;
};

/// Every tensor of `cfg`, in Hugging Face order: embedding, layers 0..n-1
/// (input_layernorm, q/k/v(+bias)/o, post_attention_layernorm, gate/up/down),
/// final norm, then lm_head unless the embeddings are tied.
[[nodiscard]] std::vector<weight_entry> weight_layout(const model_config& cfg);

/// "model.layers.{layer}.{suffix}".
[[nodiscard]] std::string layer_weight_name(int layer, const char* suffix);

} // namespace tessera::engine
