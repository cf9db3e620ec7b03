#pragma once
/// @file
/// What a client program and the cluster's frontend say to each other over
/// the wire (the native SDK, sdk/): submit a request, hear it accepted or
/// refused, cancel it, ask what is served. Token chunks reuse the workers'
/// token_chunk (wire type 2) with the client's request id.
///
///   client --tell submit(client_submit)--> frontend
///   client <--tell accepted(client_accepted) | failed(client_failed)--
///   client <--tell token(token_chunk)... last one with finish != none--
///   client --tell cancel(client_cancel)--> frontend (frees it on workers)
///   client --request info--> frontend --reply cluster_info-->
///
/// A failed request ends with failed(client_failed) instead of a final
/// chunk. Errors carry the HTTP API's exact status, type, code and message.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/sampling_params.hpp"

namespace tessera::protocol {

/// Why a client request failed, as the HTTP API would have answered it.
enum class client_errc : uint8_t {
  /// 400 invalid_request_error: a field is wrong (the message names it).
  bad_request = 1,
  /// 401 authentication_error: no or a wrong API key.
  unauthorized,
  /// 404: the model is not served.
  not_found,
  /// 429 rate_limit_error: the tenant's rate or concurrency limit.
  rate_limited,
  /// 429 rate_limit_exceeded (code queue_full): the cluster's queues are full.
  overloaded,
  /// 503 service_unavailable: no worker can serve it now, or shutting down.
  unavailable,
  /// 500: a failure that is not the client's.
  internal,
  /// The client cancelled it (never from the server's HTTP API).
  cancelled,
  /// 413: the request is too large.
  too_long,
};

/// Largest client_errc value.
inline constexpr uint8_t max_client_errc = static_cast<uint8_t>(client_errc::too_long);

/// "bad_request", ...; "unknown" outside the enum.
[[nodiscard]] constexpr std::string_view to_string(client_errc e) {
  switch (e) {
    case client_errc::bad_request: return "bad_request";
    case client_errc::unauthorized: return "unauthorized";
    case client_errc::not_found: return "not_found";
    case client_errc::rate_limited: return "rate_limited";
    case client_errc::overloaded: return "overloaded";
    case client_errc::unavailable: return "unavailable";
    case client_errc::internal: return "internal";
    case client_errc::cancelled: return "cancelled";
    case client_errc::too_long: return "too_long";
  }
  return "unknown";
}

/// The HTTP status an error of kind `e` has in the HTTP API (cancelled: 499,
/// nginx's "client closed request").
[[nodiscard]] constexpr int http_status(client_errc e) {
  switch (e) {
    case client_errc::bad_request: return 400;
    case client_errc::unauthorized: return 401;
    case client_errc::not_found: return 404;
    case client_errc::rate_limited: return 429;
    case client_errc::overloaded: return 429;
    case client_errc::unavailable: return 503;
    case client_errc::internal: return 500;
    case client_errc::cancelled: return 499;
    case client_errc::too_long: return 413;
  }
  return 500;
}

/// The client_errc of an HTTP API error: its status, and its code where
/// one status has two meanings (429: "queue_full" is overloaded).
[[nodiscard]] constexpr client_errc errc_of_http(int status, std::string_view code) {
  switch (status) {
    case 400: return client_errc::bad_request;
    case 401: return client_errc::unauthorized;
    case 404: return client_errc::not_found;
    case 413: return client_errc::too_long;
    case 429: return code == "queue_full" ? client_errc::overloaded : client_errc::rate_limited;
    case 503: return client_errc::unavailable;
    default: return client_errc::internal;
  }
}

/// Bounds on client messages (checked on encode and decode).
inline constexpr size_t max_client_prompt_bytes = size_t{16} << 20;
inline constexpr size_t max_client_messages = 4096;
inline constexpr size_t max_client_role_bytes = 64;
inline constexpr size_t max_client_models = 256;
inline constexpr int32_t max_client_priority = 1'000'000;

/// One message of a chat conversation.
struct chat_message {
  /// "system", "user", "assistant" or "tool"; 1..max_client_role_bytes.
  std::string role;
  std::string content;
};

/// Which form a client_submit's prompt has.
enum class prompt_kind : uint8_t {
  /// prompt_ids: token ids, used as they are.
  token_ids,
  /// prompt_text: tokenized by the server (a completion).
  text,
  /// messages: the chat template applied, then tokenized (a chat completion).
  chat,
};

/// A request from a client program (the native SDK).
struct client_submit {
  /// Chosen by the client: non-zero, unique among its unfinished requests.
  uint64_t request_id = 0;
  /// The client's node id. Set by the frontend's bridge from the node the
  /// peer proved in its handshake and hello: what a client sends here is
  /// replaced. At most max_name_bytes.
  std::string client;
  /// The model; empty: the served one. At most max_name_bytes.
  std::string model;
  prompt_kind kind = prompt_kind::text;
  /// Exactly the one of these that `kind` names is non-empty; the others
  /// are empty.
  std::vector<int32_t> prompt_ids;
  std::string prompt_text;
  std::vector<chat_message> messages;
  /// Sampling, as the HTTP API's fields. params.logprobs asks for each
  /// token's log-probability and that many alternatives (0..20): the chunks
  /// then carry token_chunk::logprobs, the HTTP API's exact values.
  sampling_params params;
  /// Scheduling priority, higher first, in +-max_client_priority (capped
  /// by the tenant's as for HTTP).
  int32_t priority = 0;
  /// The tenant's bearer key when the frontend has API keys; else empty.
  std::string api_key;
  /// Chunks carry text (the server detokenizes). Default: true.
  bool detokenize = true;
};

/// The frontend took a client_submit (tokenized, admitted by the tenant's
/// limits); its tokens follow.
struct client_accepted {
  uint64_t request_id = 0;
  std::vector<int32_t> prompt_token_ids;
  /// The model that serves it.
  std::string model;
};

/// The client stops a request (it frees the request on its workers).
struct client_cancel {
  uint64_t request_id = 0;
  /// As client_submit::client: set by the frontend's bridge.
  std::string client;
};

/// A client request failed (before or after it was accepted); nothing more
/// comes for it.
struct client_failed {
  uint64_t request_id = 0;
  client_errc code = client_errc::internal;
  /// The HTTP API's status, OpenAI error type, error code ("" for none),
  /// param ("" for none) and message, exactly.
  int32_t http_status = 500;
  std::string type;
  std::string error_code;
  std::string param;
  std::string message;
};

/// What the cluster serves and whether it can serve now (models(), health()).
struct cluster_info {
  /// Served model names (1..max_client_models).
  std::vector<std::string> models;
  /// A complete serving path is healthy (as /ready's 200).
  bool ready = false;
  /// Workers the router sees as healthy, and all it knows.
  int32_t healthy_workers = 0;
  int32_t workers = 0;
  /// Longest prompt + output, in tokens.
  int32_t max_model_len = 0;
  /// The frontend is draining (a graceful stop).
  bool draining = false;
};

} // namespace tessera::protocol
