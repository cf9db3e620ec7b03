// libFuzzer target for the frame decoder and the stream reassembler.
//
// Input layout (first byte selects the mode):
//   even: the rest is raw stream bytes: decode() on all of it, then
//         frame_reader fed in chunks of (first byte / 2 % 64 + 1) bytes.
//   odd:  byte 1 is a message type, the rest a capnp body (zero-padded to
//         a multiple of 8); the harness wraps it in a frame with correct
//         checksums, so mutations reach the capnp decoder and validation
//         instead of dying at the checksum.
// Any decoded message must validate, re-encode and decode again; anything
// else (a crash, a sanitizer report, an abort below) is a finding.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include <spdlog/spdlog.h>

#include "transport/wire/codec.hpp"
#include "transport/wire/frame.hpp"
#include "transport/wire/frame_reader.hpp"
#include "transport/wire/validate.hpp"

namespace w = tessera::transport::wire;

namespace {

void check_accepted(const w::wire_message& m) {
  if (w::validate(m))
    std::abort();  // decode returned a message that fails validation
  auto again = w::encode(m);
  if (!again)
    std::abort();  // a decoded message must re-encode
  if (!w::decode(*again))
    std::abort();  // and what we encode must decode
}

void decode_one(std::span<const std::byte> frame) {
  if (auto m = w::decode(frame))
    check_accepted(*m);
}

void run_stream(std::span<const std::byte> stream, size_t chunk) {
  w::frame_reader reader;
  for (size_t pos = 0; pos < stream.size(); pos += chunk) {
    if (reader.feed(stream.subspan(pos, std::min(chunk, stream.size() - pos))))
      return;
    for (;;) {
      auto m = reader.next();
      if (!m || !*m)
        break;
      check_accepted(**m);
    }
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = [] {
    spdlog::set_level(spdlog::level::off);
    return true;
  }();
  (void)quiet;
  if (size < 2)
    return 0;
  const auto* bytes = reinterpret_cast<const std::byte*>(data);
  if ((data[0] & 1) == 0) {
    auto stream = std::span<const std::byte>(bytes + 1, size - 1);
    decode_one(stream);
    run_stream(stream, static_cast<size_t>(data[0] / 2 % 64) + 1);
    return 0;
  }
  const size_t body_len = (size - 2 + 7) / 8 * 8;
  if (body_len == 0)
    return 0;
  std::vector<std::byte> frame(w::frame_header_bytes + body_len);
  std::memcpy(frame.data() + w::frame_header_bytes, bytes + 2, size - 2);
  w::frame_header h;
  h.type = data[1];
  h.body_bytes = static_cast<uint32_t>(body_len);
  h.body_xxh32 = w::frame_checksum(std::span{frame}.subspan(w::frame_header_bytes));
  auto head = w::write_frame_header(h);
  std::memcpy(frame.data(), head.data(), head.size());
  decode_one(frame);
  return 0;
}
