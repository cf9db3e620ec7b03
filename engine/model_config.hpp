#pragma once
/// @file
/// The architecture of a Llama-family model, read from a Hugging Face
/// config.json (model_type llama, mistral or qwen2) and written back by
/// `tessera model init`.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <caf/expected.hpp>
#include <nlohmann/json_fwd.hpp>

#include "engine/dtype.hpp"

namespace tessera::engine {

/// RoPE frequency scaling (config.json "rope_scaling").
struct rope_scaling_config {
  /// "" (none), "linear" or "llama3". Default: "".
  std::string type;
  /// Scale factor. Default: 1.
  float factor = 1.0f;
  /// Llama 3 only. Defaults: 1, 4, 8192.
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  int32_t original_max_position_embeddings = 8192;

  /// Field-wise equality (exact float comparison).
  bool operator==(const rope_scaling_config&) const = default;
};

/// Hyper-parameters of a Llama-family decoder.
struct model_config {
  /// config.json "model_type": "llama", "mistral" or "qwen2".
  std::string model_type = "llama";
  int32_t vocab_size = 0;
  /// Model width ("hidden_size").
  int32_t hidden_size = 0;
  /// SwiGLU width ("intermediate_size").
  int32_t intermediate_size = 0;
  int32_t num_hidden_layers = 0;
  int32_t num_attention_heads = 0;
  /// Defaults to num_attention_heads (MHA) when absent.
  int32_t num_key_value_heads = 0;
  /// Defaults to hidden_size / num_attention_heads when absent.
  int32_t head_dim = 0;
  int32_t max_position_embeddings = 2048;
  /// Default: 1e-6 (1e-5 for llama configs that omit it is rare; HF's default).
  float rms_norm_eps = 1e-6f;
  /// Default: 10000.
  float rope_theta = 10000.0f;
  rope_scaling_config rope_scaling;
  /// lm_head shares the embedding matrix. Default: false.
  bool tie_word_embeddings = false;
  /// q/k/v projections carry a bias (Qwen2, or llama "attention_bias").
  bool attention_bias = false;
  /// config.json "torch_dtype". Default: bf16.
  dtype torch_dtype = dtype::bf16;
  std::optional<int32_t> bos_token_id;
  /// "eos_token_id" may be one id or a list.
  std::vector<int32_t> eos_token_ids;

  /// Parameter count implied by the shapes (embedding and lm_head included).
  [[nodiscard]] int64_t parameter_count() const;

  /// Field-wise equality (exact float comparison); parse(to_json(c)) == c.
  bool operator==(const model_config&) const = default;
};

/// Parses the text of a config.json. `source` names the file in errors.
/// Validates every field: positive sizes, heads dividing evenly, known
/// model_type and rope_scaling type; errors name the field and the file.
[[nodiscard]] caf::expected<model_config>
parse_model_config(std::string_view json_text, std::string_view source);

/// Reads and parses `dir/config.json`.
[[nodiscard]] caf::expected<model_config>
load_model_config(const std::filesystem::path& dir);

/// The config.json a Hugging Face loader would accept for `cfg`. For a
/// "linear" rope_scaling only the factor is written (the Llama 3 fields do
/// not apply to it).
nlohmann::json to_json(const model_config& cfg);

/// A named random-model shape for `tessera model init`: "tiny", "small",
/// and smaller test shapes ("nano", "nano-tied", "nano-mha", "nano-qwen2",
/// "nano-llama3", "micro"); and the shapes of real models, for the sim
/// backend (written config-only): "llama3-8b" (Llama 3.1 8B) and
/// "llama3-70b". All use the demo tokenizer's ids (BOS 0, EOS {1, 4}).
/// Returns nullopt for an unknown name.
std::optional<model_config> model_shape(std::string_view name);

/// Names accepted by model_shape, for help texts.
std::vector<std::string> model_shape_names();

} // namespace tessera::engine
