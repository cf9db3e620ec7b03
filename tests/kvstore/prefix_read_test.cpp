// A prefix read in one pass (block_store::get_prefix on the tiered store:
// the host tier under one lock, the disk with one MultiGet) against the
// block-by-block path it replaces (the base class's get_prefix, get() per
// block): the same blocks from the same tiers, the same counts, over random
// chains with holes in host memory and on disk; a corrupt block ends the
// prefix and is counted; the byte bound; concurrent puts and evictions.

#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "common/error.hpp"
#include "kvstore/disk_codec.hpp"
#include "kvstore/tiered_block_store.hpp"
#include "tests/kvstore/kv_test_blocks.hpp"
#include "tests/kvstore/raw_rocksdb.hpp"
#include "tests/support/temp_dir.hpp"

namespace tessera::kvstore {
namespace {

using namespace std::chrono_literals;
using test::block_for;
using test::is_block_for;
using test::key_of;
using test::test_ns;

const size_t host_block = host_tier::charge(block_for(key_of(0)));
const uint64_t disk_block = rocksdb_tier::charge(block_for(key_of(0)));
const uint64_t payload = block_for(key_of(0)).payload_bytes();

tiered_store_options options_for(const std::filesystem::path& dir, size_t host_blocks, size_t disk_blocks) {
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

std::vector<engine::kv_block_hash> chain_of(const std::vector<uint64_t>& ids) {
  std::vector<engine::kv_block_hash> out;
  for (auto i : ids)
    out.push_back(key_of(i).hash);
  return out;
}

/// The block-by-block path: get() per block (the base class's get_prefix).
prefix_read one_by_one(tiered_block_store& s, std::span<const engine::kv_block_hash> chain,
                       uint64_t max_bytes = UINT64_MAX) {
  return s.block_store::get_prefix(test_ns, chain, max_bytes);
}

/// Checks `r` is the leading blocks of `ids`, each exactly as stored.
void expect_blocks_of(const prefix_read& r, const std::vector<uint64_t>& ids) {
  ASSERT_LE(r.hits.size(), ids.size());
  for (size_t i = 0; i < r.hits.size(); ++i)
    EXPECT_TRUE(is_block_for(key_of(ids[i]), r.hits[i].block)) << "block " << i;
}

void expect_same(const prefix_read& batched, const prefix_read& single) {
  ASSERT_EQ(batched.hits.size(), single.hits.size());
  EXPECT_EQ(batched.more, single.more);
  for (size_t i = 0; i < batched.hits.size(); ++i) {
    EXPECT_EQ(batched.hits[i].tier, single.hits[i].tier) << "block " << i;
    EXPECT_EQ(*batched.hits[i].block.payload, *single.hits[i].block.payload) << "block " << i;
    EXPECT_EQ(batched.hits[i].block.meta, single.hits[i].block.meta) << "block " << i;
  }
}

void expect_same_counts(const store_stats& a, const store_stats& b) {
  EXPECT_EQ(a.host.hits, b.host.hits);
  EXPECT_EQ(a.host.misses, b.host.misses);
  EXPECT_EQ(a.host.blocks, b.host.blocks);
  EXPECT_EQ(a.disk.hits, b.disk.hits);
  EXPECT_EQ(a.disk.misses, b.disk.misses);
  EXPECT_EQ(a.disk.blocks, b.disk.blocks);
  EXPECT_EQ(a.disk.checksum_failures, b.disk.checksum_failures);
  EXPECT_EQ(a.host.checksum_failures, b.host.checksum_failures);
  EXPECT_EQ(a.promotions, b.promotions);
  EXPECT_EQ(a.spill_queue_hits, b.spill_queue_hits);
}

// Two stores given the same puts and the same reads, one read in one pass
// and one block by block, stay the same store: the same blocks from the
// same tiers, the same counts, the same contents afterwards.
TEST(PrefixReadTest, OnePassEqualsBlockByBlockOverRandomChainsWithHoles) {
  test::temp_dir dir_a{"tessera-kvstore"};
  test::temp_dir dir_b{"tessera-kvstore"};
  // 12 blocks of host memory over 80 on disk, of 100 ids of which ~94 are
  // stored: chains cross both tiers and hit holes in each.
  auto a = open_store(options_for(dir_a.path(), 12, 80));
  auto b = open_store(options_for(dir_b.path(), 12, 80));
  ASSERT_TRUE(a && b);
  std::mt19937_64 rng{14};
  std::vector<uint64_t> ids(100);
  for (uint64_t i = 0; i < ids.size(); ++i)
    ids[i] = i;
  std::shuffle(ids.begin(), ids.end(), rng);
  for (uint64_t id : ids) {
    if (rng() % 100 < 6)
      continue; // a hole everywhere
    ASSERT_FALSE(a->put(key_of(id), block_for(key_of(id))));
    ASSERT_FALSE(b->put(key_of(id), block_for(key_of(id))));
    ASSERT_TRUE(a->wait_spilled(10s) && b->wait_spilled(10s));
  }
  size_t longest = 0;
  size_t from_disk = 0;
  for (int round = 0; round < 300; ++round) {
    // A chain of 1..40 ids: a window of the 100 (where most are held),
    // with an id never stored here and there.
    std::vector<uint64_t> want(1 + rng() % 40);
    const uint64_t start = rng() % 100;
    for (size_t i = 0; i < want.size(); ++i)
      want[i] = rng() % 25 == 0 ? 1000 + i : (start + i) % 100;
    const auto chain = chain_of(want);
    // Spills wait while the two read, so what a read's promotions evict is
    // in the spill queue for both, not on disk for one of them.
    a->set_spill_paused(true);
    b->set_spill_paused(true);
    auto batched = a->get_prefix(test_ns, chain);
    auto single = one_by_one(*b, chain);
    a->set_spill_paused(false);
    b->set_spill_paused(false);
    SCOPED_TRACE("round " + std::to_string(round));
    expect_same(batched, single);
    expect_blocks_of(batched, want);
    ASSERT_TRUE(a->wait_spilled(10s) && b->wait_spilled(10s));
    expect_same_counts(a->stats(), b->stats());
    longest = std::max(longest, batched.hits.size());
    for (const auto& h : batched.hits)
      from_disk += h.tier == kv_tier::disk ? 1 : 0;
    if (::testing::Test::HasFailure())
      return;
  }
  EXPECT_GE(longest, 12u) << "some chains were longer than the host tier";
  EXPECT_GT(from_disk, 50u) << "the disk tier was read";
  EXPECT_EQ(a->host().keys_lru_first(), b->host().keys_lru_first()) << "the same blocks were marked used";
  EXPECT_EQ(a->disk()->keys_oldest_first(), b->disk()->keys_oldest_first());
}

// Blocks 0..9 on disk, block 4's bytes damaged behind the store's back: the
// prefix ends at 4 whichever way it is read, and the bad block is counted
// once and dropped.
TEST(PrefixReadTest, ACorruptDiskBlockInTheMiddleEndsThePrefixAndIsCounted) {
  test::temp_dir dir{"tessera-kvstore"};
  const auto opts = options_for(dir.path(), 2, 40);
  std::vector<uint64_t> ids{0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  {
    auto s = open_store(opts);
    ASSERT_TRUE(s);
    for (uint64_t i = 0; i < 12; ++i) // 10 and 11 push 0..9 out of host memory
      ASSERT_FALSE(s->put(key_of(i), block_for(key_of(i))));
    ASSERT_TRUE(s->wait_spilled(10s));
  }
  auto bad = disk_codec::encode_value(key_of(4), block_for(key_of(4)));
  bad[disk_codec::header_bytes + 7] = static_cast<char>(bad[disk_codec::header_bytes + 7] ^ 0x10);
  test::raw_put(dir.path(), key_of(4), bad);
  auto s = open_store(opts);
  ASSERT_TRUE(s);
  ASSERT_TRUE(s->disk()->contains(key_of(4)));
  auto r = s->get_prefix(test_ns, chain_of(ids));
  ASSERT_EQ(r.hits.size(), 4u);
  EXPECT_FALSE(r.more);
  expect_blocks_of(r, ids);
  for (const auto& h : r.hits)
    EXPECT_EQ(h.tier, kv_tier::disk);
  EXPECT_EQ(s->stats().disk.checksum_failures, 1u);
  EXPECT_FALSE(s->disk()->contains(key_of(4))) << "the bad block is dropped";
  EXPECT_EQ(s->stats().disk.hits, 4u) << "blocks read past the bad one are not counted";
  // Read again: 0..3 now come from host memory (promoted), 4 is a plain miss.
  ASSERT_TRUE(s->wait_spilled(10s));
  auto again = s->get_prefix(test_ns, chain_of(ids));
  EXPECT_EQ(again.hits.size(), 4u);
  EXPECT_EQ(s->stats().disk.checksum_failures, 1u) << "counted once: it is gone";
}

// A block whose host copy is damaged is read from disk (as get() does);
// one with no other copy ends the prefix.
TEST(PrefixReadTest, ACorruptHostCopyFallsBackToDiskOrEndsThePrefix) {
  test::temp_dir dir{"tessera-kvstore"};
  auto s = open_store(options_for(dir.path(), 4, 40));
  ASSERT_TRUE(s);
  for (uint64_t i = 0; i < 8; ++i)
    ASSERT_FALSE(s->put(key_of(i), block_for(key_of(i))));
  ASSERT_TRUE(s->wait_spilled(10s));
  // 0..3 on disk only, 4..7 in host memory only.
  ASSERT_TRUE(s->host().corrupt_for_testing(key_of(5), 3));
  auto r = s->get_prefix(test_ns, chain_of({4, 5, 6, 7}));
  ASSERT_EQ(r.hits.size(), 1u) << "5 has no other copy";
  EXPECT_EQ(s->stats().host.checksum_failures, 1u);
  EXPECT_FALSE(s->host().contains(key_of(5)));
  // 1's host copy (promoted by this read) damaged: read from disk again.
  ASSERT_EQ(s->get_prefix(test_ns, chain_of({0, 1, 2})).hits.size(), 3u);
  ASSERT_TRUE(s->wait_spilled(10s));
  ASSERT_TRUE(s->host().contains(key_of(1)));
  ASSERT_TRUE(s->host().corrupt_for_testing(key_of(1), 0));
  auto back = s->get_prefix(test_ns, chain_of({0, 1, 2}));
  ASSERT_EQ(back.hits.size(), 3u);
  expect_blocks_of(back, {0, 1, 2});
  EXPECT_EQ(back.hits[1].tier, kv_tier::disk);
  EXPECT_EQ(s->stats().host.checksum_failures, 2u);
}

// The byte bound: as many leading blocks as fit (at least one), `more` when
// it stopped before a block the store holds, not at a gap.
TEST(PrefixReadTest, TheByteBoundStopsBeforeAHeldBlockAndSaysSo) {
  test::temp_dir dir{"tessera-kvstore"};
  auto s = open_store(options_for(dir.path(), 3, 40));
  ASSERT_TRUE(s);
  for (uint64_t i = 0; i < 10; ++i)
    ASSERT_FALSE(s->put(key_of(i), block_for(key_of(i))));
  ASSERT_TRUE(s->wait_spilled(10s));
  const std::vector<uint64_t> ids{0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  auto four = s->get_prefix(test_ns, chain_of(ids), 4 * payload + payload / 2);
  EXPECT_EQ(four.hits.size(), 4u);
  EXPECT_TRUE(four.more);
  expect_blocks_of(four, ids);
  auto one = s->get_prefix(test_ns, chain_of(ids), 1);
  EXPECT_EQ(one.hits.size(), 1u) << "the first block whatever its size";
  EXPECT_TRUE(one.more);
  // In host memory (7..9 are, and 0..3 promoted): the bound holds there too.
  auto host = s->get_prefix(test_ns, chain_of({7, 8, 9}), 2 * payload);
  EXPECT_EQ(host.hits.size(), 2u);
  EXPECT_TRUE(host.more);
  // A gap inside the bound: no more.
  auto gap = s->get_prefix(test_ns, chain_of({0, 1, 42, 3}), 10 * payload);
  EXPECT_EQ(gap.hits.size(), 2u);
  EXPECT_FALSE(gap.more);
  auto all = s->get_prefix(test_ns, chain_of(ids), 10 * payload);
  EXPECT_EQ(all.hits.size(), 10u);
  EXPECT_FALSE(all.more);
  EXPECT_TRUE(s->get_prefix(test_ns, {}).hits.empty());
  EXPECT_TRUE(s->get_prefix(test_ns + 1, chain_of(ids)).hits.empty()) << "another namespace";
}

// A host-only store: the prefix ends at the first block host memory lacks.
TEST(PrefixReadTest, AHostOnlyStoreEndsAtTheFirstBlockItLacks) {
  tiered_store_options o;
  o.host_capacity_bytes = 8 * host_block;
  auto s = open_store(o);
  ASSERT_TRUE(s);
  for (uint64_t i : {0, 1, 2, 4})
    ASSERT_FALSE(s->put(key_of(i), block_for(key_of(i))));
  auto r = s->get_prefix(test_ns, chain_of({0, 1, 2, 3, 4}));
  EXPECT_EQ(r.hits.size(), 3u);
  expect_blocks_of(r, {0, 1, 2});
  EXPECT_EQ(s->stats().host.hits, 3u);
  EXPECT_EQ(s->stats().host.misses, 1u);
}

// int8 tiers: the blocks come back dequantized, the bound applies to what
// is returned.
TEST(PrefixReadTest, Int8TiersReturnDecodedBlocksWithinTheBound) {
  test::temp_dir dir{"tessera-kvstore"};
  auto o = options_for(dir.path(), 3, 40);
  o.tier_codec = block_codec::int8;
  auto s = open_store(o);
  ASSERT_TRUE(s);
  std::vector<uint64_t> ids;
  for (uint64_t i = 0; i < 8; ++i) {
    ids.push_back(i);
    ASSERT_FALSE(s->put(key_of(i), block_for(key_of(i))));
  }
  ASSERT_TRUE(s->wait_spilled(10s));
  auto all = s->get_prefix(test_ns, chain_of(ids));
  auto single = one_by_one(*s, chain_of(ids));
  ASSERT_EQ(all.hits.size(), 8u);
  ASSERT_EQ(single.hits.size(), 8u);
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(all.hits[i].block.meta.codec, block_codec::exact);
    EXPECT_EQ(all.hits[i].block.payload_bytes(), payload);
    EXPECT_TRUE(verify_block(all.hits[i].block));
    EXPECT_EQ(*all.hits[i].block.payload, *single.hits[i].block.payload) << i;
  }
  auto bounded = s->get_prefix(test_ns, chain_of(ids), 3 * payload);
  EXPECT_EQ(bounded.hits.size(), 3u);
  EXPECT_TRUE(bounded.more);
}

// Readers take prefixes while writers put new blocks (evicting old ones
// from host memory to disk and off the disk): every block returned is
// exactly the block of its place in the chain. Run under ThreadSanitizer
// (tsan preset).
TEST(PrefixReadTest, ConcurrentPutsAndEvictionsNeverGiveWrongBytes) {
  test::temp_dir dir{"tessera-kvstore"};
  auto o = options_for(dir.path(), 16, 64);
  o.spill_queue_blocks = 8;
  o.spill_wait = 1ms;
  auto s = open_store(o);
  ASSERT_TRUE(s);
  constexpr uint64_t ids = 160;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> reads{0};
  std::atomic<uint64_t> blocks_read{0};
  std::atomic<uint64_t> wrong{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < 2; ++w)
    threads.emplace_back([&, w] {
      std::mt19937_64 rng(static_cast<uint64_t>(w) + 1);
      while (!stop) {
        const uint64_t start = rng() % ids;
        for (uint64_t i = 0; i < 8; ++i) {
          const auto k = key_of((start + i) % ids);
          (void)s->put(k, block_for(k));
        }
      }
    });
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      std::mt19937_64 rng(static_cast<uint64_t>(r) + 100);
      while (!stop) {
        std::vector<uint64_t> want(1 + rng() % 24);
        const uint64_t start = rng() % ids;
        for (size_t i = 0; i < want.size(); ++i)
          want[i] = (start + i) % ids;
        auto got = s->get_prefix(test_ns, chain_of(want), rng() % 2 ? UINT64_MAX : 6 * payload);
        for (size_t i = 0; i < got.hits.size(); ++i)
          if (!is_block_for(key_of(want[i]), got.hits[i].block))
            ++wrong;
        ++reads;
        blocks_read += got.hits.size();
      }
    });
  std::this_thread::sleep_for(1500ms);
  stop = true;
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(wrong.load(), 0u);
  EXPECT_GT(reads.load(), 20u);
  EXPECT_GT(blocks_read.load(), 0u);
  const auto st = s->stats();
  EXPECT_LE(st.host.used_bytes, st.host.capacity_bytes);
  EXPECT_LE(st.disk.used_bytes, st.disk.capacity_bytes);
  EXPECT_GT(st.disk.hits + st.spill_queue_hits, 0u) << "reads reached below host memory";
}

} // namespace
} // namespace tessera::kvstore
