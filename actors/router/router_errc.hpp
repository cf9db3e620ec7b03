#pragma once
/// @file
/// The router's error codes. Every error the router policy library returns
/// is a caf::error of category "router" with one of these codes and a
/// message naming what was wrong.

#include <cstddef>
#include <cstdint>
#include <string>

#include <caf/error.hpp>
#include <caf/make_message.hpp>
#include <caf/message.hpp>

namespace tessera::actors {

/// Error codes of the router policies (category "router").
enum class router_errc : uint8_t {
  /// No healthy worker with free capacity can decode the request (the
  /// frontend answers 503). The message counts the workers and why each
  /// was left out.
  no_healthy_worker = 1,
  /// make_router_policy was given a name it does not know; the message
  /// names the valid choices.
  unknown_policy,
  /// A route_request is inconsistent (block_tokens <= 0, more full blocks
  /// than prompt tokens, ...).
  invalid_request,
  /// router_options are out of range (negative weight, ...).
  invalid_options,
};

/// Number of codes (for counters indexed by code); codes are 1..count-1.
inline constexpr size_t router_errc_count = static_cast<size_t>(router_errc::invalid_options) + 1;

/// Returns the name of `x`, e.g. "no_healthy_worker".
const char* to_string(router_errc x);

/// Makes a caf::error of category "router" carrying `what`.
[[nodiscard]] caf::error make_router_error(router_errc code, std::string what);

} // namespace tessera::actors

CAF_ERROR_CODE_ENUM(tessera::actors::router_errc, "router")
