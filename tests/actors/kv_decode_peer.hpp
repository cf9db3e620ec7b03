#pragma once
// The interface of the decode side in the cross-process KV hand-off test
// (kv_decode_peer.cpp runs it in its own process; the test is the prefill
// side). A stand-in for the decode worker of the serving layer, built from
// the same hand-off steps (actors/common/kv_handoff.hpp).

#include <caf/all.hpp>

#include "actors/actor_types.hpp"

namespace tessera::actors::test {

/// The peer's decode actor, published as "decode" on node "decode".
using kv_decode_actor = caf::typed_actor<
  /// Reserves blocks for the hand-off and says where they go.
  caf::replies_to<handoff_atom, transport::wire::request_handoff>::with<transport::wire::kv_grant>,
  /// The puts completed: verifies and commits, decodes to the end, and
  /// replies with every token generated here (and their logprobs).
  caf::replies_to<commit_atom, transport::wire::kv_transfer_batch>::with<transport::wire::token_chunk>>;

} // namespace tessera::actors::test
