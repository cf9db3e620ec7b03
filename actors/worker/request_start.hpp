#pragma once
/// @file
/// How a generate request enters a worker's engine (plain functions):
/// whole, as the prefill of a disaggregated request (its first token only,
/// its KV held for the hand-off to request_handoff::decode_at), or as the
/// continuation of a stream a failed worker began (mid-stream migration:
/// request_handoff::resume_output).
///
///   migration: the worker that failed sent output o_1..o_k; this worker
///   imports prompt + o (no KV: the engine computes it, its prefix cache
///   serving what it holds) and samples position k with the request's
///   seed, as the first run would have, so the stream goes on with no token
///   repeated or skipped.

#include <cstdint>
#include <vector>

#include <caf/error.hpp>

#include "engine/engine.hpp"
#include "engine/model_units.hpp"
#include "transport/wire/messages.hpp"

namespace tessera::actors {

/// What enters the engine for hand-off `h`.
struct request_start {
  /// The request as the engine runs it: h.request, or its prefill-only form
  /// (max_tokens 1, keep_kv, continues_elsewhere).
  engine::request request;
  /// Whether this worker only prefills (h.decode_at set and more than one
  /// token wanted).
  bool prefill_only = false;
  /// Model units of its work here (worker_config::units).
  double units = 0;
  /// Tokens the engine computes before the first output here (the prompt,
  /// with a migrated stream's output so far): the first output's context.
  int64_t context = 0;
  /// Output tokens this worker generates (1 when it only prefills).
  int64_t output_left = 0;
};

/// The start of `h` on a worker whose model units are `u`.
[[nodiscard]] request_start plan_start(const transport::wire::request_handoff& h, const engine::model_units& u);

/// Adds `r` to `eng`; with `output` non-empty, as the continuation of a run
/// that already produced it (the migration above). With no seed in r's
/// params, a random one: the continuation then is not the first run's.
[[nodiscard]] caf::error start_request(engine::engine& eng, engine::request r, const std::vector<int32_t>& output);

} // namespace tessera::actors
