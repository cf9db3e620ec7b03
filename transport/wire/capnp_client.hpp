#pragma once
/// @file
/// Internal to transport/wire: the Cap'n Proto bodies of the native client
/// SDK's messages (protocol/client.hpp, schema/client.capnp), kept out of
/// capnp_body.cpp, which dispatches to them. Includes generated headers:
/// only capnp_*.cpp include it.

#include <caf/expected.hpp>
#include <capnp/message.h>

#include "transport/schema/request.capnp.h"
#include "transport/wire/limits.hpp"
#include "transport/wire/messages.hpp"

namespace tessera::transport::wire {

void put(capnp::MessageBuilder& mb, const client_submit& m);
void put(capnp::MessageBuilder& mb, const client_accepted& m);
void put(capnp::MessageBuilder& mb, const client_cancel& m);
void put(capnp::MessageBuilder& mb, const cluster_info& m);
void put(capnp::MessageBuilder& mb, const client_failed& m);

/// Whether `t` is one of the client messages above.
[[nodiscard]] bool is_client_message(message_type t);

/// Reads the root of a client message of kind `t`, every list and string
/// bounded before it is copied. Errors: invalid_message "<kind>: <field>
/// ...". capnp's own exceptions pass through (decode_body catches them).
[[nodiscard]] caf::expected<wire_message> read_client(message_type t, capnp::MessageReader& reader,
                                                      const wire_limits& lim);

namespace detail {
/// capnp_body.cpp's sampling-params coding, shared with the client messages.
void put_sampling_params(schema::SamplingParams::Builder b, const protocol::sampling_params& p);
/// Errors: invalid_message naming the field.
[[nodiscard]] caf::expected<protocol::sampling_params> get_sampling_params(schema::SamplingParams::Reader r);
} // namespace detail

} // namespace tessera::transport::wire
