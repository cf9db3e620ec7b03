#include "transport/wire/frame.hpp"

#include <cstdio>
#include <string>

#include <xxhash.h>

#include "transport/transport_errc.hpp"
#include "transport/wire/messages.hpp"

namespace tessera::transport::wire {

namespace {

// Explicit byte order so the header reads the same on any host.
void put16(std::byte* p, uint16_t v) {
  p[0] = std::byte(v & 0xff);
  p[1] = std::byte(v >> 8);
}

void put32(std::byte* p, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    p[i] = std::byte((v >> (8 * i)) & 0xff);
}

uint16_t get16(const std::byte* p) {
  return static_cast<uint16_t>(std::to_integer<uint16_t>(p[0]) |
                               (std::to_integer<uint16_t>(p[1]) << 8));
}

uint32_t get32(const std::byte* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i)
    v |= std::to_integer<uint32_t>(p[i]) << (8 * i);
  return v;
}

std::string hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%08x", v);
  return buf;
}

caf::error fail(transport_errc code, std::string what) {
  return make_transport_error(code, std::move(what));
}

} // namespace

uint32_t frame_checksum(std::span<const std::byte> bytes) {
  return XXH32(bytes.data(), bytes.size(), 0);
}

std::array<std::byte, frame_header_bytes> write_frame_header(const frame_header& h) {
  std::array<std::byte, frame_header_bytes> out{};
  put32(out.data(), frame_magic);
  put16(out.data() + 4, h.version);
  put16(out.data() + 6, h.type);
  put32(out.data() + 8, h.body_bytes);
  put32(out.data() + 12, h.flags);
  put32(out.data() + 16, h.body_xxh32);
  put32(out.data() + 20, frame_checksum(std::span{out}.first(20)));
  return out;
}

caf::expected<frame_header> parse_frame_header(std::span<const std::byte> bytes,
                                               const wire_limits& limits) {
  if (bytes.size() < frame_header_bytes)
    return fail(transport_errc::bad_frame, "truncated frame header: " + std::to_string(bytes.size()) +
                                             " of " + std::to_string(frame_header_bytes) + " bytes");
  const std::byte* p = bytes.data();
  if (auto magic = get32(p); magic != frame_magic)
    return fail(transport_errc::bad_frame,
                "bad frame magic " + hex(magic) + " (expected " + hex(frame_magic) + ")");
  // The header checksum comes before the fields it covers are trusted.
  if (auto stored = get32(p + 20), actual = frame_checksum(bytes.first(20)); stored != actual)
    return fail(transport_errc::bad_frame,
                "frame header checksum mismatch: header says " + hex(stored) + ", computed " + hex(actual));
  frame_header h;
  h.version = get16(p + 4);
  h.type = get16(p + 6);
  h.body_bytes = get32(p + 8);
  h.flags = get32(p + 12);
  h.body_xxh32 = get32(p + 16);
  if (h.version != frame_version)
    return fail(transport_errc::unsupported_version,
                "unsupported frame version " + std::to_string(h.version) + " (this build speaks " +
                  std::to_string(frame_version) + ")");
  if (h.type == 0 || h.type > max_message_type)
    return fail(transport_errc::unknown_type, "unknown message type " + std::to_string(h.type));
  if (h.flags != 0)
    return fail(transport_errc::bad_frame,
                "frame flags must be 0 in version 1, got " + hex(h.flags));
  if (h.body_bytes > limits.max_body_bytes)
    return fail(transport_errc::frame_too_large,
                "frame body length " + std::to_string(h.body_bytes) + " exceeds the maximum " +
                  std::to_string(limits.max_body_bytes));
  if (h.body_bytes == 0 || h.body_bytes % 8 != 0)
    return fail(transport_errc::bad_frame, "frame body length " + std::to_string(h.body_bytes) +
                                             " is not a positive multiple of 8");
  return h;
}

} // namespace tessera::transport::wire
