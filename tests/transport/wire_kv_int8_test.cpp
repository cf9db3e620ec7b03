// An int8 KV pool's blocks (kv_dtype i8, engine/kv_int8.hpp) cross the wire
// as they are: the layout keeps its dtype, the bytes (values and per-token
// scales) arrive unchanged, and the size check counts the scales.

#include <gtest/gtest.h>

#include "common/error.hpp"
#include "transport/wire/codec.hpp"
#include "wire_samples.hpp"

namespace tessera::transport::wire {
namespace {

kv_fetch_reply int8_reply() {
  auto m = test::sample_fetch_reply();
  m.layout = {16, 2, 1, 16, protocol::dtype::i8};
  for (auto& b : m.blocks) {
    b.token_count = 16;
    b.data.assign(m.layout.block_bytes(), std::byte{0});
    for (size_t i = 0; i < b.data.size(); ++i)
      b.data[i] = static_cast<std::byte>(i * 5 + 1);
  }
  return m;
}

TEST(WireKvInt8Test, AnInt8LayoutAndItsScalesCrossTheWireUnchanged) {
  const auto m = int8_reply();
  ASSERT_EQ(m.layout.block_bytes(), 2u * 2 * (16 * 16 + 16 * 2)) << "values and f16 scales per slab";
  auto frame = encode(wire_message{m});
  ASSERT_TRUE(frame) << error_text(frame.error());
  auto back = decode(*frame);
  ASSERT_TRUE(back) << error_text(back.error());
  const auto& r = std::get<kv_fetch_reply>(*back);
  EXPECT_EQ(r.layout, m.layout);
  EXPECT_EQ(r.layout.kv_dtype, protocol::dtype::i8);
  ASSERT_EQ(r.blocks.size(), m.blocks.size());
  for (size_t i = 0; i < r.blocks.size(); ++i)
    EXPECT_EQ(r.blocks[i].data, m.blocks[i].data) << "block " << i;
}

TEST(WireKvInt8Test, AnInt8BlockWithoutItsScalesIsRefused) {
  auto m = int8_reply();
  m.blocks[1].data.resize(2 * 2 * 16 * 16); // the values of a bf16-sized count, no scales
  auto frame = encode(wire_message{m});
  ASSERT_FALSE(frame);
  EXPECT_NE(error_text(frame.error()).find("block_bytes()"), std::string::npos) << error_text(frame.error());
}

} // namespace
} // namespace tessera::transport::wire
