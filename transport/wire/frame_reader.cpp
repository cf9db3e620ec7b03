#include "transport/wire/frame_reader.hpp"

#include "transport/wire/frame.hpp"

namespace tessera::transport::wire {

frame_reader::frame_reader(wire_limits limits, std::string peer)
  : decoder_(limits), peer_(std::move(peer)) {
}

void frame_reader::fail(caf::error err) {
  decoder_.reject(err, peer_);
  error_ = std::move(err);
  buf_.clear();
  buf_.shrink_to_fit();
  pos_ = 0;
  frame_bytes_ = 0;
}

void frame_reader::check_header() {
  if (frame_bytes_ != 0 || error_ || buffered_bytes() < frame_header_bytes)
    return;
  auto h = parse_frame_header(std::span{buf_}.subspan(pos_, frame_header_bytes), decoder_.limits());
  if (!h) {
    fail(h.error());
    return;
  }
  frame_bytes_ = frame_header_bytes + h->body_bytes;
}

caf::error frame_reader::feed(std::span<const std::byte> bytes) {
  if (error_)
    return error_;
  // Drop consumed frames before growing, so the buffer holds at most the
  // unconsumed tail plus this chunk. Frames are multiples of 8 bytes, so
  // every frame starts 8-byte aligned in buf_ and decodes without a copy.
  if (pos_ > 0 && (pos_ == buf_.size() || pos_ >= buf_.size() / 2)) {
    buf_.erase(buf_.begin(), buf_.begin() + static_cast<ptrdiff_t>(pos_));
    pos_ = 0;
  }
  buf_.insert(buf_.end(), bytes.begin(), bytes.end());
  check_header();
  return error_;
}

caf::expected<std::optional<wire_message>> frame_reader::next() {
  if (error_)
    return error_;
  check_header();
  if (error_)
    return error_;
  if (frame_bytes_ == 0 || buffered_bytes() < frame_bytes_)
    return std::optional<wire_message>{};
  auto frame = std::span<const std::byte>{buf_}.subspan(pos_, frame_bytes_);
  auto m = decoder_.decode(frame, peer_);
  if (!m) {
    // decode() counted and logged it already.
    error_ = m.error();
    buf_.clear();
    pos_ = 0;
    frame_bytes_ = 0;
    return error_;
  }
  pos_ += frame_bytes_;
  frame_bytes_ = 0;
  check_header();
  return std::optional<wire_message>{std::move(*m)};
}

} // namespace tessera::transport::wire
