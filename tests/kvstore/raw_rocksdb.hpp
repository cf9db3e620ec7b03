#pragma once
/// @file
/// Writing a disk tier's RocksDB directly, past the tier's own checks, for
/// tests of what the tier does with values it did not write (torn, corrupt,
/// from another codec).

#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include "kvstore/disk_codec.hpp"

namespace tessera::test {

/// Writes `value` under `key` in the "blocks" family, straight through RocksDB.
inline void raw_put(const std::filesystem::path& dir, const kvstore::block_key& key, const std::string& value) {
  using kvstore::disk_codec::blocks_cf;
  using kvstore::disk_codec::order_cf;
  std::vector<rocksdb::ColumnFamilyDescriptor> cfs{
      {rocksdb::kDefaultColumnFamilyName, {}}, {std::string{blocks_cf}, {}}, {std::string{order_cf}, {}}};
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  auto s = rocksdb::DB::Open(rocksdb::DBOptions{}, dir.string(), cfs, &handles, &db);
  ASSERT_TRUE(s.ok()) << s.ToString();
  s = db->Put(rocksdb::WriteOptions{}, handles[1], kvstore::disk_codec::encode_key(key), value);
  EXPECT_TRUE(s.ok()) << s.ToString();
  for (auto* h : handles)
    (void)db->DestroyColumnFamilyHandle(h);
  delete db;
}

} // namespace tessera::test
