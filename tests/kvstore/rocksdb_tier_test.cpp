#include "kvstore/rocksdb_tier.hpp"

#include <algorithm>
#include <fstream>
#include <functional>
#include <random>

#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include "common/error.hpp"
#include "kvstore/disk_codec.hpp"
#include "kvstore/kvstore_errc.hpp"
#include "tests/kvstore/kv_test_blocks.hpp"
#include "tests/kvstore/raw_rocksdb.hpp"
#include "tests/support/temp_dir.hpp"

namespace tessera::kvstore {
namespace {

using test::block_for;
using test::is_block_for;
using test::key_of;
using test::raw_put;
using put_status = rocksdb_tier::put_status;

uint64_t disk_room_for(size_t n) { return n * rocksdb_tier::charge(block_for(key_of(0))); }

rocksdb_tier_options options_for(const std::filesystem::path& dir, uint64_t capacity) {
  rocksdb_tier_options o;
  o.dir = dir;
  o.capacity_bytes = capacity;
  o.min_blob_size = 256; // the test blocks (512 B + header) go to blob files
  return o;
}

std::unique_ptr<rocksdb_tier> open_tier(const rocksdb_tier_options& o, event_log* log = nullptr) {
  auto t = rocksdb_tier::open(o, log);
  EXPECT_TRUE(t) << error_text(t.error());
  return t ? std::move(*t) : nullptr;
}

TEST(RocksdbTierTest, StoresAndReadsBackFromMemtableAndFiles) {
  test::temp_dir dir{"tessera-kvstore"};
  auto t = open_tier(options_for(dir.path(), disk_room_for(8)));
  ASSERT_TRUE(t);
  for (uint64_t i = 0; i < 4; ++i)
    EXPECT_EQ(t->put(key_of(i), block_for(key_of(i))), put_status::stored);
  EXPECT_EQ(t->put(key_of(1), block_for(key_of(1))), put_status::already_present);
  auto b = t->get(key_of(2));
  ASSERT_TRUE(b);
  EXPECT_TRUE(is_block_for(key_of(2), *b));
  ASSERT_FALSE(t->flush());
  for (uint64_t i = 0; i < 4; ++i) {
    auto r = t->get(key_of(i));
    ASSERT_TRUE(r) << i;
    EXPECT_TRUE(is_block_for(key_of(i), *r));
  }
  EXPECT_FALSE(t->get(key_of(9)));
  auto s = t->stats();
  EXPECT_EQ(s.hits, 5u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.blocks, 4u);
  EXPECT_EQ(s.used_bytes, disk_room_for(4));
}

TEST(RocksdbTierTest, KeepsValuesInBlobFiles) {
  test::temp_dir dir{"tessera-kvstore"};
  auto t = open_tier(options_for(dir.path(), disk_room_for(8)));
  ASSERT_TRUE(t);
  ASSERT_EQ(t->put(key_of(1), block_for(key_of(1))), put_status::stored);
  ASSERT_FALSE(t->flush());
  size_t blob_files = 0;
  for (const auto& e : std::filesystem::directory_iterator{dir.path()})
    blob_files += e.path().extension() == ".blob" ? 1 : 0;
  EXPECT_GE(blob_files, 1u) << "BlobDB is not enabled";
}

TEST(RocksdbTierTest, EvictsOldestFirstAtCapacity) {
  test::temp_dir dir{"tessera-kvstore"};
  event_log log;
  log.set_recording(true);
  auto t = open_tier(options_for(dir.path(), disk_room_for(3)), &log);
  ASSERT_TRUE(t);
  for (uint64_t i = 0; i < 3; ++i)
    ASSERT_EQ(t->put(key_of(i), block_for(key_of(i))), put_status::stored);
  // Reading block 0 does not save it: the order is insertion, not use.
  ASSERT_TRUE(t->get(key_of(0)));
  ASSERT_EQ(t->put(key_of(3), block_for(key_of(3))), put_status::stored);
  EXPECT_FALSE(t->contains(key_of(0)));
  EXPECT_FALSE(t->get(key_of(0)));
  EXPECT_EQ(t->keys_oldest_first(), (std::vector{key_of(1), key_of(2), key_of(3)}));
  EXPECT_EQ(t->stats().evictions, 1u);
  EXPECT_LE(t->used_bytes(), t->capacity_bytes());
  auto ev = log.drain();
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[1].what, store_event::kind::removed);
  EXPECT_EQ(ev[1].tier, kv_tier::disk);
  EXPECT_EQ(ev[1].hashes, std::vector{key_of(0).hash});
}

TEST(RocksdbTierTest, RefusesABlockLargerThanItsCapacity) {
  test::temp_dir dir{"tessera-kvstore"};
  auto t = open_tier(options_for(dir.path(), disk_room_for(1)));
  ASSERT_TRUE(t);
  ASSERT_EQ(t->put(key_of(1), block_for(key_of(1))), put_status::stored);
  EXPECT_EQ(t->put(key_of(2), block_for(key_of(2), test::small_layout(16))), put_status::too_large);
  EXPECT_TRUE(t->contains(key_of(1))) << "nothing evicted for a block that cannot fit";
}

TEST(RocksdbTierTest, CapacityIsNeverExceededInARandomSequence) {
  test::temp_dir dir{"tessera-kvstore"};
  const uint64_t capacity = 30'000;
  auto t = open_tier(options_for(dir.path(), capacity));
  ASSERT_TRUE(t);
  std::mt19937_64 rng{7};
  std::vector<int32_t> head_dims{1, 4, 8, 16, 32};
  for (int op = 0; op < 600; ++op) {
    auto k = key_of(rng() % 100);
    if (rng() % 2) {
      auto l = test::small_layout(head_dims[k.hash.lo % head_dims.size()]);
      (void)t->put(k, block_for(k, l));
    } else if (auto b = t->get(k)) {
      EXPECT_TRUE(is_block_for(k, *b));
    }
    ASSERT_LE(t->used_bytes(), capacity) << "after op " << op;
  }
}

TEST(RocksdbTierTest, WarmRestartServesBlocksAndKeepsTheOrder) {
  test::temp_dir dir{"tessera-kvstore"};
  auto opts = options_for(dir.path(), disk_room_for(4));
  {
    auto t = open_tier(opts);
    ASSERT_TRUE(t);
    for (uint64_t i = 0; i < 6; ++i) // 0 and 1 are evicted
      ASSERT_EQ(t->put(key_of(i), block_for(key_of(i))), put_status::stored);
  }
  auto t = open_tier(opts);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->keys_oldest_first(), (std::vector{key_of(2), key_of(3), key_of(4), key_of(5)}));
  EXPECT_EQ(t->used_bytes(), disk_room_for(4));
  for (uint64_t i = 2; i < 6; ++i) {
    auto b = t->get(key_of(i));
    ASSERT_TRUE(b) << i;
    EXPECT_TRUE(is_block_for(key_of(i), *b));
  }
  EXPECT_FALSE(t->get(key_of(0)));
  // New blocks go after the old ones: the oldest from before the restart
  // goes first.
  ASSERT_EQ(t->put(key_of(6), block_for(key_of(6))), put_status::stored);
  EXPECT_FALSE(t->contains(key_of(2)));
  EXPECT_EQ(t->keys_oldest_first(), (std::vector{key_of(3), key_of(4), key_of(5), key_of(6)}));
}

