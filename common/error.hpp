#pragma once
/// @file
/// Helpers around caf::error, the error value every Tessera library returns.
/// Each folder defines its own error enum (engine_errc, ...) registered with
/// CAF_ERROR_CODE_ENUM; the context of such an error is one string that says
/// what went wrong, naming the file, field or value at fault.

#include <string>

#include <caf/error.hpp>
#include <caf/expected.hpp>

namespace tessera {

/// Returns the human-readable text of `err`: its category and the message it
/// carries, e.g. "engine: /m/config.json: missing field 'hidden_size'".
/// Returns "none" for a default-constructed (no) error.
[[nodiscard]] std::string error_text(const caf::error& err);

/// Returns only the message string an error carries (empty if none).
[[nodiscard]] std::string error_message(const caf::error& err);

} // namespace tessera
