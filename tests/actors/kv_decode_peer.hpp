#pragma once
// The interface of the decode side in the cross-process KV hand-off test
// (kv_decode_peer.cpp runs it in its own process; the test is the prefill
// side). A stand-in for the decode worker of the serving layer, built from
// the same hand-off steps (actors/common/kv_handoff.hpp).

#include <caf/all.hpp>

#include "actors/actor_types.hpp"
#include "engine/block_hash.hpp"

namespace tessera::actors::test {

/// The peer's decode actor, published as "decode" on node "decode".
using kv_decode_actor = caf::typed_actor<
  /// Reserves blocks for the hand-off and says where they go.
  caf::replies_to<handoff_atom, transport::wire::request_handoff>::with<transport::wire::kv_grant>,
  /// The puts completed: verifies and commits, decodes to the end, and
  /// replies with every token generated here (and their logprobs).
  caf::replies_to<commit_atom, transport::wire::kv_transfer_batch>::with<transport::wire::token_chunk>>;

/// The block-hash key of both processes' engines: the decoding engine
/// checks an imported export's hashes with its own key, so the two must
/// share one, as the nodes of a cluster do (derived from its secret).
inline constexpr engine::kv_hash_key peer_hash_key{0x7465737365726131ull, 0x6b762d706565722dull};

} // namespace tessera::actors::test
