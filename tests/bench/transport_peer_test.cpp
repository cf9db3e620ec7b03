// The benchmark's peer protocol: control frames are real wire frames, and
// the peer's start-up line is read strictly.
#include <gtest/gtest.h>

#include "bench/transport_peer.hpp"
#include "common/error.hpp"

namespace {

using namespace tessera::bench;

TEST(TransportPeerTest, ControlFrameCarriesItsSequence) {
  auto frame = control_frame(123456789);
  auto seq = control_sequence(frame);
  ASSERT_TRUE(seq) << tessera::error_text(seq.error());
  EXPECT_EQ(*seq, 123456789u);
}

TEST(TransportPeerTest, CorruptControlFrameIsRejected) {
  auto frame = control_frame(7);
  frame.back() ^= std::byte{0xff};
  EXPECT_FALSE(control_sequence(frame));
}

TEST(TransportPeerTest, AckFrameCarriesTheBatchId) {
  for (uint64_t id : {uint64_t{0}, uint64_t{41}, uint64_t{0x0102030405060708}, ~uint64_t{0}}) {
    auto frame = ack_frame(id);
    EXPECT_EQ(frame.size(), 8u);
    auto got = ack_batch_id(frame);
    ASSERT_TRUE(got) << tessera::error_text(got.error());
    EXPECT_EQ(*got, id);
  }
  EXPECT_EQ(ack_frame(0x0102030405060708).front(), std::byte{0x08}) << "little-endian";
}

TEST(TransportPeerTest, AnAckOfAnotherSizeIsRejected) {
  auto frame = ack_frame(7);
  frame.push_back(std::byte{0});
  EXPECT_FALSE(ack_batch_id(frame));
  frame.resize(7);
  EXPECT_FALSE(ack_batch_id(frame));
  EXPECT_FALSE(ack_batch_id(control_frame(7))) << "a heartbeat is not an ack";
}

TEST(TransportPeerTest, ReadsTheAnnouncement) {
  auto a = parse_peer_announcement("LISTENING 127.0.0.1:41234 REGION 1 16777216");
  ASSERT_TRUE(a) << tessera::error_text(a.error());
  EXPECT_EQ(a->address, "127.0.0.1:41234");
  EXPECT_EQ(a->region, 1u);
  EXPECT_EQ(a->region_bytes, 16777216u);
}

TEST(TransportPeerTest, RejectsAnythingElse) {
  auto a = parse_peer_announcement("peer: ucx: ucp_init: No such device");
  ASSERT_FALSE(a);
  EXPECT_NE(tessera::error_text(a.error()).find("No such device"), std::string::npos);
}

TEST(TransportPeerTest, EachSelectionOncePerKvPath) {
  auto base = default_transport_selections();
  auto same = with_kv_paths(base, {"auto"});
  ASSERT_TRUE(same);
  ASSERT_EQ(same->size(), base.size());
  EXPECT_EQ((*same)[0].key, "tcp");
  auto both = with_kv_paths(base, {"put", "am_rndv"});
  ASSERT_TRUE(both);
  ASSERT_EQ(both->size(), 2 * base.size());
  EXPECT_EQ((*both)[0].key, "tcp_put");
  EXPECT_EQ((*both)[0].kv_path, tessera::transport::ucx_kv_path::put);
  EXPECT_EQ((*both)[1].key, "tcp_am_rndv");
  EXPECT_EQ((*both)[1].label, "tcp am_rndv");
  EXPECT_EQ((*both)[1].perftest_key, "tcp");
  auto bad = with_kv_paths(base, {"rdma"});
  ASSERT_FALSE(bad);
  EXPECT_NE(tessera::error_text(bad.error()).find("rdma"), std::string::npos);
}

} // namespace
