#pragma once
/// @file
/// Whole frames: a wire_message to header + body bytes and back, with every
/// check done on the way in. A frame that fails any check is rejected with
/// an error naming the problem, never trusted.
///
///   decode: header (size, magic, header checksum, version, type, flags,
///           length <= max and <= bytes present) -> body checksum ->
///           capnp decode (bounded traversal, lists bounded before copying,
///           enums in range) -> validate() (bounds, consistency, sampling
///           params)

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "common/log_limiter.hpp"
#include "transport/transport_errc.hpp"
#include "transport/wire/limits.hpp"
#include "transport/wire/messages.hpp"

namespace tessera::transport::wire {

/// Validates `m` and appends its frame (header + body) to `out`; `out` is
/// unchanged on error. Errors: invalid_message (validate()),
/// message_too_large (body over limits.max_body_bytes).
[[nodiscard]] caf::error encode_into(const wire_message& m, std::vector<std::byte>& out,
                                     const wire_limits& limits = {});

/// Validates `m` and returns its frame (header + body).
[[nodiscard]] caf::expected<std::vector<std::byte>> encode(const wire_message& m,
                                                           const wire_limits& limits = {});

/// Decodes exactly one frame: `frame` must hold the header and body and
/// nothing else (trailing bytes are an error). Any alignment. Errors
/// (transport_errc): bad_frame, frame_too_large, unsupported_version,
/// unknown_type, checksum_mismatch, invalid_message; the message names
/// what failed. Counts and logs nothing; frame_decoder does.
[[nodiscard]] caf::expected<wire_message> decode(std::span<const std::byte> frame,
                                                 const wire_limits& limits = {});

/// Frames decoded and rejected by one frame_decoder.
struct decode_counters {
  uint64_t frames_decoded = 0;
  uint64_t bytes_decoded = 0;
  uint64_t frames_rejected = 0;
  /// Rejections by transport_errc code (index = code value).
  std::array<uint64_t, transport_errc_count> rejected_by_reason{};

  /// Rejections with `code`.
  [[nodiscard]] uint64_t rejected(transport_errc code) const {
    return rejected_by_reason[static_cast<size_t>(code)];
  }
};

/// The log limiter frame_decoders share unless given their own: the first
/// 10 rejection lines of the process, then one per 10 s (log_limiter.hpp).
/// Shared because a peer that reconnects gets a new frame_reader, and so a
/// new decoder, each time.
[[nodiscard]] std::shared_ptr<log_limiter> shared_reject_log_limiter();

/// decode() plus counters and a warn-level log line per rejected frame, as
/// far as its log_limiter allows: a flood of bad frames is counted exactly
/// but logged in a few lines, each later one saying how many it left out.
/// Not thread-safe: one per connection (or per reading thread); the
/// limiter may be shared.
class frame_decoder {
public:
  /// Logs rejections through shared_reject_log_limiter().
  explicit frame_decoder(wire_limits limits = {});
  /// Logs rejections through `log` (not null).
  frame_decoder(wire_limits limits, std::shared_ptr<log_limiter> log);

  /// As decode(), counting the outcome; a rejection is logged (spdlog,
  /// warn, rate-limited) with `peer` (may be empty) and the error text.
  [[nodiscard]] caf::expected<wire_message> decode(std::span<const std::byte> frame,
                                                   std::string_view peer = {});

  /// Counts a rejection found outside decode() (e.g. by frame_reader's
  /// header check) and logs it like decode() does.
  void reject(const caf::error& err, std::string_view peer = {});

  [[nodiscard]] const decode_counters& counters() const { return counters_; }
  [[nodiscard]] const wire_limits& limits() const { return limits_; }

private:
  wire_limits limits_;
  decode_counters counters_;
  std::shared_ptr<log_limiter> log_;
};

} // namespace tessera::transport::wire
