// Stream reassembly: frames split at every possible point come out whole
// and identical; a bad header poisons the stream with a clear error.

#include <gtest/gtest.h>

#include <random>

#include "common/error.hpp"
#include "transport/wire/frame.hpp"
#include "transport/wire/frame_reader.hpp"
#include "wire_expect.hpp"
#include "wire_samples.hpp"

namespace tessera::transport::wire {
namespace {

using bytes = std::vector<std::byte>;

// 1000 frames of every kind, with varying content so that sizes vary.
std::vector<bytes> make_frames(size_t n) {
  auto samples = test::all_samples();
  std::vector<bytes> frames;
  for (size_t i = 0; i < n; ++i) {
    auto m = samples[i % samples.size()];
    if (auto* c = std::get_if<token_chunk>(&m)) {
      c->id = i;
      c->text.assign(i % 37, 'a');
    } else if (auto* h = std::get_if<heartbeat>(&m)) {
      h->sequence = i;
    }
    auto f = encode(m);
    EXPECT_TRUE(f);
    frames.push_back(*f);
  }
  return frames;
}

// Feeds `stream` in chunks chosen by `next_chunk` and returns every
// message's re-encoded frame.
template <class ChunkSize>
std::vector<bytes> reassemble(const bytes& stream, ChunkSize next_chunk) {
  frame_reader reader;
  std::vector<bytes> out;
  size_t pos = 0;
  while (pos < stream.size()) {
    const size_t n = std::min(next_chunk(), stream.size() - pos);
    EXPECT_FALSE(reader.feed(std::span{stream}.subspan(pos, n)));
    pos += n;
    for (;;) {
      auto m = reader.next();
      EXPECT_TRUE(m) << error_text(m.error());
      if (!m || !*m)
        break;
      auto f = encode(**m);
      EXPECT_TRUE(f);
      out.push_back(*f);
    }
  }
  EXPECT_EQ(reader.buffered_bytes(), 0u);
  EXPECT_EQ(reader.counters().frames_decoded, out.size());
  EXPECT_EQ(reader.counters().frames_rejected, 0u);
  return out;
}

bytes concat(const std::vector<bytes>& frames) {
  bytes s;
  for (const auto& f : frames)
    s.insert(s.end(), f.begin(), f.end());
  return s;
}

TEST(FrameReaderTest, ReassemblesAStreamFedOneByteAtATime) {
  auto frames = make_frames(1000);
  auto got = reassemble(concat(frames), [] { return size_t{1}; });
  ASSERT_EQ(got.size(), frames.size());
  EXPECT_TRUE(got == frames);
}

TEST(FrameReaderTest, ReassemblesAStreamFedInRandomChunks) {
  auto frames = make_frames(1000);
  const auto stream = concat(frames);
  for (uint64_t seed : {1u, 2u, 3u}) {
    std::mt19937_64 rng(seed);
    auto got = reassemble(stream, [&] { return size_t{1} + rng() % 3000; });
    ASSERT_EQ(got.size(), frames.size()) << "seed " << seed;
    EXPECT_TRUE(got == frames) << "seed " << seed;
  }
}

TEST(FrameReaderTest, ReturnsNothingUntilAFrameIsComplete) {
  auto f = encode(test::sample_heartbeat());
  ASSERT_TRUE(f);
  frame_reader reader;
  EXPECT_FALSE(reader.feed(std::span{*f}.first(f->size() - 1)));
  auto m = reader.next();
  ASSERT_TRUE(m);
  EXPECT_FALSE(m->has_value());
  EXPECT_FALSE(reader.feed(std::span{*f}.last(1)));
  m = reader.next();
  ASSERT_TRUE(m && m->has_value());
  test::expect_same(test::sample_heartbeat(), **m);
}

TEST(FrameReaderTest, RefusesAnOversizeLengthAsSoonAsTheHeaderArrives) {
  frame_header h;
  h.type = static_cast<uint16_t>(message_type::kv_transfer_batch);
  h.body_bytes = 1u << 30;
  auto head = write_frame_header(h);
  frame_reader reader({}, "peer-1");
  auto err = reader.feed(head);
  ASSERT_TRUE(err);
  EXPECT_EQ(err, transport_errc::frame_too_large);
  EXPECT_NE(error_text(err).find("frame body length 1073741824 exceeds the maximum"),
            std::string::npos)
    << error_text(err);
  EXPECT_EQ(reader.buffered_bytes(), 0u);
  EXPECT_EQ(reader.counters().rejected(transport_errc::frame_too_large), 1u);
}

TEST(FrameReaderTest, ErrorIsStickyAndCounted) {
  auto good = encode(test::plain_chunk());
  ASSERT_TRUE(good);
  bytes stream = *good;
  bytes bad = *good;
  bad[frame_header_bytes + 8] ^= std::byte{0x40};  // body checksum now wrong
  stream.insert(stream.end(), bad.begin(), bad.end());
  stream.insert(stream.end(), good->begin(), good->end());

  frame_reader reader;
  ASSERT_FALSE(reader.feed(stream));
  auto first = reader.next();
  ASSERT_TRUE(first && first->has_value());
  auto second = reader.next();
  ASSERT_FALSE(second);
  EXPECT_EQ(second.error(), transport_errc::checksum_mismatch);
  EXPECT_NE(error_text(second.error()).find("body checksum mismatch"), std::string::npos);
  EXPECT_TRUE(reader.failed());
  // The valid frame after the bad one is not delivered: the stream is dead.
  auto third = reader.next();
  ASSERT_FALSE(third);
  EXPECT_EQ(third.error(), transport_errc::checksum_mismatch);
  EXPECT_EQ(reader.feed(*good), transport_errc::checksum_mismatch);
  EXPECT_EQ(reader.counters().frames_decoded, 1u);
  EXPECT_EQ(reader.counters().frames_rejected, 1u);
  EXPECT_EQ(reader.counters().rejected(transport_errc::checksum_mismatch), 1u);
}

TEST(FrameReaderTest, RejectsGarbageWithABadMagic) {
  frame_reader reader;
  bytes junk(24, std::byte{'G'});
  auto err = reader.feed(junk);
  ASSERT_TRUE(err);
  EXPECT_NE(error_text(err).find("bad frame magic"), std::string::npos) << error_text(err);
}

TEST(FrameDecoderTest, CountsDecodedAndRejectedFramesByReason) {
  frame_decoder d;
  auto f = encode(test::sample_error());
  ASSERT_TRUE(f);
  ASSERT_TRUE(d.decode(*f));
  ASSERT_TRUE(d.decode(*f));
  auto cut = *f;
  cut.resize(8);
  EXPECT_FALSE(d.decode(cut, "peer-2"));
  EXPECT_EQ(d.counters().frames_decoded, 2u);
  EXPECT_EQ(d.counters().bytes_decoded, 2 * f->size());
  EXPECT_EQ(d.counters().frames_rejected, 1u);
  EXPECT_EQ(d.counters().rejected(transport_errc::bad_frame), 1u);
  EXPECT_EQ(d.counters().rejected(transport_errc::checksum_mismatch), 0u);
}

} // namespace
} // namespace tessera::transport::wire