TEST(RocksdbTierTest, ReopeningSmallerEvictsOldest) {
  test::temp_dir dir{"tessera-kvstore"};
  {
    auto t = open_tier(options_for(dir.path(), disk_room_for(4)));
    ASSERT_TRUE(t);
    for (uint64_t i = 0; i < 4; ++i)
      ASSERT_EQ(t->put(key_of(i), block_for(key_of(i))), put_status::stored);
  }
  {
    auto t = open_tier(options_for(dir.path(), disk_room_for(2)));
    ASSERT_TRUE(t);
    EXPECT_EQ(t->keys_oldest_first(), (std::vector{key_of(2), key_of(3)}));
    EXPECT_EQ(t->stats().evictions, 2u);
  }
  auto t = open_tier(options_for(dir.path(), disk_room_for(4)));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->keys_oldest_first(), (std::vector{key_of(2), key_of(3)})) << "the eviction persisted";
  EXPECT_FALSE(t->get(key_of(0)));
}

// Flips a bit of byte `i` of `v`. (Out of line: GCC 12 warns falsely about
// the same code written in a lambda returning the string.)
[[gnu::noinline]] void flip_bit(std::string& v, size_t i) {
  ASSERT_LT(i, v.size());
  v[i] = static_cast<char>(v[i] ^ 0x40);
}

