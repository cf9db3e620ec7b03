#pragma once
/// @file
/// What a client reads from one streamed /v1/completions answer, for the
/// chaos harness's verdict: the HTTP status, the text (every chunk's
/// choices[0].text joined), the finish reason, an error event's message,
/// and whether [DONE] came. Fed the body in whatever pieces arrive. Pure:
/// no I/O, no clocks. Not thread-safe.

#include <string>
#include <string_view>

#include "bench/sse_parser.hpp"

namespace tessera::chaos {

class stream_answer {
public:
  void on_status(int status) { status_ = status; }

  /// The next body bytes.
  void on_body(std::string_view bytes);

  [[nodiscard]] int status() const { return status_; }
  /// The text so far.
  [[nodiscard]] const std::string& text() const { return text_; }
  /// The last finish_reason seen ("" if none).
  [[nodiscard]] const std::string& finish_reason() const { return finish_; }
  /// Whether any body bytes came.
  [[nodiscard]] bool any_bytes() const { return any_bytes_; }
  /// Whether [DONE] came.
  [[nodiscard]] bool done() const { return done_; }

  /// What went wrong, from the server's side, or "": a status other than
  /// 200 (with the start of its body), an error event, an event that is
  /// not a completion chunk. `client_error` (the HTTP client's, e.g.
  /// "read: end of stream") comes after those; else a stream that ended
  /// without [DONE] is an error too.
  [[nodiscard]] std::string error(const std::string& client_error) const;

private:
  static constexpr size_t max_error_body = 300;
  bench::sse_parser parser_;
  int status_ = 0;
  std::string text_;
  std::string finish_;
  std::string error_event_;
  std::string error_body_;
  bool any_bytes_ = false;
  bool done_ = false;
};

} // namespace tessera::chaos
