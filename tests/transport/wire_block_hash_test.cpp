// 128-bit block hashes on the wire: both halves cross intact, and a frame
// of an older build (the retired 64-bit hash fields set) is refused by
// name rather than misread.

#include <gtest/gtest.h>

#include <cstring>
#include <variant>

#include <capnp/message.h>
#include <capnp/serialize.h>

#include "common/error.hpp"
#include "transport/schema/kv.capnp.h"
#include "transport/wire/codec.hpp"
#include "transport/wire/frame.hpp"
#include "raw_frame.hpp"
#include "wire_samples.hpp"

namespace tessera::transport::wire {
namespace {

namespace s = tessera::transport::schema;
using bytes = std::vector<std::byte>;

using test::frame_of;

TEST(WireBlockHashTest, BothHalvesOfEveryHashRoundTrip) {
  kv_event ev = test::stored_event();
  ev.parent_hash = protocol::kv_block_hash{~0ull, 1};
  ev.block_hashes = {{0, ~0ull}, {0x8000'0000'0000'0000ull, 0}, {0x0123'4567'89ab'cdefull, 0xfedc'ba98'7654'3210ull}};
  auto f = encode(ev);
  ASSERT_TRUE(f) << error_text(f.error());
  auto m = decode(*f);
  ASSERT_TRUE(m) << error_text(m.error());
  const auto& got = std::get<kv_event>(*m);
  EXPECT_EQ(got.parent_hash, ev.parent_hash);
  EXPECT_EQ(got.block_hashes, ev.block_hashes);

  kv_fetch_request q = test::sample_fetch();
  q.block_hashes = {{1, 2}, {3, 4}};
  f = encode(q);
  ASSERT_TRUE(f);
  m = decode(*f);
  ASSERT_TRUE(m) << error_text(m.error());
  EXPECT_EQ(std::get<kv_fetch_request>(*m).block_hashes, q.block_hashes);
}

TEST(WireBlockHashTest, AnEventWithRetiredHashesIsRefusedByName) {
  capnp::MallocMessageBuilder mb;
  auto e = mb.initRoot<s::KvEvent>();
  e.setWorkerId(1);
  e.setKind(s::KvEventKind::STORED);
  auto old = e.initBlockHashes(2); // what an older build sends
  old.set(0, 11);
  old.set(1, 12);
  auto m = decode(frame_of(message_type::kv_event, mb));
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error(), transport_errc::invalid_message) << error_text(m.error());
  EXPECT_NE(error_text(m.error()).find("block_hashes carries retired 64-bit block hashes"), std::string::npos)
    << error_text(m.error());
}

TEST(WireBlockHashTest, AFetchWithRetiredHashesIsRefusedByName) {
  capnp::MallocMessageBuilder mb;
  auto q = mb.initRoot<s::KvFetchRequest>();
  q.setNs(5);
  q.initBlockHashes(1).set(0, 7);
  q.setMaxBytes(4096);
  auto m = decode(frame_of(message_type::kv_fetch_request, mb));
  ASSERT_FALSE(m);
  EXPECT_NE(error_text(m.error()).find("retired 64-bit"), std::string::npos) << error_text(m.error());
}

TEST(WireBlockHashTest, AFetchedBlockWithARetiredHashIsRefused) {
  capnp::MallocMessageBuilder mb;
  auto r = mb.initRoot<s::KvFetchReply>();
  auto l = r.initLayout();
  l.setBlockTokens(4);
  l.setNumLayers(1);
  l.setNumKvHeads(1);
  l.setHeadDim(2);
  auto b = r.initBlocks(1)[0];
  b.setHash(99);
  b.setTokenCount(4);
  auto m = decode(frame_of(message_type::kv_fetch_reply, mb));
  ASSERT_FALSE(m);
  EXPECT_NE(error_text(m.error()).find("blocks[].hash carries retired 64-bit"), std::string::npos)
    << error_text(m.error());
}

} // namespace
} // namespace tessera::transport::wire
