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

} // namespace tessera::engine
