#include "bench/completion_stream.hpp"

#include <algorithm>

namespace tessera::bench {

void completion_stream::on_body(std::string_view bytes, double t_s, request_sample& s) {
  if (status_ != 200) {
    if (error_body_.size() < max_error_body)
      error_body_.append(bytes.substr(0, max_error_body - error_body_.size()));
    return;
  }
  for (const auto& data : parser_.feed(bytes)) {
    auto e = parse_completion_event(data);
    switch (e.kind) {
      case completion_event_kind::text:
        s.add_text_chunk(t_s);
        break;
      case completion_event_kind::usage:
        usage_ = std::move(e);
        break;
      case completion_event_kind::error:
        if (s.error.empty())
          s.error = "error event: " + e.message;
        break;
      case completion_event_kind::malformed:
        if (s.error.empty())
          s.error = "malformed event: " + e.message;
        break;
      case completion_event_kind::done:
        done_ = true;
        break;
      case completion_event_kind::empty:
        break;
    }
  }
}

void completion_stream::finish(const std::string& error, double t_s, int64_t expected_tokens,
                               request_sample& s) const {
  s.end_s = t_s;
  s.output_tokens = usage_.completion_tokens >= 0 ? usage_.completion_tokens : s.text_chunks;
  if (!s.error.empty()) {
    // an error event already said what went wrong
  } else if (!error.empty()) {
    s.error = error;
  } else if (status_ != 200) {
    auto e = parse_completion_event(error_body_);
    s.error = "HTTP " + std::to_string(status_) + ": " +
              (e.kind == completion_event_kind::error ? e.message : error_body_.substr(0, 200));
  } else if (!done_) {
    s.error = "the stream ended without [DONE]";
  } else if (s.output_tokens != expected_tokens) {
    s.error = "generated " + std::to_string(s.output_tokens) + " tokens, expected " +
              std::to_string(expected_tokens) + " (ignore_eos)";
  }
}

} // namespace tessera::bench
