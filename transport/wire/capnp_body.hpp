#pragma once
/// @file
/// Conversion between wire_message and its Cap'n Proto flat-array body.
/// The only unit that includes the generated *.capnp.h headers; every
/// kj::Exception a capnp call throws is caught here and becomes a
/// caf::error. Used by codec.hpp; most callers want encode/decode there.

#include <cstddef>
#include <span>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "transport/wire/limits.hpp"
#include "transport/wire/messages.hpp"

namespace tessera::transport::wire {

/// Appends `m`'s Cap'n Proto flat-array serialisation (a multiple of 8
/// bytes) to `out`. Does not validate `m`. Errors: message_too_large when
/// capnp refuses a list or the body exceeds limits.max_body_bytes.
[[nodiscard]] caf::error encode_body(const wire_message& m, std::vector<std::byte>& out,
                                     const wire_limits& limits = {});

/// Decodes a body of kind `type`. `body` may have any alignment (it is
/// copied to an aligned buffer if it is not 8-byte aligned). Reads at most
/// about twice the body's words (capnp traversal limit) and refuses lists
/// and strings longer than `limits` before copying them. Errors:
/// bad_frame (not valid capnp, trailing bytes), invalid_message (an enum
/// out of range, a list or string too long), each naming the field.
/// Does not run validate().
[[nodiscard]] caf::expected<wire_message> decode_body(message_type type,
                                                      std::span<const std::byte> body,
                                                      const wire_limits& limits = {});

} // namespace tessera::transport::wire
