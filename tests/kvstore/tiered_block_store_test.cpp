#include "kvstore/tiered_block_store.hpp"

#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "common/error.hpp"
#include "kvstore/kvstore_errc.hpp"
#include "tests/kvstore/kv_test_blocks.hpp"
#include "tests/support/temp_dir.hpp"

namespace tessera::kvstore {
namespace {

using namespace std::chrono_literals;
using test::block_for;
using test::is_block_for;
using test::key_of;
using test::test_ns;
using kind = store_event::kind;

const size_t host_block = host_tier::charge(block_for(key_of(0)));
const uint64_t disk_block = rocksdb_tier::charge(block_for(key_of(0)));

tiered_store_options options_for(const std::filesystem::path& dir, size_t host_blocks,
                                 size_t disk_blocks) {
  tiered_store_options o;
  o.host_capacity_bytes = host_blocks * host_block;
  o.disk = rocksdb_tier_options{};
  o.disk->dir = dir;
  o.disk->capacity_bytes = disk_blocks * disk_block;
  o.disk->min_blob_size = 256;
  return o;
}

std::unique_ptr<tiered_block_store> open_store(const tiered_store_options& o) {
  auto s = tiered_block_store::open(o);
  EXPECT_TRUE(s) << error_text(s.error());
  return s ? std::move(*s) : nullptr;
}

std::vector<engine::kv_block_hash> chain(std::initializer_list<uint64_t> ids) {
  std::vector<engine::kv_block_hash> out;
  for (auto i : ids)
    out.push_back(key_of(i).hash);
  return out;
}

void put_all(block_store& s, uint64_t first, uint64_t last) {
  for (uint64_t i = first; i < last; ++i)
    ASSERT_FALSE(s.put(key_of(i), block_for(key_of(i)))) << i;
}

TEST(TieredBlockStoreTest, ServesPutsFromHostMemory) {
  test::temp_dir dir{"tessera-kvstore"};
  auto s = open_store(options_for(dir.path(), 4, 8));
  ASSERT_TRUE(s);
  put_all(*s, 0, 3);
  auto hit = s->get(key_of(1));
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->tier, kv_tier::host);
  EXPECT_TRUE(is_block_for(key_of(1), hit->block));
  EXPECT_FALSE(s->get(key_of(7)));
  auto st = s->stats();
  EXPECT_EQ(st.puts, 3u);
  EXPECT_EQ(st.host.hits, 1u);
  EXPECT_EQ(st.spills, 0u);
  EXPECT_EQ(st.disk.blocks, 0u);
}

TEST(TieredBlockStoreTest, EvictedBlocksSpillToDiskAndComeBackOnRead) {
  test::temp_dir dir{"tessera-kvstore"};
  auto s = open_store(options_for(dir.path(), 2, 8));
  ASSERT_TRUE(s);
  put_all(*s, 0, 4); // 0 and 1 are evicted from host
  ASSERT_TRUE(s->wait_spilled(10s));
  auto st = s->stats();
  EXPECT_EQ(st.spills, 2u);
  EXPECT_EQ(st.disk.blocks, 2u);
  EXPECT_EQ(st.host.evictions, 2u);
  EXPECT_TRUE(s->disk()->contains(key_of(0)));
  EXPECT_FALSE(s->host().contains(key_of(0)));

  auto hit = s->get(key_of(0));
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->tier, kv_tier::disk);
  EXPECT_TRUE(is_block_for(key_of(0), hit->block));
  EXPECT_TRUE(s->host().contains(key_of(0))) << "promoted";
  hit = s->get(key_of(0));
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->tier, kv_tier::host);

  // Promoting 0 evicted 2; 0 is still on disk, so evicting it again later
  // writes nothing.
  ASSERT_TRUE(s->wait_spilled(10s));
  put_all(*s, 4, 6);
  ASSERT_TRUE(s->wait_spilled(10s));
  st = s->stats();
  EXPECT_EQ(st.promotions, 1u);
  EXPECT_GE(st.spill_skips, 1u);
  EXPECT_EQ(st.disk.hits, 1u);
  EXPECT_EQ(s->disk()->keys_oldest_first().front(), key_of(0));
}