// Rewrites block `k`'s value with `value` behind the tier's back, reopens,
// and checks the read is a counted miss and the block is dropped.
void expect_refused(const std::string& what, const block_key& k,
                    const std::function<std::string(std::string)>& damage) {
  SCOPED_TRACE(what);
  test::temp_dir dir{"tessera-kvstore"};
  auto opts = options_for(dir.path(), disk_room_for(4));
  {
    auto t = open_tier(opts);
    ASSERT_TRUE(t);
    ASSERT_EQ(t->put(k, block_for(k)), put_status::stored);
    ASSERT_EQ(t->put(key_of(50), block_for(key_of(50))), put_status::stored);
  }
  raw_put(dir.path(), k, damage(disk_codec::encode_value(k, block_for(k))));
  auto t = open_tier(opts);
  ASSERT_TRUE(t);
  ASSERT_TRUE(t->contains(k));
  EXPECT_FALSE(t->get(k));
  auto s = t->stats();
  EXPECT_EQ(s.checksum_failures, 1u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_FALSE(t->contains(k)) << "a corrupt block is dropped";
  EXPECT_EQ(t->used_bytes(), disk_room_for(1));
  EXPECT_FALSE(t->get(k));
  EXPECT_EQ(t->stats().checksum_failures, 1u) << "counted once: it is gone";
  EXPECT_TRUE(t->get(key_of(50))) << "the other block is untouched";
}

TEST(RocksdbTierTest, CorruptPayloadIsAMissAndDropped) {
  expect_refused("flipped payload byte", key_of(1), [](std::string v) {
    flip_bit(v, disk_codec::header_bytes + 100);
    return v;
  });
}

TEST(RocksdbTierTest, TornValueIsNeverServed) {
  expect_refused("half a value", key_of(1), [](std::string v) { return v.substr(0, v.size() / 2); });
  expect_refused("header only", key_of(1),
                 [](std::string v) { return v.substr(0, disk_codec::header_bytes); });
  expect_refused("empty", key_of(1), [](std::string) { return std::string{}; });
  expect_refused("zeroed tail", key_of(1), [](std::string v) {
    if (v.size() > 64)
      v.replace(v.size() - 64, 64, 64, '\0');
    return v;
  });
}

TEST(RocksdbTierTest, ValueOfAnotherKeyIsRefused) {
  expect_refused("value of key 2 under key 1", key_of(1),
                 [](std::string) { return disk_codec::encode_value(key_of(2), block_for(key_of(2))); });
}

TEST(RocksdbTierTest, OpenFailsOnAFileNamingThePath) {
  test::temp_dir dir{"tessera-kvstore"};
  auto file = dir.path() / "not-a-dir";
  std::ofstream{file} << "x";
  auto t = rocksdb_tier::open(options_for(file, 1 << 20));
  ASSERT_FALSE(t);
  EXPECT_TRUE(t.error() == kvstore_errc::open_failed);
  EXPECT_NE(error_text(t.error()).find(file.string()), std::string::npos) << error_text(t.error());
  auto below = rocksdb_tier::open(options_for(file / "sub", 1 << 20));
  ASSERT_FALSE(below);
  EXPECT_NE(error_text(below.error()).find("cannot create directory"), std::string::npos)
      << error_text(below.error());
}

TEST(RocksdbTierTest, OpenFailsWhileAnotherStoreHoldsTheDirectory) {
  test::temp_dir dir{"tessera-kvstore"};
  auto first = open_tier(options_for(dir.path(), 1 << 20));
  ASSERT_TRUE(first);
  auto second = rocksdb_tier::open(options_for(dir.path(), 1 << 20));
  ASSERT_FALSE(second);
  EXPECT_TRUE(second.error() == kvstore_errc::open_failed);
  auto text = error_text(second.error());
  EXPECT_NE(text.find(dir.path().string()), std::string::npos) << text;
  EXPECT_NE(text.find("lock"), std::string::npos) << text;
}

TEST(RocksdbTierTest, RefusesBadOptions) {
  test::temp_dir dir{"tessera-kvstore"};
  auto zero = rocksdb_tier::open(options_for(dir.path(), 0));
  ASSERT_FALSE(zero);
  EXPECT_TRUE(zero.error() == kvstore_errc::bad_config);
  EXPECT_NE(error_text(zero.error()).find("capacity_bytes"), std::string::npos);
  EXPECT_FALSE(rocksdb_tier::open(options_for({}, 1 << 20)));
  auto o = options_for(dir.path(), 1 << 20);
  o.blob_garbage_collection_age_cutoff = 2.0;
  EXPECT_FALSE(rocksdb_tier::open(o));
}

} // namespace
} // namespace tessera::kvstore
