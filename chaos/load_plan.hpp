#pragma once
/// @file
/// The requests of a chaos run, fixed before it starts from the scenario's
/// seed: when each is sent (Poisson arrivals at the load's rate), its
/// random token-id prompt and how it samples (greedy, or at a temperature
/// with its own seed). Each has one right answer, which the harness
/// computes with the nodes' engine (reference_engine.hpp). Pure functions.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "chaos/scenario.hpp"

namespace tessera::chaos {

/// One request of the run.
struct planned_request {
  /// Position in the schedule (0-based).
  size_t index = 0;
  /// Seconds after the load started at which it is sent; < duration_s.
  double send_s = 0;
  /// Token ids in [8, vocab).
  std::vector<int32_t> prompt;
  /// Tokens it generates (EOS ignored).
  int32_t max_tokens = 0;
  /// 0: greedy.
  float temperature = 0;
  /// Set for sampled requests (temperature > 0); greedy ones send none.
  std::optional<uint64_t> seed;
};

/// The schedule of `s` for a model whose token ids are below `vocab`
/// (> 8): send times with exponential gaps of mean 1 / rate from 0 while
/// below duration_s; prompt lengths uniform in the load's range; a share
/// seeded_fraction of them sampled at the load's temperature with a seed.
/// Same scenario and seed => same requests.
[[nodiscard]] std::vector<planned_request> plan_load(const scenario& s, int32_t vocab);

/// The streamed /v1/completions body of `r` for served model `model`
/// (prompt as token ids, ignore_eos, stream).
[[nodiscard]] std::string completion_body(const planned_request& r, const std::string& model);

} // namespace tessera::chaos
