#pragma once
/// @file
/// Model units: one currency for capacity. A request's cost is
///
///   units = a * in + c + sum over its output tokens of (b + d * context)
///         = a * in + c + b * out + d * (in * out + out * (out - 1) / 2)
///
/// where a generated token's context is the tokens before it (its decode
/// step reads their KV: the k-th output token, k from 0, reads in + k).
/// a, b, c, d are fitted per model and engine from measured step times
/// (`tessera bench units`) and stored in the model folder's serving config.
/// The router counts outstanding units per worker, the frontend charges
/// tenants' rate limits in them, and the autoscaling signal is units
/// demanded against units served.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

namespace tessera::engine {

struct model_units {
  /// a: units per prompt token (prefill).
  double per_input_token = 1.0;
  /// b: units per generated token (decode).
  double per_output_token = 1.0;
  /// c: units per request (fixed overhead).
  double per_request = 0.0;
  /// d: units per generated token per token of context (the KV its decode
  /// step reads). 0 in serving configs written before it existed.
  double per_context_token = 0.0;

  /// What admission charges: a * input + c.
  [[nodiscard]] double admission(int64_t input_tokens) const {
    return per_input_token * static_cast<double>(input_tokens) + per_request;
  }
  /// Generating `tokens` tokens, the first of them after `context` tokens
  /// (the next after context + 1, ...): b * tokens + d * (context * tokens
  /// + tokens * (tokens - 1) / 2). 0 for tokens <= 0; a negative context
  /// counts as 0.
  [[nodiscard]] double decode(int64_t context, int64_t tokens) const {
    if (tokens <= 0)
      return 0;
    const auto n = static_cast<double>(tokens);
    const auto ctx = static_cast<double>(context < 0 ? 0 : context);
    return per_output_token * n + per_context_token * (ctx * n + n * (n - 1) / 2);
  }
  /// A whole request's cost: admission(in) + decode(in, out).
  [[nodiscard]] double cost(int64_t input_tokens, int64_t output_tokens) const {
    return admission(input_tokens) + decode(input_tokens, output_tokens);
  }
};

/// The serving config's file in a model folder: a JSON object with one
/// entry per engine key ("cpu", "sim-h100", ...), each
/// {"a", "b", "c", "d", "fitted_at", "rms_error"} ("d" optional: absent
/// reads as 0, so configs written before it still load); other top-level keys are
/// kept as they are when an entry is written.
inline constexpr const char* serving_config_file = "tessera_serving.json";

/// Fitted units with when and how well they were fitted.
struct fitted_units {
  model_units units;
  /// UTC time of the fit, ISO 8601 ("2026-12-01T20:00:00Z").
  std::string fitted_at;
  /// The fit's relative RMS error over its grid (0.05: 5 %).
  double rms_error = 0;
};

/// The key of an engine in the serving config: "cpu", or "sim-" + the
/// sim's GPU preset ("sim-h100"). Units differ per device.
[[nodiscard]] std::string units_engine_key(std::string_view backend_kind, std::string_view sim_gpu);

/// The units fitted for `engine_key` in `model_dir`'s serving config;
/// nullopt when the file or the key's entry is absent. Errors (bad_config,
/// naming the file and the field): not a JSON object, an entry whose a, b
/// or c is missing, whose a, b, c or d is not a number, negative or not
/// finite, or a, b, c and d all 0; the file over 1 MiB.
[[nodiscard]] caf::expected<std::optional<fitted_units>>
read_model_units(const std::string& model_dir, std::string_view engine_key);

/// Stores `u` under `engine_key` in `model_dir`'s serving config, keeping
/// the other entries; written to a temporary file then renamed over the
/// old one (a reader never sees half a file). Errors: bad_config (the
/// existing file is malformed: it is left as it is; `u` invalid as
/// read_model_units defines), device_error (cannot write).
[[nodiscard]] caf::error write_model_units(const std::string& model_dir, std::string_view engine_key,
                                           const fitted_units& u);

/// The units to serve `model_dir` with on `engine_key`: the fitted ones,
/// or the defaults (a = b = 1, c = 0, logged at info: not fitted, run
/// `tessera bench units`). Errors: a malformed serving config
/// (read_model_units).
[[nodiscard]] caf::expected<model_units> serving_units(const std::string& model_dir,
                                                       std::string_view engine_key);

/// One measured grid point: a request of `input_tokens` prompt tokens and
/// `output_tokens` generated ones cost `cost` (e.g. ms of engine time).
struct units_sample {
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  double cost = 0;
};

/// A least-squares fit of cost = model_units::cost(in, out).
struct units_fit {
  model_units units;
  /// Each sample's predicted cost, in the samples' order.
  std::vector<double> predicted;
  /// sqrt(mean(((predicted - cost) / cost)^2)) over the samples.
  double rms_relative_error = 0;
};

/// Fits a, b, c and (with `context_term`) d by non-negative least squares
/// on the samples, minimising the relative error (each sample weighted by
/// 1 / cost^2): the best least-squares fit over every subset of the
/// coefficients whose solution is >= 0 (normal equations on scaled
/// columns, Gaussian elimination with partial pivoting); the others are 0.
/// A subset the samples cannot separate is skipped (d needs 4 samples and
/// an input x output grid). Without `context_term` d is 0 (the a, b, c
/// model). Errors (bad_request): fewer than 3 samples, a sample with a
/// negative count or a cost not finite and > 0, or a grid whose input or
/// output lengths do not vary (a, b and c cannot be separated).
[[nodiscard]] caf::expected<units_fit> fit_model_units(std::span<const units_sample> samples,
                                                       bool context_term = true);

} // namespace tessera::engine
