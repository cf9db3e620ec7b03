#pragma once
/// @file
/// A model's weights, loaded from a Hugging Face folder (model.safetensors,
/// or shards listed in model.safetensors.index.json), memory-mapped and kept
/// in the file's dtype (f32, f16 or bf16): kernels read 16-bit weights
/// directly, so a bf16 model moves half the bytes of an f32 one.

#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include <caf/expected.hpp>

#include "engine/model_config.hpp"
#include "engine/safetensors.hpp"

namespace tessera::engine {

/// The tensors of one decoder layer. Linear weights are [out, in] (HF).
struct layer_weights {
  tensor_view attn_norm; ///< [hidden]
  tensor_view wq;        ///< [heads*head_dim, hidden]
  tensor_view wk;        ///< [kv_heads*head_dim, hidden]
  tensor_view wv;        ///< [kv_heads*head_dim, hidden]
  tensor_view wo;        ///< [hidden, heads*head_dim]
  std::optional<tensor_view> bq, bk, bv; ///< present iff attention_bias
  tensor_view mlp_norm;  ///< [hidden]
  tensor_view w_gate;    ///< [intermediate, hidden]
  tensor_view w_up;      ///< [intermediate, hidden]
  tensor_view w_down;    ///< [hidden, intermediate]
};

/// All weights of a model. Owns the mappings the views point into; not
/// copyable. Thread-safe to read from any number of threads.
struct model_weights {
  model_config config;
  tensor_view embed;      ///< [vocab, hidden]
  tensor_view final_norm; ///< [hidden]
  tensor_view lm_head;    ///< [vocab, hidden]; the embedding if tied
  std::vector<layer_weights> layers;
  /// The mapped files (one, or one per shard).
  std::vector<safetensors_file> files;
  /// Total bytes of all weight tensors the forward pass reads per token
  /// (everything but the embedding table, which is only gathered).
  [[nodiscard]] size_t bytes_read_per_token() const;
};

/// Loads `dir`: config.json, then model.safetensors or the shards named in
/// model.safetensors.index.json. Checks every tensor the architecture needs
/// is present with the right shape and a supported dtype; errors name the
/// file, the tensor and the expected vs found shape. Every value of those
/// tensors must be finite: a NaN or inf is refused (bad_weights) naming the
/// file, the tensor and the element (weights_check.hpp); this reads every
/// weight once at load. Extra tensors (e.g. rotary inv_freq buffers) are
/// ignored.
[[nodiscard]] caf::expected<std::unique_ptr<model_weights>>
load_model_weights(const std::filesystem::path& dir);

/// Options for write_random_model.
struct random_model_options {
  uint64_t seed = 0;
  /// dtype of the weights written. Default: bf16.
  dtype weight_dtype = dtype::bf16;
  /// Standard deviation of the normal init of every matrix (norms are 1).
  float init_std = 0.02f;
  /// Number of safetensors files. 1 writes model.safetensors; n > 1 splits
  /// the tensors (in order, balanced by bytes) across
  /// model-0000i-of-0000n.safetensors and writes
  /// model.safetensors.index.json. Must not exceed the tensor count.
  /// Default: 1.
  int shards = 1;
};

/// Writes config.json, generation_config.json and model.safetensors for a
/// random-weight model of shape `cfg` into `dir` (created if missing):
/// matrices N(0, init_std) from a seeded generator, norm weights 1, biases
/// N(0, init_std). Deterministic for a given seed: each tensor's stream
/// depends only on the seed and its name. Memory stays bounded (tensors are
/// generated in 1 MiB chunks straight into the write buffer). Removes a
/// stale model file of the other layout (single vs sharded). Does not write
/// the tokenizer (see tokenizer_builder.hpp). Errors: bad_config for an
/// invalid `cfg` or options, io_error naming the file.
[[nodiscard]] caf::error write_random_model(const std::filesystem::path& dir,
                                            const model_config& cfg,
                                            const random_model_options& opts);

/// Writes config.json and generation_config.json for `cfg` into `dir`
/// (created if missing) and no weights: a folder for the sim backend.
/// Removes weight files of an earlier model there (model.safetensors, the
/// index and its shards), so no stale weights pair with the new config.
/// Errors as write_random_model.
[[nodiscard]] caf::error write_model_config(const std::filesystem::path& dir,
                                            const model_config& cfg);

} // namespace tessera::engine
