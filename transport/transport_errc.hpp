#pragma once
/// @file
/// The transport's error codes. Every error the transport libraries return
/// is a caf::error of category "transport" with one of these codes and a
/// message naming what was wrong.

#include <cstdint>
#include <string>

#include <caf/error.hpp>
#include <caf/make_message.hpp>
#include <caf/message.hpp>

namespace tessera::transport {

/// Error codes of the transport libraries (category "transport").
enum class transport_errc : uint8_t {
  /// A frame is malformed: truncated, wrong magic, bad flags, a body that
  /// is not valid Cap'n Proto, or a header whose checksum fails.
  bad_frame = 1,
  /// A frame's declared body length exceeds the configured maximum.
  frame_too_large,
  /// A frame's format version is not one this build speaks.
  unsupported_version,
  /// A frame's message type is not one this build knows.
  unknown_type,
  /// A frame body's checksum does not match its bytes.
  checksum_mismatch,
  /// A frame decoded but its content is out of bounds or inconsistent
  /// (a list too long, an enum out of range, invalid sampling params).
  invalid_message,
  /// A message too large or invalid to send (the encoder's check).
  message_too_large,
  /// The peer's address could not be resolved or connected to.
  peer_unreachable,
  /// The peer failed or vanished while an operation was in flight.
  peer_failed,
  /// An operation did not complete within its deadline.
  timeout,
  /// The transport or connection was closed.
  closed,
  /// No connection to the named peer exists.
  not_connected,
  /// A listen address is already bound (by this or another transport).
  address_in_use,
  /// An operation failed because a fault-injection plan said so
  /// (transport/faults); never produced by a real network.
  injected_fault,
  /// The transport could not start: its library or device failed to
  /// initialise (the message names the call).
  unavailable,
  /// The peer has no actor of the name a message is addressed to, or the
  /// actor does not accept the message's operation.
  no_such_actor,
  /// A peer did not prove it holds the cluster secret (or broke the
  /// handshake); it was disconnected before anything else crossed.
  unauthenticated,
  /// A message or memory access the receiver did not grant: a UCX message
  /// without a known session, a KV run outside every grant, a declared
  /// length over the limits. The peer is disconnected and counted.
  not_granted,
};

/// Number of codes (for counters indexed by code); codes are 1..count-1.
inline constexpr size_t transport_errc_count =
  static_cast<size_t>(transport_errc::not_granted) + 1;

/// Returns the name of `x`, e.g. "bad_frame".
const char* to_string(transport_errc x);

/// Makes a caf::error of category "transport" carrying `what`.
[[nodiscard]] caf::error make_transport_error(transport_errc code, std::string what);

} // namespace tessera::transport

CAF_ERROR_CODE_ENUM(tessera::transport::transport_errc, "transport")
