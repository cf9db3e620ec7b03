#pragma once
/// @file
/// Semantic checks of a wire message: every list and string within
/// wire_limits, counts consistent, floats finite where they must be,
/// sampling params per protocol::sampling_params::validate(). The encoder
/// runs them before sending and the decoder after decoding, so a peer never
/// sees (and never trusts) a message that fails them.

#include <caf/error.hpp>

#include "transport/wire/limits.hpp"
#include "transport/wire/messages.hpp"

namespace tessera::transport::wire {

/// Checks `m`; the error (transport_errc::invalid_message) names the
/// message kind, the field and the bound, e.g.
/// "request_handoff: params: top_p must be in (0, 1], got 2".
[[nodiscard]] caf::error validate(const wire_message& m, const wire_limits& limits = {});

} // namespace tessera::transport::wire
