#pragma once
/// @file
/// The one place a backend is chosen and built: `tessera generate`,
/// `tessera bench engine`, the bench's engine baseline and every worker of
/// `tessera serve` / `tessera node` call make_backend, so `--engine sim`
/// works wherever `--engine cpu` does.
///
///   load_model_files(dir, kind)  config.json + tokenizer (+ weights for cpu)
///   make_backend(files, options) cpu: real math on the weights
///                                sim: the roofline timing model (sim/), no weights

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <caf/expected.hpp>

#include "engine/backend.hpp"
#include "engine/sim/sim_backend.hpp"

namespace tessera::engine {

class tokenizer;
struct model_weights;

/// The backends make_backend can build.
enum class backend_kind : uint8_t { cpu, sim };

/// "cpu" or "sim".
[[nodiscard]] std::string_view to_string(backend_kind k);
/// The kind named `name` ("cpu", "sim"), or nullopt.
[[nodiscard]] std::optional<backend_kind> parse_backend_kind(std::string_view name);

/// Which backend, and the settings only the sim has (the CLI's --engine and
/// --sim-*, a cluster config's engine and [sim]).
struct backend_choice {
  /// Default: cpu.
  backend_kind kind = backend_kind::cpu;
  /// Used when kind is sim.
  sim::sim_settings sim;
};

/// What a model folder provides to a backend. Shared, immutable.
struct model_files {
  /// config.json.
  model_config config;
  /// The weights; null when the backend needs none (sim).
  std::shared_ptr<const model_weights> weights;
  /// The tokenizer (tokenizer.json or tokenizer.model).
  std::shared_ptr<const ::tessera::engine::tokenizer> tokenizer;
};

/// Loads what a `kind` backend needs from `dir`: config.json and the
/// tokenizer, and for cpu the weights. A folder written config-only
/// (`tessera model init --no-weights`) loads for sim; for cpu the error
/// (io_error) names the missing weight files and says so.
[[nodiscard]] caf::expected<model_files> load_model_files(const std::filesystem::path& dir,
                                                          backend_kind kind);

/// Everything make_backend needs besides the model.
struct backend_options {
  backend_choice choice;
  /// cpu: compute threads (<= 0: one per core). Unused by sim. Default: 0.
  int threads = 0;
  /// KV pool. cpu: its host bytes; sim: the modelled GPU's KV capacity in
  /// real bytes (the host pool is that / payload_scale). 0: the backend's
  /// default (cpu: 256 MiB; sim: GPU memory * gpu_memory_utilization minus
  /// the weights). Default: 0.
  size_t kv_cache_bytes = 0;
  /// Tokens per KV block. Default: 16.
  int32_t block_tokens = 16;
  /// KV element type. Default: bf16.
  dtype kv_dtype = dtype::bf16;
};

/// Builds the chosen backend over `files`. For sim the emitted ids are the
/// tokenizer's printable, non-special ids below both vocabularies (the
/// tokenizer's may be smaller than config.json's vocab_size), BOS and EOS
/// excluded. Errors name the bad option.
[[nodiscard]] caf::expected<std::unique_ptr<backend>> make_backend(const model_files& files,
                                                                   const backend_options& opts);

/// Ids a sim may emit for `tok` and `cfg` (see make_backend): the lowest
/// 4096 readable ones.
[[nodiscard]] std::vector<int32_t> sim_emit_ids(const tokenizer& tok, const model_config& cfg);

} // namespace tessera::engine
