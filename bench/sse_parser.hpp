#pragma once
/// @file
/// The client side of a streamed OpenAI completion: an incremental parser of
/// a `text/event-stream` body (fed in whatever pieces the socket delivers)
/// and the classification of one event's data as the load generator needs
/// it (new text, usage, error, [DONE]). Pure functions: no I/O, no clocks.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::bench {

/// Splits a server-sent-events body into the data of its events
/// (WHATWG HTML, "Interpreting an event stream"): lines end in "\n", "\r\n"
/// or "\r" (also when a "\r\n" is split between two pieces); `data:` lines
/// (one optional space after the colon) are joined with "\n"; a blank line
/// ends an event; comments (":...") and other fields are skipped; an event
/// without data lines is not reported. Not thread-safe.
class sse_parser {
public:
  /// Feeds the next bytes of the body; returns the data of every event they
  /// complete, in order (often none, sometimes several).
  [[nodiscard]] std::vector<std::string> feed(std::string_view bytes);

  /// Bytes held in an incomplete line or event (bounded only by the
  /// server; the load generator reports a stream that never ends an event).
  [[nodiscard]] size_t pending_bytes() const { return line_.size() + data_.size(); }

private:
  void end_line(std::vector<std::string>& out);

  std::string line_;
  std::string data_;
  bool has_data_ = false;
  bool after_cr_ = false; // the previous piece ended in '\r'
};

/// What one event of a streamed /v1/completions (or chat) answer says.
enum class completion_event_kind : uint8_t {
  /// A chunk whose first choice carries new text (choices[0].text, or for
  /// chat choices[0].delta.content), non-empty.
  text,
  /// A chunk without new text: only a finish_reason, a role, or nothing.
  empty,
  /// The usage chunk (stream_options.include_usage): `usage` set, no text.
  usage,
  /// An error event ({"error": {...}}).
  error,
  /// `[DONE]`, the end of the stream.
  done,
  /// Not JSON, or JSON of an unexpected shape.
  malformed,
};

/// One classified event.
struct completion_event {
  completion_event_kind kind = completion_event_kind::malformed;
  /// kind text: bytes of new text.
  size_t text_bytes = 0;
  /// kind usage: usage.completion_tokens (-1 if absent).
  int64_t completion_tokens = -1;
  /// kind usage: usage.prompt_tokens (-1 if absent).
  int64_t prompt_tokens = -1;
  /// kind usage: usage.prompt_tokens_details.cached_tokens, the prompt
  /// tokens served from the prefix cache (-1 if absent).
  int64_t cached_tokens = -1;
  /// The first choice's finish_reason, if the chunk carries one (any kind).
  std::string finish_reason;
  /// kind error: error.message; kind malformed: what was wrong.
  std::string message;
};

/// Classifies the data of one event. Never throws.
[[nodiscard]] completion_event parse_completion_event(std::string_view data);

} // namespace tessera::bench
