#include "transport/wire/codec.hpp"

#include <string>
#include <utility>

#include <spdlog/spdlog.h>

#include "common/assert.hpp"
#include "common/error.hpp"
#include "transport/wire/capnp_body.hpp"
#include "transport/wire/frame.hpp"
#include "transport/wire/validate.hpp"

namespace tessera::transport::wire {

caf::error encode_into(const wire_message& m, std::vector<std::byte>& out,
                       const wire_limits& limits) {
  if (auto err = validate(m, limits))
    return err;
  const size_t start = out.size();
  out.resize(start + frame_header_bytes);
  if (auto err = encode_body(m, out, limits)) {
    out.resize(start);
    return err;
  }
  auto body = std::span<const std::byte>{out}.subspan(start + frame_header_bytes);
  frame_header h;
  h.type = static_cast<uint16_t>(type_of(m));
  h.body_bytes = static_cast<uint32_t>(body.size());
  h.body_xxh32 = frame_checksum(body);
  auto header = write_frame_header(h);
  std::copy(header.begin(), header.end(), out.begin() + static_cast<ptrdiff_t>(start));
  return {};
}

caf::expected<std::vector<std::byte>> encode(const wire_message& m, const wire_limits& limits) {
  std::vector<std::byte> out;
  if (auto err = encode_into(m, out, limits))
    return err;
  return out;
}

caf::expected<wire_message> decode(std::span<const std::byte> frame, const wire_limits& limits) {
  auto h = parse_frame_header(frame, limits);
  if (!h)
    return h.error();
  const auto type = static_cast<message_type>(h->type);
  const std::string kind(to_string(type));
  const size_t have = frame.size() - frame_header_bytes;
  if (h->body_bytes > have)
    return make_transport_error(transport_errc::bad_frame,
                                kind + ": truncated frame body: header says " +
                                  std::to_string(h->body_bytes) + " bytes, " +
                                  std::to_string(have) + " present");
  if (h->body_bytes < have)
    return make_transport_error(transport_errc::bad_frame,
                                kind + ": " + std::to_string(have - h->body_bytes) +
                                  " bytes after the frame body");
  auto body = frame.subspan(frame_header_bytes);
  if (auto sum = frame_checksum(body); sum != h->body_xxh32)
    return make_transport_error(transport_errc::checksum_mismatch,
                                kind + ": body checksum mismatch (header " +
                                  std::to_string(h->body_xxh32) + ", computed " +
                                  std::to_string(sum) + ")");
  auto m = decode_body(type, body, limits);
  if (!m)
    return m;
  if (auto err = validate(*m, limits))
    return err;
  return m;
}

std::shared_ptr<log_limiter> shared_reject_log_limiter() {
  static const auto limiter = std::make_shared<log_limiter>();
  return limiter;
}

frame_decoder::frame_decoder(wire_limits limits)
  : frame_decoder(limits, shared_reject_log_limiter()) {}

frame_decoder::frame_decoder(wire_limits limits, std::shared_ptr<log_limiter> log)
  : limits_(limits), log_(std::move(log)) {
  TESSERA_ASSERT(log_ != nullptr, "a frame_decoder needs a log limiter");
}

caf::expected<wire_message> frame_decoder::decode(std::span<const std::byte> frame,
                                                  std::string_view peer) {
  auto m = wire::decode(frame, limits_);
  if (!m) {
    reject(m.error(), peer);
    return m;
  }
  ++counters_.frames_decoded;
  counters_.bytes_decoded += frame.size();
  return m;
}

void frame_decoder::reject(const caf::error& err, std::string_view peer) {
  ++counters_.frames_rejected;
  if (err.category() == caf::atom("transport") && err.code() < transport_errc_count)
    ++counters_.rejected_by_reason[err.code()];
  const auto permit = log_->admit();
  if (!permit)
    return;
  if (permit.suppressed == 0)
    spdlog::warn("transport: rejected frame{}{}: {}", peer.empty() ? "" : " from ", peer,
                 error_text(err));
  else
    spdlog::warn("transport: rejected frame{}{}: {} ({} more rejected frames not logged since "
                 "the last such line)",
                 peer.empty() ? "" : " from ", peer, error_text(err), permit.suppressed);
}

} // namespace tessera::transport::wire
