#pragma once
/// @file
/// HTTP requests from tests through the curl program (a real client).

#include <string>
#include <vector>

#include "common/child_process.hpp"

namespace tessera::test {

/// What curl got.
struct http_reply {
  /// The HTTP status; 0 if curl failed before one arrived.
  int status = 0;
  std::string body;
};

/// Runs `curl -s <args> <url>` and returns the status and the body.
[[nodiscard]] http_reply curl(const std::vector<std::string>& args, const std::string& url);

/// GET `url`.
[[nodiscard]] http_reply http_get(const std::string& url);

/// POSTs `json` (from a temporary file, so any size works) to `url`.
[[nodiscard]] http_reply http_post_json(const std::string& url, const std::string& json);

/// curl streaming `body` to `url` (POST, JSON, plus `headers` such as
/// "Authorization: Bearer KEY"), its output piped for read_sse_events.
/// Throws std::runtime_error (a test failure) if curl cannot start.
[[nodiscard]] child_process stream_post(const std::string& url, const std::string& body,
                                        const std::vector<std::string>& headers = {});

/// The SSE data payloads `c` prints, until [DONE], the end of the stream,
/// 60 s without a line, or (stop_at_first) the first one.
[[nodiscard]] std::vector<std::string> read_sse_events(child_process& c, bool stop_at_first = false);

} // namespace tessera::test
