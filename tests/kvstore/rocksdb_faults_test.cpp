#include <gtest/gtest.h>

#include "common/error.hpp"
#include "kvstore/rocksdb_tier.hpp"
#include "kvstore/tiered_block_store.hpp"
#include "tests/kvstore/fault_fs.hpp"
#include "tests/kvstore/kv_test_blocks.hpp"
#include "tests/support/temp_dir.hpp"

namespace tessera::kvstore {
namespace {

using namespace std::chrono_literals;
using test::block_for;
using test::is_block_for;
using test::key_of;
using put_status = rocksdb_tier::put_status;

struct faulty_tier {
  test::temp_dir dir{"tessera-kvstore"};
  std::shared_ptr<test::fault_fs> fs = std::make_shared<test::fault_fs>();
  rocksdb_tier_options opts;
  std::unique_ptr<rocksdb_tier> tier;

  faulty_tier() {
    opts.dir = dir.path();
    opts.capacity_bytes = 1 << 20;
    opts.min_blob_size = 256;
    opts.env = test::fault_fs::env_for(fs);
    auto t = rocksdb_tier::open(opts);
    EXPECT_TRUE(t) << error_text(t.error());
    if (t)
      tier = std::move(*t);
  }
};

TEST(RocksdbFaultsTest, ReadErrorsAreCountedMissesAndTheBlockIsKept) {
  faulty_tier f;
  ASSERT_TRUE(f.tier);
  for (uint64_t i = 0; i < 3; ++i)
    ASSERT_EQ(f.tier->put(key_of(i), block_for(key_of(i))), put_status::stored);
  ASSERT_FALSE(f.tier->flush()) << "reads must go to the files, not the memtable";
  f.fs->fail_reads = true;
  EXPECT_FALSE(f.tier->get(key_of(1)));
  EXPECT_FALSE(f.tier->get(key_of(2)));
  auto s = f.tier->stats();
  EXPECT_GT(f.fs->injected.load(), 0u);
  EXPECT_EQ(s.io_errors, 2u);
  EXPECT_EQ(s.misses, 2u);
  EXPECT_EQ(s.checksum_failures, 0u);
  EXPECT_TRUE(f.tier->contains(key_of(1))) << "an I/O error may pass: the block stays";
  f.fs->fail_reads = false;
  auto b = f.tier->get(key_of(1));
  ASSERT_TRUE(b);
  EXPECT_TRUE(is_block_for(key_of(1), *b));
}

TEST(RocksdbFaultsTest, WriteErrorsChangeNothingAndTheTierRecovers) {
  faulty_tier f;
  ASSERT_TRUE(f.tier);
  ASSERT_EQ(f.tier->put(key_of(0), block_for(key_of(0))), put_status::stored);
  f.fs->fail_writes = true;
  EXPECT_EQ(f.tier->put(key_of(1), block_for(key_of(1))), put_status::io_error);
  EXPECT_EQ(f.tier->put(key_of(2), block_for(key_of(2))), put_status::io_error);
  EXPECT_FALSE(f.tier->contains(key_of(1)));
  EXPECT_FALSE(f.tier->get(key_of(1)));
  auto s = f.tier->stats();
  EXPECT_EQ(s.io_errors, 2u);
  EXPECT_EQ(s.blocks, 1u);
  EXPECT_EQ(s.used_bytes, rocksdb_tier::charge(block_for(key_of(0))));
  auto err = f.tier->flush();
  EXPECT_TRUE(err) << "a flush under write faults fails";
  EXPECT_NE(error_text(err).find(f.dir.path().string()), std::string::npos) << error_text(err);
  f.fs->fail_writes = false;
  EXPECT_EQ(f.tier->put(key_of(1), block_for(key_of(1))), put_status::stored);
  auto b = f.tier->get(key_of(1));
  ASSERT_TRUE(b);
  EXPECT_TRUE(is_block_for(key_of(1), *b));
  b = f.tier->get(key_of(0));
  ASSERT_TRUE(b);
  EXPECT_TRUE(is_block_for(key_of(0), *b));
  EXPECT_FALSE(f.tier->flush()) << "flushes work again";
  b = f.tier->get(key_of(0));
  ASSERT_TRUE(b);
  EXPECT_TRUE(is_block_for(key_of(0), *b));
}

TEST(RocksdbFaultsTest, WhileTheDatabaseCannotReopenReadsAreMisses) {
  faulty_tier f;
  ASSERT_TRUE(f.tier);
  ASSERT_EQ(f.tier->put(key_of(0), block_for(key_of(0))), put_status::stored);
  f.fs->fail_writes = true;
  EXPECT_TRUE(f.tier->flush()) << "RocksDB treats this as fatal: the tier must reopen";
  // The reopen fails too (it cannot write a new MANIFEST): the tier is down.
  EXPECT_EQ(f.tier->put(key_of(1), block_for(key_of(1))), put_status::io_error);
  EXPECT_FALSE(f.tier->get(key_of(0)));
  EXPECT_FALSE(f.tier->get(key_of(0)));
  auto s = f.tier->stats();
  EXPECT_GE(s.io_errors, 4u);
  EXPECT_EQ(s.hits, 0u);
  f.fs->fail_writes = false;
  EXPECT_EQ(f.tier->put(key_of(1), block_for(key_of(1))), put_status::stored);
  for (uint64_t i : {0, 1}) {
    auto b = f.tier->get(key_of(i));
    ASSERT_TRUE(b) << i;
    EXPECT_TRUE(is_block_for(key_of(i), *b));
  }
  EXPECT_EQ(f.tier->keys_oldest_first(), (std::vector{key_of(0), key_of(1)}));
}

TEST(RocksdbFaultsTest, WarmRestartAfterWriteFaultsServesWhatWasStored) {
  faulty_tier f;
  ASSERT_TRUE(f.tier);
  ASSERT_EQ(f.tier->put(key_of(0), block_for(key_of(0))), put_status::stored);
  f.fs->fail_writes = true;
  EXPECT_EQ(f.tier->put(key_of(1), block_for(key_of(1))), put_status::io_error);
  f.fs->fail_writes = false;
  ASSERT_EQ(f.tier->put(key_of(2), block_for(key_of(2))), put_status::stored);
  f.tier.reset();
  auto t = rocksdb_tier::open(f.opts);
  ASSERT_TRUE(t) << error_text(t.error());
  EXPECT_EQ((*t)->keys_oldest_first(), (std::vector{key_of(0), key_of(2)}));
  for (uint64_t i : {0, 2}) {
    auto b = (*t)->get(key_of(i));
    ASSERT_TRUE(b) << i;
    EXPECT_TRUE(is_block_for(key_of(i), *b));
  }
}

TEST(RocksdbFaultsTest, TieredStoreCountsFailedSpillsAndFailedReads) {
  auto fs = std::make_shared<test::fault_fs>();
  test::temp_dir dir{"tessera-kvstore"};
  tiered_store_options o;
  o.host_capacity_bytes = 2 * host_tier::charge(block_for(key_of(0)));
  o.disk = rocksdb_tier_options{};
  o.disk->dir = dir.path();
  o.disk->min_blob_size = 256;
  o.disk->env = test::fault_fs::env_for(fs);
  auto opened = tiered_block_store::open(o);
  ASSERT_TRUE(opened) << error_text(opened.error());
  auto& store = **opened;

  // Spills under write faults fail: the evicted blocks are gone, counted.
  fs->fail_writes = true;
  for (uint64_t i = 0; i < 4; ++i)
    ASSERT_FALSE(store.put(key_of(i), block_for(key_of(i))));
  ASSERT_TRUE(store.wait_spilled(10s));
  auto s = store.stats();
  EXPECT_EQ(s.spill_failures, 2u);
  EXPECT_EQ(s.spills, 0u);
  EXPECT_EQ(s.disk.io_errors, 2u);
  EXPECT_FALSE(store.get(key_of(0)));
  EXPECT_EQ(store.lookup(test::test_ns, std::vector{key_of(0).hash, key_of(1).hash}).blocks(), 0u);

  // Without faults, spills land; with read faults, disk hits turn to misses.
  fs->fail_writes = false;
  for (uint64_t i = 4; i < 8; ++i)
    ASSERT_FALSE(store.put(key_of(i), block_for(key_of(i))));
  ASSERT_TRUE(store.wait_spilled(10s));
  ASSERT_FALSE(store.disk()->flush());
  ASSERT_TRUE(store.disk()->contains(key_of(2)));
  fs->fail_reads = true;
  EXPECT_FALSE(store.get(key_of(2)));
  auto m = store.lookup(test::test_ns, std::vector{key_of(6).hash, key_of(7).hash, key_of(4).hash});
  EXPECT_EQ(m.tiers, (std::vector{kv_tier::host, kv_tier::host})) << "the disk block failed to read";
  s = store.stats();
  EXPECT_EQ(s.disk.io_errors, 4u);
  EXPECT_EQ(s.promotions, 0u);
  fs->fail_reads = false;
  auto b = store.get(key_of(2));
  ASSERT_TRUE(b);
  EXPECT_EQ(b->tier, kv_tier::disk);
  EXPECT_TRUE(is_block_for(key_of(2), b->block));
}

} // namespace
} // namespace tessera::kvstore
