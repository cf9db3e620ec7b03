#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "common/error.hpp"
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

// Several threads put, get and look up overlapping keys while the spill
// thread writes and an observer drains events and reads stats. Every block
// a read returns must be exactly the block stored under its key, and the
// capacities must hold throughout. Run under ThreadSanitizer (tsan preset).
TEST(TieredConcurrencyTest, ConcurrentReadersAndWritersSeeOnlyCorrectBytes) {
  test::temp_dir dir{"tessera-kvstore"};
  tiered_store_options o;
  o.host_capacity_bytes = 24 * host_tier::charge(block_for(key_of(0)));
  o.disk = rocksdb_tier_options{};
  o.disk->dir = dir.path();
  o.disk->capacity_bytes = 96 * rocksdb_tier::charge(block_for(key_of(0)));
  o.disk->min_blob_size = 256;
  o.spill_queue_blocks = 8;
  o.spill_wait = 1ms;
  auto opened = tiered_block_store::open(o);
  ASSERT_TRUE(opened) << error_text(opened.error());
  auto& store = **opened;
  store.record_events(true);

  constexpr uint64_t keys = 200;
  constexpr int ops_per_thread = 1500;
  std::atomic<int> wrong{0};
  std::atomic<int> bound_broken{0};
  std::atomic<uint64_t> hits{0};
  std::atomic<bool> done{false};

  auto worker = [&](uint64_t seed, bool writer) {
    std::mt19937_64 rng{seed};
    for (int i = 0; i < ops_per_thread; ++i) {
      auto k = key_of(rng() % keys);
      auto r = rng() % 4;
      if (writer && r < 2) {
        if (store.put(k, block_for(k)))
          ++wrong;
      } else if (r < 3) {
        if (auto hit = store.get(k)) {
          ++hits;
          if (!is_block_for(k, hit->block))
            ++wrong;
        }
      } else {
        // A chain of consecutive ids, as a request's prefix would be.
        std::vector<engine::kv_block_hash> c;
        uint64_t first = rng() % keys;
        for (uint64_t j = 0; j < 6; ++j)
          c.push_back(key_of((first + j) % keys).hash);
        auto m = store.lookup(test::test_ns, c, rng() % 2 ? lookup_mode::promote : lookup_mode::probe);
        if (m.blocks() > c.size())
          ++wrong;
      }
    }
  };
  auto observer = [&] {
    while (!done.load()) {
      auto ev = store.drain_events();
      auto s = store.stats();
      if (s.host.used_bytes > o.host_capacity_bytes || s.disk.used_bytes > o.disk->capacity_bytes)
        ++bound_broken;
      std::this_thread::yield();
    }
  };

  std::thread obs{observer};
  std::vector<std::thread> threads;
  for (uint64_t t = 0; t < 4; ++t)
    threads.emplace_back(worker, t + 1, t < 2);
  for (auto& t : threads)
    t.join();
  done = true;
  obs.join();
  ASSERT_TRUE(store.wait_spilled(30s));

  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(bound_broken.load(), 0);
  auto s = store.stats();
  EXPECT_GT(hits.load(), 0u);
  EXPECT_GT(s.spills, 0u) << "the spill thread should have run";
  EXPECT_GT(s.host.evictions, 0u);
  EXPECT_EQ(s.host.checksum_failures + s.disk.checksum_failures, 0u);
  EXPECT_EQ(s.disk.io_errors, 0u);
  EXPECT_LE(s.host.used_bytes, o.host_capacity_bytes);
  EXPECT_LE(s.disk.used_bytes, o.disk->capacity_bytes);
}

// Write faults come and go while threads put and get: each fault makes
// RocksDB fail a flush (fatal to it), so the disk tier reopens under load.
// Reads may miss, never return wrong bytes; the tier comes back.
TEST(TieredConcurrencyTest, DiskTierReopensUnderLoadWithoutServingWrongBytes) {
  test::temp_dir dir{"tessera-kvstore"};
  auto fs = std::make_shared<test::fault_fs>();
  tiered_store_options o;
  o.host_capacity_bytes = 8 * host_tier::charge(block_for(key_of(0)));
  o.disk = rocksdb_tier_options{};
  o.disk->dir = dir.path();
  o.disk->capacity_bytes = 64 * rocksdb_tier::charge(block_for(key_of(0)));
  o.disk->min_blob_size = 256;
  o.disk->env = test::fault_fs::env_for(fs);
  o.spill_wait = 1ms;
  auto opened = tiered_block_store::open(o);
  ASSERT_TRUE(opened) << error_text(opened.error());
  auto& store = **opened;

  std::atomic<int> wrong{0};
  std::atomic<bool> done{false};
  auto worker = [&](uint64_t seed) {
    std::mt19937_64 rng{seed};
    for (int i = 0; i < 1500; ++i) {
      auto k = key_of(rng() % 100);
      if (rng() % 2) {
        if (store.put(k, block_for(k)))
          ++wrong;
      } else if (auto hit = store.get(k); hit && !is_block_for(k, hit->block)) {
        ++wrong;
      }
    }
  };
  std::atomic<int> rounds{0};
  std::thread faults{[&] {
    for (uint64_t n = 1000; !done.load() || rounds.load() < 3; ++n) {
      // Something in the memtable, so the flush below has files to write.
      (void)store.disk()->put(key_of(n), block_for(key_of(n)));
      fs->fail_writes = true;
      (void)store.disk()->flush();
      // Resume and reopen both fail while the fault lasts: the tier is down.
      (void)store.disk()->put(key_of(n + 5000), block_for(key_of(n + 5000)));
      fs->fail_writes = false;
      ++rounds;
      for (int i = 0; i < 50 && !done.load(); ++i)
        std::this_thread::yield();
    }
  }};
  std::thread a{worker, 11}, b{worker, 12};
  a.join();
  b.join();
  done = true;
  faults.join();
  fs->fail_writes = false;
  ASSERT_TRUE(store.wait_spilled(30s));

  EXPECT_EQ(wrong.load(), 0);
  EXPECT_GT(fs->injected.load(), 0u);
  EXPECT_GE(store.stats().disk.io_errors, 3u);
  // The tier works again: a spilled block can be written and read back.
  for (uint64_t i = 200; i < 220; ++i)
    ASSERT_FALSE(store.put(key_of(i), block_for(key_of(i))));
  ASSERT_TRUE(store.wait_spilled(30s));
  ASSERT_TRUE(store.disk()->contains(key_of(200)));
  auto hit = store.get(key_of(200));
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->tier, kv_tier::disk);
  EXPECT_TRUE(is_block_for(key_of(200), hit->block));
}

} // namespace
} // namespace tessera::kvstore
