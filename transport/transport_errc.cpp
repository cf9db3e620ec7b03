#include "transport/transport_errc.hpp"

#include <caf/message.hpp>

namespace tessera::transport {

const char* to_string(transport_errc x) {
  switch (x) {
    case transport_errc::bad_frame: return "bad_frame";
    case transport_errc::frame_too_large: return "frame_too_large";
    case transport_errc::unsupported_version: return "unsupported_version";
    case transport_errc::unknown_type: return "unknown_type";
    case transport_errc::checksum_mismatch: return "checksum_mismatch";
    case transport_errc::invalid_message: return "invalid_message";
    case transport_errc::message_too_large: return "message_too_large";
    case transport_errc::peer_unreachable: return "peer_unreachable";
    case transport_errc::peer_failed: return "peer_failed";
    case transport_errc::timeout: return "timeout";
    case transport_errc::closed: return "closed";
    case transport_errc::not_connected: return "not_connected";
    case transport_errc::address_in_use: return "address_in_use";
    case transport_errc::injected_fault: return "injected_fault";
    case transport_errc::unavailable: return "unavailable";
    case transport_errc::no_such_actor: return "no_such_actor";
    case transport_errc::unauthenticated: return "unauthenticated";
    case transport_errc::not_granted: return "not_granted";
  }
  return "unknown";
}

caf::error make_transport_error(transport_errc code, std::string what) {
  return caf::error{code, std::move(what)};
}

} // namespace tessera::transport
