#pragma once
/// @file
/// Model units: one currency for capacity. A request's cost is
///
///   units = a * input_tokens + b * output_tokens + c
///
/// with a, b, c fitted per model and engine from measured step times
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

  /// What admission charges: a * input + c.
  [[nodiscard]] double admission(int64_t input_tokens) const {
    return per_input_token * static_cast<double>(input_tokens) + per_request;
  }
  /// A whole request's cost.
  [[nodiscard]] double cost(int64_t input_tokens, int64_t output_tokens) const {
    return admission(input_tokens) + per_output_token * static_cast<double>(output_tokens);
  }
};

/// The serving config's file in a model folder: a JSON object with one
/// entry per engine key ("cpu", "sim-h100", ...), each
/// {"a", "b", "c", "fitted_at", "rms_error"}; other top-level keys are
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
/// or c is missing, not a number, negative or not finite, or a, b and c
/// all 0; the file over 1 MiB.
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

/// A least-squares fit of cost = a * in + b * out + c.
struct units_fit {
  model_units units;
  /// Each sample's predicted cost, in the samples' order.
  std::vector<double> predicted;
  /// sqrt(mean(((predicted - cost) / cost)^2)) over the samples.
  double rms_relative_error = 0;
};

/// Fits a, b, c by ordinary least squares on the samples (normal
/// equations, solved by Gaussian elimination with partial pivoting).
/// Coefficients that come out negative (noise around a term worth ~0) are
/// clamped to 0 and the others refitted without them. Errors (bad_request):
/// fewer than 3 samples, a sample with a negative count or a cost not
/// finite and > 0, or a grid whose input or output lengths do not vary
/// (a singular system).
[[nodiscard]] caf::expected<units_fit> fit_model_units(std::span<const units_sample> samples);

} // namespace tessera::engine