TEST(TieredBlockStoreTest, LookupReportsTheTierOfEachBlockAndStopsAtAGap) {
  test::temp_dir dir{"tessera-kvstore"};
  auto s = open_store(options_for(dir.path(), 2, 8));
  ASSERT_TRUE(s);
  put_all(*s, 0, 4); // disk: 0 1, host: 2 3
  ASSERT_TRUE(s->wait_spilled(10s));

  auto probe = s->lookup(test_ns, chain({0, 1, 2, 3, 9, 4}), lookup_mode::probe);
  EXPECT_EQ(probe.tiers, (std::vector{kv_tier::disk, kv_tier::disk, kv_tier::host, kv_tier::host}));
  EXPECT_EQ(probe.count(kv_tier::disk), 2u);
  EXPECT_EQ(s->stats().promotions, 0u) << "a probe promotes nothing";
  EXPECT_EQ(s->stats().disk.hits, 0u) << "a probe reads nothing";

  // 9 was never stored: the match ends there even though 2 and 3 are held.
  EXPECT_EQ(s->lookup(test_ns, chain({9, 2, 3})).blocks(), 0u);
  EXPECT_EQ(s->lookup(test_ns, chain({2, 9, 3})).blocks(), 1u);
  EXPECT_EQ(s->lookup(test_ns + 1, chain({2, 3})).blocks(), 0u) << "another namespace";

  auto m = s->lookup(test_ns, chain({2, 3, 0, 9}));
  EXPECT_EQ(m.tiers, (std::vector{kv_tier::host, kv_tier::host, kv_tier::disk}));
  EXPECT_EQ(s->stats().promotions, 1u);
  EXPECT_TRUE(s->host().contains(key_of(0))) << "a promoting lookup brings the block up";
}

TEST(TieredBlockStoreTest, CorruptHostCopyFallsBackToTheDiskCopy) {
  test::temp_dir dir{"tessera-kvstore"};
  auto s = open_store(options_for(dir.path(), 2, 8));
  ASSERT_TRUE(s);
  put_all(*s, 0, 3); // 0 on disk
  ASSERT_TRUE(s->wait_spilled(10s));
  ASSERT_TRUE(s->get(key_of(0))); // promoted: host and disk both hold it
  ASSERT_TRUE(s->host().corrupt_for_testing(key_of(0), 3));
  auto hit = s->get(key_of(0));
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->tier, kv_tier::disk);
  EXPECT_TRUE(is_block_for(key_of(0), hit->block));
  EXPECT_EQ(s->stats().host.checksum_failures, 1u);

  // A block only in host memory: corruption is a plain miss.
  ASSERT_TRUE(s->host().contains(key_of(2)));
  ASSERT_TRUE(s->host().corrupt_for_testing(key_of(2), 0));
  EXPECT_FALSE(s->get(key_of(2)));
  EXPECT_EQ(s->stats().host.checksum_failures, 2u);
}

TEST(TieredBlockStoreTest, FullSpillQueueDropsAfterTheWaitBound) {
  test::temp_dir dir{"tessera-kvstore"};
  auto o = options_for(dir.path(), 2, 16);
  o.spill_queue_blocks = 2;
  o.spill_wait = 0ms;
  auto s = open_store(o);
  ASSERT_TRUE(s);
  s->set_spill_paused(true);
  put_all(*s, 0, 6); // evicts 0..3: two are queued, two dropped
  auto st = s->stats();
  EXPECT_EQ(st.spill_queue_blocks, 2u);
  EXPECT_EQ(st.spill_drops, 2u);
  EXPECT_LE(st.spill_queue_bytes, 2 * block_for(key_of(0)).payload_bytes());
  auto hit = s->get(key_of(0));
  ASSERT_TRUE(hit) << "a queued block is still served";
  EXPECT_EQ(hit->tier, kv_tier::host);
  EXPECT_EQ(s->stats().spill_queue_hits, 1u);
  s->set_spill_paused(false);
  ASSERT_TRUE(s->wait_spilled(10s));
  EXPECT_TRUE(s->disk()->contains(key_of(0)));
  EXPECT_TRUE(s->disk()->contains(key_of(1)));
  EXPECT_FALSE(s->contains(key_of(2))) << "dropped spills are gone";
  EXPECT_FALSE(s->contains(key_of(3)));
}

