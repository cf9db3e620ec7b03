#pragma once
/// @file
/// A frame around a raw capnp message, with a correct header and checksum,
/// so a test reaches the decoder's capnp and semantic checks with a body
/// no encoder would write.

#include <cstddef>
#include <cstring>
#include <vector>

#include <capnp/message.h>
#include <capnp/serialize.h>

#include "transport/wire/frame.hpp"

namespace tessera::transport::wire::test {

inline std::vector<std::byte> frame_of(message_type type, capnp::MessageBuilder& mb) {
  auto words = capnp::messageToFlatArray(mb);
  auto body = words.asBytes();
  frame_header h;
  h.type = static_cast<uint16_t>(type);
  h.body_bytes = static_cast<uint32_t>(body.size());
  h.body_xxh32 = frame_checksum({reinterpret_cast<const std::byte*>(body.begin()), body.size()});
  auto head = write_frame_header(h);
  std::vector<std::byte> out(head.size() + body.size());
  std::memcpy(out.data(), head.data(), head.size());
  std::memcpy(out.data() + head.size(), body.begin(), body.size());
  return out;
}

} // namespace tessera::transport::wire::test
