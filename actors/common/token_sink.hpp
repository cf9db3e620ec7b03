#pragma once
/// @file
/// What receives a request's tokens: the actor named by a hand-off's
/// reply_to (the frontend). Workers send to it through the bridge, so it
/// may live on any node.

#include <caf/all.hpp>

#include "actors/actor_types.hpp"

namespace tessera::actors {

/// A receiver of token streams.
using token_sink_actor = caf::typed_actor<
  /// Tokens of request chunk.id. Chunks of one request arrive in order from
  /// one worker; after a disaggregated hand-off they come from another
  /// worker, so order them by output_tokens (cumulative).
  caf::reacts_to<token_atom, transport::wire::token_chunk>,
  /// Request c.request_id failed (c.reason says why); no more chunks come.
  caf::reacts_to<failed_atom, transport::wire::request_cancel>>;

} // namespace tessera::actors