TEST(TieredBlockStoreTest, AnEvictingPutWaitsForQueueSpace) {
  test::temp_dir dir{"tessera-kvstore"};
  auto o = options_for(dir.path(), 1, 16);
  o.spill_queue_blocks = 1;
  o.spill_wait = 60s;
  auto s = open_store(o);
  ASSERT_TRUE(s);
  s->set_spill_paused(true);
  put_all(*s, 0, 2); // 0 fills the queue
  std::thread writer{[&] { put_all(*s, 2, 3); }}; // evicts 1: waits
  s->set_spill_paused(false);
  writer.join();
  ASSERT_TRUE(s->wait_spilled(10s));
  EXPECT_EQ(s->stats().spill_drops, 0u);
  EXPECT_TRUE(s->disk()->contains(key_of(0)));
  EXPECT_TRUE(s->disk()->contains(key_of(1)));
}

TEST(TieredBlockStoreTest, CapacitiesHoldAfterEveryOperation) {
  test::temp_dir dir{"tessera-kvstore"};
  auto o = options_for(dir.path(), 0, 0);
  o.host_capacity_bytes = 12'000;
  o.disk->capacity_bytes = 30'000;
  o.spill_queue_bytes = 8'000;
  o.spill_wait = 1ms;
  auto s = open_store(o);
  ASSERT_TRUE(s);
  std::mt19937_64 rng{1234};
  std::vector<int32_t> head_dims{1, 4, 8, 16, 32};
  for (int op = 0; op < 800; ++op) {
    auto k = key_of(rng() % 120);
    switch (rng() % 3) {
      case 0: {
        auto l = test::small_layout(head_dims[k.hash.lo % head_dims.size()]);
        ASSERT_FALSE(s->put(k, block_for(k, l)));
        break;
      }
      case 1:
        if (auto hit = s->get(k)) {
          ASSERT_TRUE(is_block_for(k, hit->block)) << "wrong bytes for block " << to_string(k);
        }
        break;
      case 2: {
        std::vector<engine::kv_block_hash> c;
        for (int i = 0; i < 4; ++i)
          c.push_back(key_of(rng() % 120).hash);
        (void)s->lookup(test_ns, c);
        break;
      }
    }
    auto st = s->stats();
    ASSERT_LE(st.host.used_bytes, o.host_capacity_bytes) << "after op " << op;
    ASSERT_LE(st.disk.used_bytes, o.disk->capacity_bytes) << "after op " << op;
    ASSERT_LE(st.spill_queue_bytes, o.spill_queue_bytes) << "after op " << op;
  }
  ASSERT_TRUE(s->wait_spilled(10s));
  EXPECT_GT(s->stats().spills, 0u);
  EXPECT_GT(s->stats().disk.evictions, 0u) << "the sequence should reach the disk bound";
}

TEST(TieredBlockStoreTest, EventsReportEachTierAndASnapshotWhenTurnedOn) {
  test::temp_dir dir{"tessera-kvstore"};
  auto s = open_store(options_for(dir.path(), 2, 8));
  ASSERT_TRUE(s);
  put_all(*s, 0, 3); // before recording: 0 on disk, 1 2 in host
  ASSERT_TRUE(s->wait_spilled(10s));
  EXPECT_TRUE(s->drain_events().empty()) << "off by default";

  s->record_events(true);
  auto ev = s->drain_events();
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].what, kind::stored);
  EXPECT_EQ(ev[0].tier, kv_tier::host);
  EXPECT_EQ(ev[0].hashes, chain({1, 2}));
  EXPECT_EQ(ev[1].tier, kv_tier::disk);
  EXPECT_EQ(ev[1].hashes, chain({0}));

  put_all(*s, 3, 4); // evicts 1 from host, spills it
  ASSERT_TRUE(s->wait_spilled(10s));
  ev = s->drain_events();
  // The host events come from this thread, the disk one from the spill
  // thread after them.
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0].what, kind::removed);
  EXPECT_EQ(ev[0].tier, kv_tier::host);
  EXPECT_EQ(ev[0].hashes, chain({1}));
  EXPECT_EQ(ev[1].what, kind::stored);
  EXPECT_EQ(ev[1].tier, kv_tier::host);
  EXPECT_EQ(ev[1].hashes, chain({3}));
  EXPECT_EQ(ev[2].what, kind::stored);
  EXPECT_EQ(ev[2].tier, kv_tier::disk);
  EXPECT_EQ(ev[2].hashes, chain({1}));
  s->record_events(false);
  put_all(*s, 4, 5);
  EXPECT_TRUE(s->drain_events().empty());
}

