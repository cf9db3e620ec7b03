#include "kvstore/disk_codec.hpp"

#include <gtest/gtest.h>

#include "common/error.hpp"
#include "kvstore/block_quant.hpp"
#include "kvstore/kvstore_errc.hpp"
#include "tests/kvstore/kv_test_blocks.hpp"

namespace tessera::kvstore {
namespace {

using test::block_for;
using test::key_of;

TEST(DiskCodecTest, RoundTripsKeyAndValue) {
  auto k = key_of(3);
  auto b = block_for(k);
  auto key = disk_codec::decode_key(disk_codec::encode_key(k));
  ASSERT_TRUE(key);
  EXPECT_EQ(*key, k);
  auto value = disk_codec::encode_value(k, b);
  EXPECT_EQ(value.size(), disk_codec::header_bytes + b.payload_bytes());
  auto d = disk_codec::decode_value(k, value);
  ASSERT_EQ(d.status, disk_codec::decode_status::ok) << disk_codec::to_string(d.status);
  EXPECT_EQ(d.block.meta, b.meta);
  EXPECT_EQ(*d.block.payload, *b.payload);
}

TEST(DiskCodecTest, RefusesEveryTruncation) {
  auto k = key_of(1);
  auto value = disk_codec::encode_value(k, block_for(k));
  for (size_t n = 0; n < value.size(); ++n)
    EXPECT_NE(disk_codec::decode_value(k, std::string_view{value}.substr(0, n)).status,
              disk_codec::decode_status::ok)
        << "a value cut to " << n << " bytes was accepted";
}

TEST(DiskCodecTest, RefusesAFlippedByteAnywhere) {
  auto k = key_of(2);
  const auto value = disk_codec::encode_value(k, block_for(k));
  for (size_t i = 0; i < value.size(); ++i) {
    auto bad = value;
    bad[i] = static_cast<char>(bad[i] ^ 0x01);
    EXPECT_NE(disk_codec::decode_value(k, bad).status, disk_codec::decode_status::ok)
        << "a flip at byte " << i << " was accepted";
  }
}

TEST(DiskCodecTest, RefusesAValueStoredUnderAnotherKey) {
  auto value = disk_codec::encode_value(key_of(1), block_for(key_of(1)));
  EXPECT_EQ(disk_codec::decode_value(key_of(2), value).status, disk_codec::decode_status::wrong_key);
  EXPECT_EQ(disk_codec::decode_value(key_of(1, 99), value).status,
            disk_codec::decode_status::wrong_key);
}

TEST(DiskCodecTest, RoundTripsAnInt8BlockWithItsCodec) {
  auto k = key_of(4);
  engine::kv_layout l = test::small_layout();
  std::vector<std::byte> zeros(l.block_bytes()); // finite, so int8 takes it
  auto q = encode_int8_block(make_block(l, l.block_tokens, zeros));
  ASSERT_TRUE(q);
  auto value = disk_codec::encode_value(k, *q);
  EXPECT_EQ(value.size(), disk_codec::header_bytes + encoded_payload_bytes(l, block_codec::int8));
  EXPECT_EQ(value[49], 1) << "the codec byte";
  auto d = disk_codec::decode_value(k, value);
  ASSERT_EQ(d.status, disk_codec::decode_status::ok) << disk_codec::to_string(d.status);
  EXPECT_EQ(d.block.meta, q->meta);
  EXPECT_EQ(d.block.meta.codec, block_codec::int8);
  EXPECT_EQ(*d.block.payload, *q->payload);
  // An exact block's value has a zero there, as every value written before
  // the codec byte existed.
  EXPECT_EQ(disk_codec::encode_value(k, block_for(k))[49], 0);
  for (size_t i = disk_codec::header_bytes; i < value.size(); i += 97) {
    auto bad = value;
    bad[i] = static_cast<char>(bad[i] ^ 0x01);
    EXPECT_EQ(disk_codec::decode_value(k, bad).status, disk_codec::decode_status::bad_checksum) << i;
  }
}

TEST(DiskCodecTest, RefusesAnUnknownCodecAndAPayloadSizedForAnotherCodec) {
  auto k = key_of(5);
  auto b = block_for(k);
  auto meta = b.meta;
  meta.codec = static_cast<block_codec>(7);
  auto value = disk_codec::encode_header(k, meta, b.payload_bytes()) +
               std::string(reinterpret_cast<const char*>(b.payload->data()), b.payload->size());
  EXPECT_EQ(disk_codec::decode_value(k, value).status, disk_codec::decode_status::bad_layout);
  // An exact block's bytes labelled int8: the size gives it away.
  meta.codec = block_codec::int8;
  value = disk_codec::encode_header(k, meta, b.payload_bytes()) +
          std::string(reinterpret_cast<const char*>(b.payload->data()), b.payload->size());
  EXPECT_EQ(disk_codec::decode_value(k, value).status, disk_codec::decode_status::bad_size);
}

TEST(DiskCodecTest, RefusesAnotherVersion) {
  auto k = key_of(1);
  auto value = disk_codec::encode_value(k, block_for(k));
  value[4] = 1; // format 1: 64-bit block hashes
  EXPECT_EQ(disk_codec::decode_value(k, value).status, disk_codec::decode_status::bad_version);
  auto key = disk_codec::encode_key(k);
  key[0] = 1;
  EXPECT_FALSE(disk_codec::decode_key(key));
  // A format-1 key (17 bytes) or order value (25 bytes) does not parse.
  EXPECT_FALSE(disk_codec::decode_key(disk_codec::encode_key(k).substr(0, 17)));
  EXPECT_FALSE(disk_codec::decode_order_value(disk_codec::encode_order_value(k, 1).substr(0, 25)));
}

// Both halves of the 128-bit hash are in the key, the order value and the
// value header: blocks differing in either half are distinct.
TEST(DiskCodecTest, KeysCarryBothHalvesOfTheHash) {
  const block_key a{7, {1, 2}}, hi{7, {9, 2}}, lo{7, {1, 9}};
  EXPECT_EQ(disk_codec::encode_key(a).size(), disk_codec::key_bytes);
  EXPECT_EQ(disk_codec::decode_key(disk_codec::encode_key(a)), a);
  EXPECT_NE(disk_codec::encode_key(a), disk_codec::encode_key(hi));
  EXPECT_NE(disk_codec::encode_key(a), disk_codec::encode_key(lo));
  auto order = disk_codec::decode_order_value(disk_codec::encode_order_value(lo, 4096));
  ASSERT_TRUE(order);
  EXPECT_EQ(order->key, lo);
  EXPECT_EQ(order->charged_bytes, 4096u);
  const auto value = disk_codec::encode_value(a, block_for(a));
  EXPECT_EQ(disk_codec::decode_value(a, value).status, disk_codec::decode_status::ok);
  EXPECT_EQ(disk_codec::decode_value(hi, value).status, disk_codec::decode_status::wrong_key);
  EXPECT_EQ(disk_codec::decode_value(lo, value).status, disk_codec::decode_status::wrong_key);
}

TEST(DiskCodecTest, OrderKeysSortOldestFirst) {
  uint64_t seqs[] = {1, 2, 255, 256, 65536, uint64_t{1} << 40};
  for (size_t i = 1; i < std::size(seqs); ++i)
    EXPECT_LT(disk_codec::encode_order_key(seqs[i - 1]), disk_codec::encode_order_key(seqs[i]));
  for (auto s : seqs)
    EXPECT_EQ(disk_codec::decode_order_key(disk_codec::encode_order_key(s)), s);
  auto e = disk_codec::decode_order_value(disk_codec::encode_order_value(key_of(5), 12345));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->key, key_of(5));
  EXPECT_EQ(e->charged_bytes, 12345u);
  EXPECT_FALSE(disk_codec::decode_order_value("short"));
}

TEST(BlockTest, ValidateRefusesMalformedBlocksNamingTheKey) {
  auto k = key_of(1);
  EXPECT_FALSE(validate_block(k, block_for(k)));

  auto wrong_size = make_block(test::small_layout(), 4, std::vector<std::byte>(100));
  auto err = validate_block(k, wrong_size);
  EXPECT_TRUE(err == kvstore_errc::bad_block);
  EXPECT_NE(error_text(err).find(to_string(k)), std::string::npos) << error_text(err);
  EXPECT_NE(error_text(err).find("100 bytes"), std::string::npos) << error_text(err);

  auto bad_tokens = block_for(k);
  bad_tokens.meta.token_count = 5;
  EXPECT_TRUE(validate_block(k, bad_tokens) == kvstore_errc::bad_block);
  bad_tokens.meta.token_count = 0;
  EXPECT_TRUE(validate_block(k, bad_tokens) == kvstore_errc::bad_block);

  auto bad_sum = block_for(k);
  bad_sum.meta.checksum ^= 1;
  err = validate_block(k, bad_sum);
  EXPECT_NE(error_text(err).find("checksum"), std::string::npos) << error_text(err);

  stored_block empty;
  EXPECT_TRUE(validate_block(k, empty) == kvstore_errc::bad_block);

  auto bad_layout = block_for(k);
  bad_layout.meta.layout.num_layers = -1;
  EXPECT_TRUE(validate_block(k, bad_layout) == kvstore_errc::bad_block);
}

} // namespace
} // namespace tessera::kvstore
