#pragma once
/// @file
/// Tessera's CAF atoms and the message types actors exchange. Every actor
/// kind includes this header; atoms are added here, one line each.
///
/// The wire message structs (transport/wire/messages.hpp) and the transport
/// structs travel in CAF messages inside a process only: between processes
/// the bridge encodes them with the wire codec (Cap'n Proto), never with
/// CAF's serializer, so they are allowed as "unsafe" (not inspectable)
/// message types.

#include <caf/all.hpp>

#include "transport/transport.hpp"
#include "transport/wire/messages.hpp"

CAF_BEGIN_TYPE_ID_BLOCK(tessera, caf::first_custom_type_id)
  // bridge (actors/bridge)
  CAF_ADD_ATOM(tessera, tessera::actors, connect_atom, "connect")
  CAF_ADD_ATOM(tessera, tessera::actors, publish_atom, "publish")
  CAF_ADD_ATOM(tessera, tessera::actors, forward_atom, "forward")
  CAF_ADD_ATOM(tessera, tessera::actors, transfer_atom, "transfer")
  CAF_ADD_ATOM(tessera, tessera::actors, peers_atom, "peers")
  CAF_ADD_ATOM(tessera, tessera::actors, inbound_atom, "inbound")
  CAF_ADD_ATOM(tessera, tessera::actors, peer_up_atom, "peer_up")
  CAF_ADD_ATOM(tessera, tessera::actors, peer_down_atom, "peer_down")
  CAF_ADD_ATOM(tessera, tessera::actors, arrived_atom, "arrived")
  CAF_ADD_ATOM(tessera, tessera::actors, completed_atom, "completed")
  CAF_ADD_ATOM(tessera, tessera::actors, connected_atom, "connected")
  CAF_ADD_ATOM(tessera, tessera::actors, expire_atom, "expire")
  CAF_ADD_ATOM(tessera, tessera::actors, revoke_atom, "revoke")
  CAF_ADD_ATOM(tessera, tessera::actors, drain_atom, "drain")
  CAF_ADD_ATOM(tessera, tessera::actors, watch_atom, "watch")
  CAF_ADD_ATOM(tessera, tessera::actors, node_down_atom, "node_down")
  CAF_ADD_ATOM(tessera, tessera::actors, disconnect_atom, "disconnect")
  CAF_ADD_ATOM(tessera, tessera::actors, forget_atom, "forget")
  // KV hand-off (actors/common/kv_handoff.hpp)
  CAF_ADD_ATOM(tessera, tessera::actors, handoff_atom, "handoff")
  CAF_ADD_ATOM(tessera, tessera::actors, commit_atom, "commit")
  // workers (actors/worker) and token sinks (actors/common/token_sink.hpp)
  CAF_ADD_ATOM(tessera, tessera::actors, generate_atom, "generate")
  CAF_ADD_ATOM(tessera, tessera::actors, cancel_atom, "cancel")
  CAF_ADD_ATOM(tessera, tessera::actors, token_atom, "token")
  CAF_ADD_ATOM(tessera, tessera::actors, failed_atom, "failed")
  CAF_ADD_ATOM(tessera, tessera::actors, step_atom, "step")
  CAF_ADD_ATOM(tessera, tessera::actors, load_atom, "load")
  CAF_ADD_ATOM(tessera, tessera::actors, fault_atom, "fault")
  // kv stores (actors/kvstore)
  CAF_ADD_ATOM(tessera, tessera::actors, fetch_atom, "fetch")
  CAF_ADD_ATOM(tessera, tessera::actors, offer_atom, "offer")
  // node (actors/node): the worker supervisor
  CAF_ADD_ATOM(tessera, tessera::actors, start_atom, "start")
  CAF_ADD_ATOM(tessera, tessera::actors, stop_atom, "stop")
  // router (actors/router)
  CAF_ADD_ATOM(tessera, tessera::actors, kv_events_atom, "kv_events")
  CAF_ADD_ATOM(tessera, tessera::actors, heartbeat_atom, "heartbeat")
  CAF_ADD_ATOM(tessera, tessera::actors, route_atom, "route")
  CAF_ADD_ATOM(tessera, tessera::actors, join_atom, "join")
  CAF_ADD_ATOM(tessera, tessera::actors, prefilled_atom, "prefilled")
  CAF_ADD_ATOM(tessera, tessera::actors, finished_atom, "finished")
  CAF_ADD_ATOM(tessera, tessera::actors, workers_atom, "workers")
  // frontend (actors/frontend)
  CAF_ADD_ATOM(tessera, tessera::actors, http_atom, "http")
  CAF_ADD_ATOM(tessera, tessera::actors, closed_atom, "closed")
  CAF_ADD_ATOM(tessera, tessera::actors, status_atom, "status")
CAF_END_TYPE_ID_BLOCK(tessera)

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tessera::transport::wire::request_handoff)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tessera::transport::wire::token_chunk)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tessera::transport::wire::kv_transfer_batch)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tessera::transport::wire::kv_event)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tessera::transport::wire::membership)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tessera::transport::wire::heartbeat)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tessera::transport::wire::wire_error)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tessera::transport::wire::kv_grant)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tessera::transport::wire::envelope)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tessera::transport::wire::request_cancel)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tessera::transport::wire::worker_join)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tessera::transport::wire::kv_fetch_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tessera::transport::wire::kv_fetch_reply)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tessera::transport::wire::request_status)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tessera::transport::wire::request_status_reply)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tessera::transport::transfer_batch)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<std::byte>)
