#pragma once
/// @file
/// The error every function of the OpenAI API layer returns instead of
/// throwing: an HTTP status plus the four fields of OpenAI's error body
/// (`{"error": {"message", "type", "param", "code"}}`, built by
/// openai_response.hpp's error_body). A value type: the layer never throws.

#include <string>
#include <string_view>
#include <variant>

namespace tessera::actors::frontend {

/// An API error: what the client sees, and with which HTTP status.
struct api_error {
  /// HTTP status. Default: 400.
  int status = 400;
  /// OpenAI's error "type". Default: "invalid_request_error".
  std::string type = "invalid_request_error";
  /// What went wrong, naming the field and the value at fault.
  std::string message;
  /// The request field at fault ("max_tokens", "messages[2].content"), or
  /// empty (JSON null).
  std::string param;
  /// A machine-readable code ("model_not_found"), or empty (JSON null).
  std::string code;
};

/// A value of type T, or the api_error that stopped it. Use
/// std::get_if<T>(&r) / std::get_if<api_error>(&r).
template <class T>
using api_result = std::variant<T, api_error>;

/// Bytes of the client's input an error message quotes at most: a 3 MB
/// field must not come back as a 3 MB error (nor fill a log line).
inline constexpr size_t max_quoted_bytes = 200;

/// `text` as an error message quotes it: whole when it has at most
/// `max_bytes` bytes, else its first `max_bytes` bytes (cut back to a
/// UTF-8 character boundary) followed by "... (N bytes)".
[[nodiscard]] std::string quote_input(std::string_view text, size_t max_bytes = max_quoted_bytes);

/// 400 invalid_request_error naming `param`.
[[nodiscard]] api_error bad_request(std::string message, std::string param = {});

/// 413: a request body of `body_bytes` is over `limit_bytes`. For callers
/// that see the Content-Length before reading the body.
[[nodiscard]] api_error body_too_large(size_t body_bytes, size_t limit_bytes);

/// 404 "The model `m` does not exist." (code "model_not_found"), as OpenAI
/// answers a request for a model the server does not serve.
[[nodiscard]] api_error unknown_model(std::string_view model);

/// 429 (type "rate_limit_exceeded", code "queue_full"): the request queue
/// is full; the client should retry later.
[[nodiscard]] api_error queue_full(std::string_view detail = {});

/// 503 (type "service_unavailable", code "no_worker"): no worker can serve
/// the request now.
[[nodiscard]] api_error no_worker(std::string_view detail = {});

/// 503 service_unavailable, code "shutting_down": the server is stopping
/// (a graceful stop's drain); `detail` says what happened to this request.
[[nodiscard]] api_error shutting_down(std::string_view detail);

/// 500 (type "internal_error"): a failure that is not the client's.
[[nodiscard]] api_error internal_error(std::string message);

} // namespace tessera::actors::frontend
