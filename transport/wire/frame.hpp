#pragma once
/// @file
/// The frame header every wire message starts with. A frame is the 24-byte
/// header followed by a Cap'n Proto flat-array body (a multiple of 8 bytes).
/// All header fields are little-endian:
///
///   offset  size  field
///        0     4  magic        "TSRA" (bytes 54 53 52 41)
///        4     2  version      frame_version (1)
///        6     2  type         message_type
///        8     4  body_bytes   body length, a multiple of 8
///       12     4  flags        0 in version 1
///       16     4  body_xxh32   XXH32(body, seed 0)
///       20     4  header_xxh32 XXH32(bytes 0..19, seed 0)
///
/// The header checksum lets a stream reader reject a corrupted length
/// before it waits for (or allocates) a body of that length.

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include <caf/expected.hpp>

#include "transport/wire/limits.hpp"

namespace tessera::transport::wire {

/// "TSRA" read as a little-endian u32.
inline constexpr uint32_t frame_magic = 0x41525354u;
/// The only frame format version this build reads and writes.
inline constexpr uint16_t frame_version = 1;
/// Bytes of the frame header.
inline constexpr size_t frame_header_bytes = 24;

/// A parsed frame header.
struct frame_header {
  uint16_t version = frame_version;
  /// A message_type value (checked by parse_frame_header).
  uint16_t type = 0;
  uint32_t body_bytes = 0;
  uint32_t flags = 0;
  uint32_t body_xxh32 = 0;
};

/// Writes `h` (with magic and header checksum) into 24 bytes.
[[nodiscard]] std::array<std::byte, frame_header_bytes> write_frame_header(const frame_header& h);

/// Parses and checks a header: size, magic, header checksum, version, type,
/// flags, body length (<= limits.max_body_bytes, a multiple of 8). The body
/// is not looked at. Errors (transport_errc): bad_frame (truncated, magic,
/// header checksum, flags, length not a multiple of 8), unsupported_version,
/// unknown_type, frame_too_large; each message names the value at fault.
[[nodiscard]] caf::expected<frame_header> parse_frame_header(std::span<const std::byte> bytes,
                                                             const wire_limits& limits = {});

/// XXH32 (seed 0) of `bytes`, the body checksum.
[[nodiscard]] uint32_t frame_checksum(std::span<const std::byte> bytes);

} // namespace tessera::transport::wire
