#include "transport/wire/messages.hpp"

#include <caf/atom.hpp>
#include <caf/make_message.hpp>

#include "common/error.hpp"

namespace tessera::transport::wire {

std::string_view to_string(message_type t) {
  switch (t) {
    case message_type::request_handoff: return "request_handoff";
    case message_type::token_chunk: return "token_chunk";
    case message_type::kv_transfer_batch: return "kv_transfer_batch";
    case message_type::kv_event: return "kv_event";
    case message_type::membership: return "membership";
    case message_type::heartbeat: return "heartbeat";
    case message_type::error: return "error";
    case message_type::kv_grant: return "kv_grant";
    case message_type::envelope: return "envelope";
    case message_type::request_cancel: return "request_cancel";
    case message_type::worker_join: return "worker_join";
    case message_type::kv_fetch_request: return "kv_fetch_request";
    case message_type::kv_fetch_reply: return "kv_fetch_reply";
    case message_type::request_status: return "request_status";
    case message_type::request_status_reply: return "request_status_reply";
    case message_type::route_call: return "route_call";
    case message_type::route_reply: return "route_reply";
    case message_type::worker_views: return "worker_views";
    case message_type::client_submit: return "client_submit";
    case message_type::client_accepted: return "client_accepted";
    case message_type::client_cancel: return "client_cancel";
    case message_type::cluster_info: return "cluster_info";
    case message_type::client_failed: return "client_failed";
  }
  return "unknown";
}

message_type type_of(const wire_message& m) {
  // The variant's alternatives are in message_type order, starting at 1.
  return static_cast<message_type>(m.index() + 1);
}

wire_error to_wire_error(const caf::error& err) {
  wire_error out;
  if (!err)
    return out;
  out.category = caf::to_string(err.category());
  out.code = err.code();
  out.message = error_message(err);
  return out;
}

caf::error from_wire_error(const wire_error& e) {
  return caf::error(e.code, caf::atom_from_string(e.category), caf::make_message(e.message));
}

} // namespace tessera::transport::wire
