#pragma once
/// @file
/// The native client SDK's door into the frontend (sdk/, protocol/client.hpp).
/// A client program on its own node (authenticated by the cluster secret,
/// named by its hello) tells the frontend submit(client_submit); the request
/// runs exactly as an HTTP completion does (the same prompt preparation,
/// API key, tenant limits and priority, routing, migration: frontend.cpp's
/// open_job), and the frontend tells the client's node, actor
/// `sdk_client_name`: accepted(client_accepted) or failed(client_failed),
/// then token(token_chunk)... with the client's request id, the last with a
/// finish reason, or failed(client_failed) if it fails later. A cancel, or
/// the client's node going down (bridge node_down), frees the request on its
/// workers. The client's node is the one its bridge connection proved, never
/// what the message says (the bridge overwrites client_submit::client).

#include <string>

#include <caf/all.hpp>

#include "actors/actor_types.hpp"

namespace tessera::actors {

/// What the frontend accepts from SDK clients (published with the frontend).
using sdk_gateway_actor = caf::typed_actor<
  caf::reacts_to<submit_atom, protocol::client_submit>,
  caf::reacts_to<cancel_atom, protocol::client_cancel>,
  /// Models served and whether a complete serving path is healthy.
  caf::replies_to<info_atom>::with<protocol::cluster_info>>;

/// What a client's node receives (the SDK speaks it without CAF).
using sdk_client_actor = caf::typed_actor<caf::reacts_to<accepted_atom, protocol::client_accepted>,
                                          caf::reacts_to<token_atom, transport::wire::token_chunk>,
                                          caf::reacts_to<failed_atom, protocol::client_failed>>;

/// The actor name the frontend sends a client's replies and tokens to.
inline constexpr const char* sdk_client_name = "sdk";

} // namespace tessera::actors
