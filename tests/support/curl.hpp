#pragma once
/// @file
/// HTTP requests from tests through the curl program (a real client).

#include <string>
#include <vector>

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

} // namespace tessera::test
