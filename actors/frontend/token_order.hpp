#pragma once
/// @file
/// Puts a request's token chunks back in order. A disaggregated request's
/// first chunk comes from the prefill worker and the rest from the decode
/// worker, over different paths, so they may arrive out of order; each
/// chunk's output_tokens (cumulative) says where it belongs.

#include <cstdint>
#include <map>
#include <vector>

#include "engine/engine.hpp"

namespace tessera::actors::frontend {

/// Reorders one request's chunks. Not thread-safe.
class token_order {
public:
  /// Takes a chunk; returns the chunks now in order (none while a gap is
  /// open, several once it fills). Chunks already passed are dropped.
  std::vector<engine::request_output> accept(engine::request_output out);
  /// Tokens passed on so far.
  [[nodiscard]] int32_t received() const { return received_; }
  /// Chunks waiting for a gap to fill.
  [[nodiscard]] size_t waiting() const { return early_.size(); }
  /// Drops the chunks waiting for a gap: the request's worker failed and
  /// its stream resumes after the tokens passed on (a migration).
  void drop_waiting() { early_.clear(); }

private:
  int32_t received_ = 0;
  std::multimap<int32_t, engine::request_output> early_; // by first token index
};

} // namespace tessera::actors::frontend
