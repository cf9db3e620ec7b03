// The tiered store with int8 tiers (tiered_store_options::tier_codec):
// callers put and get exact blocks, the tiers hold and count quantized ones.
#include "kvstore/tiered_block_store.hpp"

#include <cmath>
#include <limits>
#include <random>

#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include "common/error.hpp"
#include "kvstore/block_quant.hpp"
#include "kvstore/disk_codec.hpp"
#include "kvstore/kvstore_errc.hpp"
#include "tests/kvstore/kv_test_blocks.hpp"
#include "tests/kvstore/raw_rocksdb.hpp"
#include "tests/support/temp_dir.hpp"

namespace tessera::kvstore {
namespace {

using namespace std::chrono_literals;
using test::key_of;
using test::raw_put;
using test::test_ns;

// The `small` model's block shape (16 tokens, 12 layers, 4 KV heads,
// head_dim 64) in dtype `t`.
engine::kv_layout model_layout(engine::dtype t) { return {16, 12, 4, 64, t}; }

// A block of finite values (random bytes would hold NaNs, which int8
// refuses): normal, with a spread that differs per slab, seeded by the key.
stored_block finite_block(const block_key& key, const engine::kv_layout& l) {
  std::vector<std::byte> bytes(l.block_bytes());
  std::mt19937_64 rng{key.hash.lo ^ key.hash.hi ^ key.ns};
  std::normal_distribution<float> normal{0.0f, 1.0f};
  const size_t slab = static_cast<size_t>(l.block_tokens) * l.head_dim;
  const size_t n = bytes.size() / engine::dtype_size(l.kv_dtype);
  for (size_t i = 0; i < n; ++i)
    engine::store_from_f32(bytes.data(), l.kv_dtype, i,
                           normal(rng) * 0.1f * static_cast<float>(1 + (i / slab) % 5));
  return make_block(l, l.block_tokens, std::move(bytes));
}

const engine::kv_layout bf16_layout = model_layout(engine::dtype::bf16);
const size_t exact_host_charge = host_tier::charge(finite_block(key_of(0), bf16_layout));
const size_t int8_host_charge =
    encoded_payload_bytes(bf16_layout, block_codec::int8) + host_tier::entry_overhead_bytes;

tiered_store_options int8_options(size_t host_bytes) {
  tiered_store_options o;
  o.host_capacity_bytes = host_bytes;
  o.tier_codec = block_codec::int8;
  return o;
}

tiered_store_options with_disk(tiered_store_options o, const std::filesystem::path& dir,
                               uint64_t disk_bytes) {
  o.disk = rocksdb_tier_options{};
  o.disk->dir = dir;
  o.disk->capacity_bytes = disk_bytes;
  return o;
}

std::unique_ptr<tiered_block_store> open_store(const tiered_store_options& o) {
  auto s = tiered_block_store::open(o);
  EXPECT_TRUE(s) << error_text(s.error());
  return s ? std::move(*s) : nullptr;
}

// Whether `got` is `put` back within the quantizer's bound: same layout,
// dtype and token count, an exact block with a valid checksum, and every
// element within half a step of its slab (max|x| / 127 / 2) plus the
// rounding of the result to the block's dtype (2^-8 relative for bf16).
::testing::AssertionResult within_int8_bound(const stored_block& put, const stored_block& got) {
  const auto& l = put.meta.layout;
  if (!(got.meta.layout == l) || got.meta.token_count != put.meta.token_count ||
      got.meta.codec != block_codec::exact || !verify_block(got) ||
      got.payload_bytes() != put.payload_bytes())
    return ::testing::AssertionFailure() << "not an exact block of the original layout";
  const double dtype_rel = l.kv_dtype == engine::dtype::f32 ? 1e-6 : std::ldexp(1.0, -8);
  const size_t slab = static_cast<size_t>(l.block_tokens) * l.head_dim;
  const size_t n = put.payload_bytes() / engine::dtype_size(l.kv_dtype);
  for (size_t s = 0; s * slab < n; ++s) {
    double max_abs = 0;
    for (size_t i = s * slab; i < (s + 1) * slab; ++i)
      max_abs = std::max(max_abs, std::fabs(double{engine::load_as_f32(put.payload->data(), l.kv_dtype, i)}));
    const double half_step = max_abs / 127 / 2;
    for (size_t i = s * slab; i < (s + 1) * slab; ++i) {
      const double x = engine::load_as_f32(put.payload->data(), l.kv_dtype, i);
      const double y = engine::load_as_f32(got.payload->data(), l.kv_dtype, i);
      if (std::fabs(x - y) > half_step * 1.0001 + std::fabs(x) * dtype_rel)
        return ::testing::AssertionFailure()
               << "element " << i << ": put " << x << ", got " << y << ", half step " << half_step;
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(Int8TiersTest, GetReturnsTheOriginalLayoutAndDtypeWithinTheQuantizerBound) {
  for (auto t : {engine::dtype::bf16, engine::dtype::f32, engine::dtype::f16}) {
    test::temp_dir dir{"tessera-kvstore"};
    const auto l = model_layout(t);
    // Host room for one block: the second put spills the first to disk.
    auto s = open_store(with_disk(int8_options(int8_host_charge + 64), dir.path(), 1 << 24));
    ASSERT_TRUE(s);
    const auto b0 = finite_block(key_of(0), l);
    const auto b1 = finite_block(key_of(1), l);
    ASSERT_FALSE(s->put(key_of(0), b0));
    ASSERT_FALSE(s->put(key_of(1), b1));
    ASSERT_TRUE(s->wait_spilled(10s));
    EXPECT_EQ(s->stats().disk.used_bytes,
              disk_codec::header_bytes + encoded_payload_bytes(l, block_codec::int8));
    auto from_host = s->get(key_of(1));
    ASSERT_TRUE(from_host);
    EXPECT_EQ(from_host->tier, kv_tier::host);
    EXPECT_TRUE(within_int8_bound(b1, from_host->block)) << engine::to_safetensors_name(t);
    EXPECT_NE(*from_host->block.payload, *b1.payload) << "the tiers held int8, not the block";
    auto from_disk = s->get(key_of(0));
    ASSERT_TRUE(from_disk);
    EXPECT_EQ(from_disk->tier, kv_tier::disk);
    EXPECT_TRUE(within_int8_bound(b0, from_disk->block)) << engine::to_safetensors_name(t);
    EXPECT_EQ(s->stats().int8_blocks, 2u);
  }
}

TEST(Int8TiersTest, CapacityCountsQuantizedBytesSoMoreBlocksFit) {
  const size_t capacity = 8 * exact_host_charge;
  tiered_store_options exact_opts;
  exact_opts.host_capacity_bytes = capacity;
  auto exact = open_store(exact_opts);
  auto int8 = open_store(int8_options(capacity));
  ASSERT_TRUE(exact && int8);
  for (uint64_t i = 0; i < 16; ++i) {
    const auto b = finite_block(key_of(i), bf16_layout);
    ASSERT_FALSE(exact->put(key_of(i), b));
    ASSERT_FALSE(int8->put(key_of(i), b));
  }
  EXPECT_EQ(exact->stats().host.blocks, 8u);
  // A bf16 block quantizes to just over half its bytes: 15 fit where 8 did.
  EXPECT_EQ(int8->stats().host.blocks, capacity / int8_host_charge);
  EXPECT_GE(int8->stats().host.blocks, 15u);
  EXPECT_EQ(int8->stats().host.used_bytes, int8->stats().host.blocks * int8_host_charge);
  EXPECT_LE(int8->stats().host.used_bytes, capacity);
}

TEST(Int8TiersTest, KeysCallersNamespacesAndEventsAsAnExactStoreDoes) {
  auto s = open_store(int8_options(64 * exact_host_charge));
  ASSERT_TRUE(s);
  s->record_events(true);
  for (uint64_t i = 0; i < 3; ++i)
    ASSERT_FALSE(s->put(key_of(i), finite_block(key_of(i), bf16_layout)));
  EXPECT_TRUE(s->contains(key_of(1)));
  EXPECT_FALSE(s->contains(key_of(1, test_ns + 1)));
  EXPECT_FALSE(s->get(key_of(1, test_ns + 1)));
  const std::vector<engine::kv_block_hash> chain{key_of(0).hash, key_of(1).hash, key_of(2).hash};
  EXPECT_EQ(s->lookup(test_ns, chain).blocks(), 3u);
  EXPECT_EQ(s->lookup(test_ns, chain, lookup_mode::probe).blocks(), 3u);
  EXPECT_EQ(s->lookup(test_ns + 1, chain).blocks(), 0u);
  // The tiers hold the blocks under another namespace; events name the
  // caller's, which is what a router matches requests against.
  EXPECT_EQ(s->tier_key(key_of(1)).ns, test_ns ^ int8_namespace_tag);
  EXPECT_TRUE(s->host().contains(s->tier_key(key_of(1))));
  EXPECT_FALSE(s->host().contains(key_of(1)));
  auto ev = s->drain_events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].ns, test_ns);
  EXPECT_EQ(ev[0].hashes, chain);
}

TEST(Int8TiersTest, ARestartWithTheOtherCodecNeverServesTheOtherKind) {
  test::temp_dir dir{"tessera-kvstore"};
  const uint64_t disk_bytes = 1 << 24;
  // Host room for one block, so what is put goes to disk.
  tiered_store_options exact_opts;
  exact_opts.host_capacity_bytes = exact_host_charge;
  exact_opts = with_disk(exact_opts, dir.path(), disk_bytes);
  const auto int8_opts = with_disk(int8_options(exact_host_charge), dir.path(), disk_bytes);
  // Key 0 exact only, key 1 int8 only, key 2 both.
  const auto b0 = finite_block(key_of(0), bf16_layout);
  const auto b1 = finite_block(key_of(1), bf16_layout);
  const auto b2 = finite_block(key_of(2), bf16_layout);
  const auto filler = finite_block(key_of(9), bf16_layout);
  {
    auto s = open_store(exact_opts);
    ASSERT_TRUE(s);
    ASSERT_FALSE(s->put(key_of(0), b0));
    ASSERT_FALSE(s->put(key_of(2), b2));
    ASSERT_FALSE(s->put(key_of(9), filler));
  }
  {
    auto s = open_store(int8_opts);
    ASSERT_TRUE(s);
    EXPECT_FALSE(s->contains(key_of(0)));
    EXPECT_FALSE(s->get(key_of(0))) << "an int8 store served an exact store's block";
    EXPECT_EQ(s->lookup(test_ns, std::vector{key_of(0).hash}).blocks(), 0u);
    ASSERT_FALSE(s->put(key_of(1), b1));
    ASSERT_FALSE(s->put(key_of(2), b2));
    ASSERT_FALSE(s->put(key_of(9), filler));
  }
  {
    auto s = open_store(exact_opts);
    ASSERT_TRUE(s);
    EXPECT_FALSE(s->contains(key_of(1)));
    EXPECT_FALSE(s->get(key_of(1))) << "an exact store served an int8 block";
    auto hit = s->get(key_of(2));
    ASSERT_TRUE(hit);
    EXPECT_EQ(hit->tier, kv_tier::disk);
    EXPECT_EQ(*hit->block.payload, *b2.payload) << "the exact copy, bit for bit";
    EXPECT_EQ(s->stats().decode_failures, 0u);
  }
  auto s = open_store(int8_opts);
  ASSERT_TRUE(s);
  for (auto [i, b] : {std::pair{1, &b1}, std::pair{2, &b2}}) {
    auto hit = s->get(key_of(i));
    ASSERT_TRUE(hit) << i;
    EXPECT_EQ(hit->tier, kv_tier::disk);
    EXPECT_TRUE(within_int8_bound(*b, hit->block)) << i;
    EXPECT_NE(*hit->block.payload, *b->payload) << i << ": the int8 copy";
  }
  EXPECT_FALSE(s->get(key_of(0)));
}

TEST(Int8TiersTest, CorruptQuantizedBytesAreACountedMiss) {
  // In host memory: a flipped byte of the scales or of the values.
  for (size_t offset : {size_t{1}, size_t{4096}}) {
    auto s = open_store(int8_options(4 * exact_host_charge));
    ASSERT_TRUE(s);
    ASSERT_FALSE(s->put(key_of(0), finite_block(key_of(0), bf16_layout)));
    ASSERT_TRUE(s->host().corrupt_for_testing(s->tier_key(key_of(0)), offset));
    EXPECT_FALSE(s->get(key_of(0))) << offset;
    EXPECT_EQ(s->stats().host.checksum_failures, 1u);
  }
  // On disk: the value's payload changed behind the store's back.
  test::temp_dir dir{"tessera-kvstore"};
  const auto o = with_disk(int8_options(int8_host_charge + 64), dir.path(), 1 << 24);
  block_key held{};
  {
    auto s = open_store(o);
    ASSERT_TRUE(s);
    ASSERT_FALSE(s->put(key_of(0), finite_block(key_of(0), bf16_layout)));
    ASSERT_FALSE(s->put(key_of(1), finite_block(key_of(1), bf16_layout))); // spills 0
    held = s->tier_key(key_of(0));
  }
  auto q = encode_int8_block(finite_block(key_of(0), bf16_layout));
  ASSERT_TRUE(q);
  auto value = disk_codec::encode_value(held, *q);
  value[disk_codec::header_bytes + 100] ^= 0x10;
  raw_put(dir.path(), held, value);
  auto s = open_store(o);
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->contains(key_of(0)));
  EXPECT_FALSE(s->get(key_of(0)));
  EXPECT_EQ(s->stats().disk.checksum_failures, 1u);
  EXPECT_FALSE(s->contains(key_of(0))) << "a corrupt block is dropped";
}

TEST(Int8TiersTest, BlocksTheQuantizerRefusesAreKeptExactAndCounted) {
  auto s = open_store(int8_options(4 * exact_host_charge));
  ASSERT_TRUE(s);
  const auto l = model_layout(engine::dtype::f32);
  auto bytes = *finite_block(key_of(0), l).payload;
  engine::store_from_f32(bytes.data(), l.kv_dtype, 77, std::numeric_limits<float>::infinity());
  const auto inf_block = make_block(l, l.block_tokens, bytes);
  ASSERT_FALSE(s->put(key_of(0), inf_block));
  auto hit = s->get(key_of(0));
  ASSERT_TRUE(hit);
  EXPECT_EQ(*hit->block.payload, *inf_block.payload);
  EXPECT_EQ(hit->block.meta, inf_block.meta);
  EXPECT_EQ(s->stats().int8_refused, 1u);
  EXPECT_EQ(s->stats().int8_blocks, 0u);
}

TEST(Int8TiersTest, PutTakesExactBlocksOnly) {
  auto s = open_store(int8_options(4 * exact_host_charge));
  ASSERT_TRUE(s);
  auto q = encode_int8_block(finite_block(key_of(0), bf16_layout));
  ASSERT_TRUE(q);
  auto err = s->put(key_of(0), *q);
  EXPECT_TRUE(err == kvstore_errc::bad_block) << error_text(err);
  EXPECT_NE(error_text(err).find("exact"), std::string::npos) << error_text(err);
}

} // namespace
} // namespace tessera::kvstore