TEST(TieredBlockStoreTest, WarmRestartServesSpilledBlocksFromDisk) {
  test::temp_dir dir{"tessera-kvstore"};
  auto o = options_for(dir.path(), 2, 8);
  {
    auto s = open_store(o);
    ASSERT_TRUE(s);
    s->set_spill_paused(true);
    put_all(*s, 0, 5); // 0 1 2 queued when the store closes
  } // closing drains the queue
  auto s = open_store(o);
  ASSERT_TRUE(s);
  auto m = s->lookup(test_ns, chain({0, 1, 2, 3}), lookup_mode::probe);
  EXPECT_EQ(m.tiers, (std::vector{kv_tier::disk, kv_tier::disk, kv_tier::disk}))
      << "host contents are not kept across a restart";
  auto hit = s->get(key_of(2));
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->tier, kv_tier::disk);
  EXPECT_TRUE(is_block_for(key_of(2), hit->block));
  s->record_events(true);
  auto ev = s->drain_events();
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[1].tier, kv_tier::disk);
  EXPECT_EQ(ev[1].hashes, chain({0, 1, 2}));
}

TEST(TieredBlockStoreTest, HostOnlyStoreDropsWhatItEvicts) {
  tiered_store_options o;
  o.host_capacity_bytes = 2 * host_block;
  auto s = open_store(o);
  ASSERT_TRUE(s);
  put_all(*s, 0, 3);
  EXPECT_FALSE(s->contains(key_of(0)));
  EXPECT_EQ(s->disk(), nullptr);
  EXPECT_EQ(s->lookup(test_ns, chain({1, 2})).blocks(), 2u);
}

TEST(TieredBlockStoreTest, RefusesBadBlocksAndBlocksLargerThanEveryTier) {
  test::temp_dir dir{"tessera-kvstore"};
  auto s = open_store(options_for(dir.path(), 2, 4));
  ASSERT_TRUE(s);
  auto bad = block_for(key_of(1));
  bad.meta.checksum ^= 1;
  auto err = s->put(key_of(1), bad);
  EXPECT_TRUE(err == kvstore_errc::bad_block) << error_text(err);
  EXPECT_FALSE(s->contains(key_of(1)));

  // Too big for host (2 blocks) but fits on disk (4): goes straight there.
  auto mid = block_for(key_of(2), test::small_layout(24));
  ASSERT_GT(host_tier::charge(mid), 2 * host_block);
  ASSERT_FALSE(s->put(key_of(2), mid));
  ASSERT_TRUE(s->wait_spilled(10s));
  EXPECT_TRUE(s->disk()->contains(key_of(2)));

  auto huge = block_for(key_of(3), test::small_layout(64));
  err = s->put(key_of(3), huge);
  EXPECT_TRUE(err == kvstore_errc::too_large) << error_text(err);
  EXPECT_EQ(s->stats().put_rejects, 2u);
}

TEST(TieredBlockStoreTest, OpenErrorsNameTheProblem) {
  tiered_store_options o;
  o.host_capacity_bytes = 0;
  auto s = tiered_block_store::open(o);
  ASSERT_FALSE(s);
  EXPECT_TRUE(s.error() == kvstore_errc::bad_config);
  // A disk directory another store holds is not an error (the disk tier is
  // a cache): the second store runs on host memory only and says why.
  test::temp_dir dir{"tessera-kvstore"};
  auto first = open_store(options_for(dir.path(), 2, 2));
  ASSERT_TRUE(first);
  auto second = tiered_block_store::open(options_for(dir.path(), 2, 2));
  ASSERT_TRUE(second) << error_text(second.error());
  EXPECT_EQ((*second)->disk(), nullptr);
  const auto report = (*second)->disk_report();
  EXPECT_EQ(report.result, disk_open_report::outcome::disabled);
  EXPECT_EQ(report.dir, dir.path());
  EXPECT_NE(report.reason.find("lock"), std::string::npos) << report.reason;
}

} // namespace
} // namespace tessera::kvstore
