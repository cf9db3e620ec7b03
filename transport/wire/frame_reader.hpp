#pragma once
/// @file
/// Reassembles frames from a byte stream delivered in arbitrary chunks (as
/// TCP delivers them) and decodes them.
///
///   feed(bytes) --> [header incomplete] --24 bytes--> header checked
///        ^                                                 |
///        |                           bad header: failed (sticky)
///        +--- next() pops a message <-- body complete <----+
///
/// A header is checked as soon as its 24 bytes are in, so a corrupted or
/// hostile length is refused before the reader waits for (or buffers) the
/// body. After any error the stream is unusable: every later call returns
/// the same error, and the caller drops the connection.

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "transport/wire/codec.hpp"

namespace tessera::transport::wire {

/// Stream reassembler for one connection. Not thread-safe. Buffers at most
/// one frame (header + limits.max_body_bytes) plus the bytes of the
/// current feed() call.
class frame_reader {
public:
  /// `peer` names the connection in rejection log lines.
  explicit frame_reader(wire_limits limits = {}, std::string peer = {});

  /// Appends `bytes` (any length, 0 included). Returns the stream's error
  /// if it has failed (now or before), else none.
  [[nodiscard]] caf::error feed(std::span<const std::byte> bytes);

  /// Pops the next message: a message, nullopt when more bytes are needed,
  /// or the stream's (sticky) error.
  [[nodiscard]] caf::expected<std::optional<wire_message>> next();

  /// True once an error has been reported.
  [[nodiscard]] bool failed() const { return static_cast<bool>(error_); }

  /// Bytes received but not yet returned as messages.
  [[nodiscard]] size_t buffered_bytes() const { return buf_.size() - pos_; }

  [[nodiscard]] const decode_counters& counters() const { return decoder_.counters(); }

private:
  /// Checks the header at pos_ if complete and not yet checked.
  void check_header();
  void fail(caf::error err);

  frame_decoder decoder_;
  std::string peer_;
  std::vector<std::byte> buf_;
  /// Start of the first unconsumed frame in buf_.
  size_t pos_ = 0;
  /// Frame length (header + body) of the frame at pos_, once its header
  /// has been checked; 0 before.
  size_t frame_bytes_ = 0;
  caf::error error_;
};

} // namespace tessera::transport::wire
