// The disk tier's format: blocks are named by 128-bit keyed hashes (format
// 2). A store an older build wrote (format 1: 64-bit hashes, 17-byte keys)
// is never misread: opening it fails, and open_disk_tier resets it (moved
// aside, started cold) and says why.

#include "kvstore/disk_recovery.hpp"

#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include "common/error.hpp"
#include "kvstore/disk_codec.hpp"
#include "tests/kvstore/kv_test_blocks.hpp"
#include "tests/support/temp_dir.hpp"

namespace tessera::kvstore {
namespace {

namespace fs = std::filesystem;
using outcome = disk_open_report::outcome;
using test::block_for;
using test::is_block_for;
using test::key_of;

rocksdb_tier_options options_for(const fs::path& dir) {
  rocksdb_tier_options o;
  o.dir = dir;
  o.capacity_bytes = 1 << 20;
  return o;
}

// Writes raw entries straight through RocksDB: `format` (empty: none) in
// the default family, and (block key, order value) pairs as given.
void write_raw(const fs::path& dir, const std::string& format,
               const std::vector<std::pair<std::string, std::string>>& blocks,
               const std::vector<std::pair<std::string, std::string>>& order) {
  std::vector<rocksdb::ColumnFamilyDescriptor> cfs{{rocksdb::kDefaultColumnFamilyName, {}},
                                                   {std::string{disk_codec::blocks_cf}, {}},
                                                   {std::string{disk_codec::order_cf}, {}}};
  rocksdb::DBOptions o;
  o.create_if_missing = true;
  o.create_missing_column_families = true;
  std::vector<rocksdb::ColumnFamilyHandle*> h;
  rocksdb::DB* db = nullptr;
  auto s = rocksdb::DB::Open(o, dir.string(), cfs, &h, &db);
  ASSERT_TRUE(s.ok()) << s.ToString();
  if (!format.empty())
    EXPECT_TRUE(db->Put({}, h[0], std::string{disk_codec::format_key}, format).ok());
  for (const auto& [k, v] : blocks)
    EXPECT_TRUE(db->Put({}, h[1], k, v).ok());
  for (const auto& [k, v] : order)
    EXPECT_TRUE(db->Put({}, h[2], k, v).ok());
  for (auto* c : h)
    (void)db->DestroyColumnFamilyHandle(c);
  delete db;
}

// A block as format 1 stored it: u8 1 | be64 ns | be64 hash (17 bytes),
// and its order entry (25 bytes).
void write_format1_store(const fs::path& dir) {
  std::string key(17, '\0'), order_value(25, '\0');
  key[0] = order_value[0] = 1;
  for (int i = 1; i < 17; ++i)
    key[i] = order_value[i] = static_cast<char>(i);
  order_value[17] = 64; // charged bytes
  write_raw(dir, "", {{key, std::string(72, 'x')}}, {{disk_codec::encode_order_key(1), order_value}});
}

TEST(DiskFormatTest, AStoreOfTheOldFormatIsResetAndSaysWhy) {
  tessera::test::temp_dir tmp;
  const auto dir = tmp.path() / "disk";
  write_format1_store(dir);
  auto r = open_disk_tier(options_for(dir), nullptr);
  ASSERT_TRUE(r) << error_text(r.error());
  EXPECT_EQ(r->report.result, outcome::reset);
  EXPECT_NE(r->report.reason.find("format 1"), std::string::npos) << r->report.reason;
  EXPECT_NE(r->report.reason.find("64-bit"), std::string::npos) << r->report.reason;
  EXPECT_TRUE(fs::exists(r->report.moved_to)) << "the old store is kept aside, not deleted";
  ASSERT_TRUE(r->tier);
  // The fresh tier works, and is format 2 on the next start.
  const auto k = key_of(3);
  ASSERT_EQ(r->tier->put(k, block_for(k)), rocksdb_tier::put_status::stored);
  r->tier.reset();
  auto again = open_disk_tier(options_for(dir), nullptr);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->report.result, outcome::opened) << again->report.reason;
  auto b = again->tier->get(k);
  ASSERT_TRUE(b);
  EXPECT_TRUE(is_block_for(k, *b));
}

TEST(DiskFormatTest, AnotherFormatNumberIsResetToo) {
  tessera::test::temp_dir tmp;
  const auto dir = tmp.path() / "disk";
  write_raw(dir, "3", {}, {});
  auto r = open_disk_tier(options_for(dir), nullptr);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->report.result, outcome::reset);
  EXPECT_NE(r->report.reason.find("the disk format is 3"), std::string::npos) << r->report.reason;
}

TEST(DiskFormatTest, AnEmptyStoreWithoutAFormatIsTakenAsNew) {
  tessera::test::temp_dir tmp;
  const auto dir = tmp.path() / "disk";
  write_raw(dir, "", {}, {});
  auto r = open_disk_tier(options_for(dir), nullptr);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->report.result, outcome::opened) << r->report.reason;
}

TEST(DiskFormatTest, ThisBuildsStoreReopensWithItsBlocks) {
  tessera::test::temp_dir tmp;
  const auto dir = tmp.path() / "disk";
  {
    auto t = rocksdb_tier::open(options_for(dir));
    ASSERT_TRUE(t) << error_text(t.error());
    for (uint64_t i = 0; i < 4; ++i)
      ASSERT_EQ((*t)->put(key_of(i), block_for(key_of(i))), rocksdb_tier::put_status::stored);
  }
  auto r = open_disk_tier(options_for(dir), nullptr);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->report.result, outcome::opened) << r->report.reason;
  for (uint64_t i = 0; i < 4; ++i) {
    auto b = r->tier->get(key_of(i));
    ASSERT_TRUE(b) << i;
    EXPECT_TRUE(is_block_for(key_of(i), *b));
  }
}

} // namespace
} // namespace tessera::kvstore
