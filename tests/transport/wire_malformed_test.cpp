// Malformed frames: every one is rejected with an error that names what is
// wrong, never trusted, never a crash.

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include <capnp/message.h>
#include <capnp/serialize.h>

#include "common/error.hpp"
#include "transport/schema/request.capnp.h"
#include "transport/schema/tokens.capnp.h"
#include "transport/wire/codec.hpp"
#include "transport/wire/frame.hpp"
#include "transport/wire/validate.hpp"
#include "wire_expect.hpp"
#include "raw_frame.hpp"
#include "wire_samples.hpp"

namespace tessera::transport::wire {
namespace {

namespace s = tessera::transport::schema;
using bytes = std::vector<std::byte>;

bytes valid_frame() {
  auto f = encode(test::full_handoff());
  EXPECT_TRUE(f);
  return *f;
}

using test::frame_of;

// Rewrites the header of `frame` (checksums recomputed) after `edit`.
template <class Edit>
bytes with_header(bytes frame, Edit edit) {
  auto h = parse_frame_header(frame);
  EXPECT_TRUE(h);
  edit(*h);
  auto head = write_frame_header(*h);
  std::copy(head.begin(), head.end(), frame.begin());
  return frame;
}

void expect_rejected(const bytes& frame, transport_errc code, const std::string& text) {
  auto m = decode(frame);
  ASSERT_FALSE(m) << "accepted a frame that should fail with: " << text;
  EXPECT_EQ(m.error(), code) << error_text(m.error());
  EXPECT_NE(error_text(m.error()).find(text), std::string::npos)
    << "expected \"" << text << "\" in " << error_text(m.error());
}

TEST(WireMalformedTest, RejectsTruncatedHeader) {
  auto f = valid_frame();
  f.resize(10);
  expect_rejected(f, transport_errc::bad_frame, "truncated frame header: 10 of 24 bytes");
  expect_rejected({}, transport_errc::bad_frame, "truncated frame header: 0 of 24 bytes");
}

TEST(WireMalformedTest, RejectsTruncatedBody) {
  auto f = valid_frame();
  const auto body = f.size() - frame_header_bytes;
  f.resize(f.size() - 8);
  expect_rejected(f, transport_errc::bad_frame,
                  "truncated frame body: header says " + std::to_string(body) + " bytes, " +
                    std::to_string(body - 8) + " present");
}

TEST(WireMalformedTest, RejectsTrailingBytesAfterTheBody) {
  auto f = valid_frame();
  f.resize(f.size() + 8);
  expect_rejected(f, transport_errc::bad_frame, "8 bytes after the frame body");
}

TEST(WireMalformedTest, RejectsWrongMagic) {
  auto f = valid_frame();
  f[0] = std::byte{'X'};
  expect_rejected(f, transport_errc::bad_frame, "bad frame magic 0x41525358 (expected 0x41525354)");
}

TEST(WireMalformedTest, RejectsUnknownVersionNamingIt) {
  auto f = with_header(valid_frame(), [](frame_header& h) { h.version = 2; });
  expect_rejected(f, transport_errc::unsupported_version, "unsupported frame version 2");
}

TEST(WireMalformedTest, RejectsUnknownTypeNamingIt) {
  expect_rejected(with_header(valid_frame(), [](frame_header& h) { h.type = 99; }),
                  transport_errc::unknown_type, "unknown message type 99");
  expect_rejected(with_header(valid_frame(), [](frame_header& h) { h.type = 0; }),
                  transport_errc::unknown_type, "unknown message type 0");
}

TEST(WireMalformedTest, RejectsNonZeroFlags) {
  expect_rejected(with_header(valid_frame(), [](frame_header& h) { h.flags = 4; }),
                  transport_errc::bad_frame, "frame flags must be 0 in version 1");
}

TEST(WireMalformedTest, RejectsLengthOverTheMaximum) {
  auto f = with_header(valid_frame(), [](frame_header& h) { h.body_bytes = 65u << 20; });
  expect_rejected(f, transport_errc::frame_too_large,
                  "frame body length 68157440 exceeds the maximum 67108864");
  wire_limits small;
  small.max_body_bytes = 64;
  auto m = decode(valid_frame(), small);
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error(), transport_errc::frame_too_large);
}

TEST(WireMalformedTest, RejectsLengthOverTheBytesPresent) {
  auto f = with_header(valid_frame(), [](frame_header& h) { h.body_bytes += 4096; });
  expect_rejected(f, transport_errc::bad_frame, "truncated frame body");
}

TEST(WireMalformedTest, RejectsLengthNotAMultipleOfEight) {
  auto f = with_header(valid_frame(), [](frame_header& h) { h.body_bytes -= 3; });
  expect_rejected(f, transport_errc::bad_frame, "is not a positive multiple of 8");
}

TEST(WireMalformedTest, RejectsBodyChecksumMismatch) {
  auto f = valid_frame();
  f[frame_header_bytes + 20] ^= std::byte{0x01};
  expect_rejected(f, transport_errc::checksum_mismatch, "request_handoff: body checksum mismatch");
}

TEST(WireMalformedTest, RejectsCorruptedHeaderBeforeTrustingItsLength) {
  auto f = valid_frame();
  f[9] ^= std::byte{0x10};  // the length field, header checksum not updated
  expect_rejected(f, transport_errc::bad_frame, "frame header checksum mismatch");
}

TEST(WireMalformedTest, RejectsBodyThatIsNotCapnp) {
  // A segment table claiming far more words than are present.
  bytes body(16, std::byte{0xff});
  frame_header h;
  h.type = static_cast<uint16_t>(message_type::heartbeat);
  h.body_bytes = static_cast<uint32_t>(body.size());
  h.body_xxh32 = frame_checksum(body);
  auto head = write_frame_header(h);
  bytes f(head.size() + body.size());
  std::memcpy(f.data(), head.data(), head.size());
  std::memcpy(f.data() + head.size(), body.data(), body.size());
  expect_rejected(f, transport_errc::bad_frame, "heartbeat: body is not a valid capnp message");
}

TEST(WireMalformedTest, RejectsListLongerThanTheBoundBeforeCopyingIt) {
  capnp::MallocMessageBuilder mb;
  auto r = mb.initRoot<s::RequestHandoff>();
  r.setRequestId(1);
  const unsigned n = (1u << 20) + 1;
  auto prompt = r.initPrompt(n);
  for (unsigned i = 0; i < n; ++i)
    prompt.set(i, 1);
  r.initParams().setTopP(1.0f);
  expect_rejected(frame_of(message_type::request_handoff, mb), transport_errc::invalid_message,
                  "request_handoff: prompt has 1048577 tokens, more than the maximum 1048576");

  capnp::MallocMessageBuilder mb2;
  auto c = mb2.initRoot<s::TokenChunk>();
  c.initTokens(9);
  wire_limits lim;
  lim.max_chunk_tokens = 8;
  auto m = decode(frame_of(message_type::token_chunk, mb2), lim);
  ASSERT_FALSE(m);
  EXPECT_NE(error_text(m.error()).find("tokens has 9 tokens, more than the maximum 8"),
            std::string::npos)
    << error_text(m.error());
}

TEST(WireMalformedTest, RejectsAStatusProbeOverItsBoundBeforeCopyingIt) {
  capnp::MallocMessageBuilder mb;
  mb.initRoot<s::RequestStatus>().initRequestIds(5);
  wire_limits lim;
  lim.max_status_ids = 4;
  auto m = decode(frame_of(message_type::request_status, mb), lim);
  ASSERT_FALSE(m);
  EXPECT_NE(error_text(m.error()).find("request_ids"), std::string::npos) << error_text(m.error());
  capnp::MallocMessageBuilder empty;
  empty.initRoot<s::RequestStatus>();
  expect_rejected(frame_of(message_type::request_status, empty), transport_errc::invalid_message,
                  "request_status: request_ids must not be empty");
}

TEST(WireMalformedTest, RejectsTooManyStopStrings) {
  capnp::MallocMessageBuilder mb;
  auto r = mb.initRoot<s::RequestHandoff>();
  r.initPrompt(1).set(0, 3);
  auto stop = r.initParams().initStop(17);
  for (unsigned i = 0; i < 17; ++i)
    stop.set(i, "x");
  expect_rejected(frame_of(message_type::request_handoff, mb), transport_errc::invalid_message,
                  "params: stop must have at most 16 strings, got 17");
}

TEST(WireMalformedTest, RejectsValidCapnpWithInvalidSamplingParamsNamingTheField) {
  capnp::MallocMessageBuilder mb;
  auto r = mb.initRoot<s::RequestHandoff>();
  r.setRequestId(5);
  r.initPrompt(2).set(0, 3);
  r.initParams().setTopP(2.0f);
  expect_rejected(frame_of(message_type::request_handoff, mb), transport_errc::invalid_message,
                  "request_handoff: params: top_p must be in (0, 1], got 2");
}

TEST(WireMalformedTest, RejectsEnumOutOfRangeNamingTheField) {
  capnp::MallocMessageBuilder mb;
  auto c = mb.initRoot<s::TokenChunk>();
  c.initTokens(1).set(0, 4);
  c.setFinishReason(static_cast<s::FinishReason>(9));
  expect_rejected(frame_of(message_type::token_chunk, mb), transport_errc::invalid_message,
                  "token_chunk: finish_reason out of range: 9");
}

TEST(WireMalformedTest, RejectsBodyOfAnotherMessageKind) {
  // A token chunk's body under a heartbeat header: the chunk's token list
  // sits where the heartbeat's node id (text) should be.
  auto chunk = encode(test::plain_chunk());
  ASSERT_TRUE(chunk);
  auto f = with_header(*chunk, [](frame_header& h) {
    h.type = static_cast<uint16_t>(message_type::heartbeat);
  });
  expect_rejected(f, transport_errc::bad_frame, "heartbeat: body is not a valid capnp message");
  expect_rejected(f, transport_errc::bad_frame, "where text was expected");
}

TEST(WireMalformedTest, DecodesUnalignedInput) {
  for (const auto& m : test::all_samples()) {
    auto f = encode(m);
    ASSERT_TRUE(f);
    for (size_t offset : {1, 3, 4, 7}) {
      bytes storage(f->size() + offset);
      std::memcpy(storage.data() + offset, f->data(), f->size());
      auto view = std::span<const std::byte>{storage}.subspan(offset, f->size());
      auto back = decode(view);
      ASSERT_TRUE(back) << error_text(back.error());
      test::expect_same(m, *back);
    }
  }
}

// Whatever decode() returns for an arbitrary input is either an error or a
// message that passes validation and re-encodes; it never crashes.
void expect_rejected_or_valid(std::span<const std::byte> input, size_t& accepted) {
  auto m = decode(input);
  if (!m) {
    EXPECT_FALSE(error_text(m.error()).empty());
    return;
  }
  ++accepted;
  EXPECT_FALSE(validate(*m));
  EXPECT_TRUE(encode(*m));
}

TEST(WireMalformedTest, RandomBytesAreRejectedOrValidNeverACrash) {
  std::mt19937_64 rng(20240611);
  size_t accepted = 0;
  for (int i = 0; i < 3000; ++i) {
    bytes b(rng() % 600);
    for (auto& x : b)
      x = std::byte(rng() & 0xff);
    expect_rejected_or_valid(b, accepted);
  }
  EXPECT_EQ(accepted, 0u);  // random bytes never get past magic + checksum
}

TEST(WireMalformedTest, MutatedBodiesWithFixedChecksumsAreRejectedOrValid) {
  // Flip random body bytes and recompute the checksum, so the mutations
  // reach the capnp decoder and the semantic checks.
  std::mt19937_64 rng(7);
  auto samples = test::all_samples();
  size_t accepted = 0;
  size_t rejected_by_checks = 0;
  for (int i = 0; i < 6000; ++i) {
    auto f = encode(samples[i % samples.size()]);
    ASSERT_TRUE(f);
    const size_t body = f->size() - frame_header_bytes;
    const int flips = 1 + static_cast<int>(rng() % 8);
    for (int k = 0; k < flips; ++k)
      (*f)[frame_header_bytes + rng() % body] = std::byte(rng() & 0xff);
    auto g = with_header(*f, [&](frame_header& h) {
      h.body_xxh32 = frame_checksum(std::span<const std::byte>{*f}.subspan(frame_header_bytes));
      if (rng() % 4 == 0)
        h.type = static_cast<uint16_t>(1 + rng() % max_message_type);
    });
    const size_t before = accepted;
    expect_rejected_or_valid(g, accepted);
    rejected_by_checks += accepted == before ? 1 : 0;
  }
  // Both outcomes occur, so the test exercises the decoder past the header.
  EXPECT_GT(accepted, 100u);
  EXPECT_GT(rejected_by_checks, 100u);
}

} // namespace
} // namespace tessera::transport::wire
