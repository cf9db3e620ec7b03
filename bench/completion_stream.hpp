#pragma once
/// @file
/// One streamed completion as a load generator's client reads it (`bench
/// serve`, `bench trace`): the HTTP status, the SSE events (text, usage,
/// error, [DONE]) turned into a request_sample's timing, and the verdict
/// when the exchange ends.

#include <cstdint>
#include <string>
#include <string_view>

#include "bench/load_stats.hpp"
#include "bench/sse_parser.hpp"

namespace tessera::bench {

class completion_stream {
public:
  void on_response(int status) { status_ = status; }

  /// Body bytes that arrived at `t_s`: first text, gaps between texts,
  /// text chunks and error events go into `s`. The body of a response
  /// that is not 200 is kept (2000 bytes at most) for the verdict.
  void on_body(std::string_view bytes, double t_s, request_sample& s);

  /// The exchange ended at `t_s`, with the client's `error` (empty if
  /// none): sets s.end_s, s.output_tokens (usage, else text chunks) and
  /// s.error, the first of: an error event, the client's error, a status
  /// other than 200 (with the server's message), no [DONE], or other than
  /// `expected_tokens` output tokens (ignore_eos requests).
  void finish(const std::string& error, double t_s, int64_t expected_tokens, request_sample& s) const;

  /// The usage event (kind usage), or a default event (every count -1)
  /// if the server sent none.
  [[nodiscard]] const completion_event& usage() const { return usage_; }

private:
  static constexpr size_t max_error_body = 2000;
  sse_parser parser_;
  int status_ = 0;
  std::string error_body_;
  completion_event usage_;
  bool done_ = false;
};

} // namespace tessera::bench
