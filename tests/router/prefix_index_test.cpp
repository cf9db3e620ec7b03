#include "actors/router/prefix_index.hpp"

#include <numeric>
#include <random>

#include <gtest/gtest.h>

#include "engine/block_hash.hpp"
#include "tests/router/router_test_util.hpp"

namespace {

using namespace tessera::actors;
using namespace tessera::actors::test;
using tessera::engine::kv_block_hash;
using wire::kv_event_kind;
using wire::kv_tier;

TEST(PrefixIndexTest, StoredChainOverlapsUpToItsLength) {
  fed_index f;
  const auto c = chain(6);
  f.store(1, prefix(c, 4));
  EXPECT_EQ(f.last.status, kv_event_status::applied);
  const auto o = f.index.overlap(c);
  ASSERT_EQ(o.size(), 1u);
  EXPECT_EQ(o[0].worker_id, 1u);
  EXPECT_EQ(o[0].blocks, 4);
  EXPECT_EQ(o[0].tier_blocks[0], 4);
  EXPECT_EQ(f.index.entries(), 4u);
  EXPECT_EQ(f.index.blocks(), 4u);
  EXPECT_EQ(f.index.worker_entries(1), 4u);
}

TEST(PrefixIndexTest, StoredChainWithParentExtendsTheWorkersPrefix) {
  fed_index f;
  const auto c = chain(5);
  f.store(1, prefix(c, 2));
  f.store(1, {c[2], c[3]}, c[1]);
  EXPECT_EQ(f.overlap_of(1, c), 4);
  EXPECT_EQ(f.index.stats().unknown_parents, 0u);
}

// Hashes are chained, so block 3 without block 2 is no use: the walk stops
// at the first miss.
TEST(PrefixIndexTest, OverlapIsTheLongestPrefixNotTheNumberOfHits) {
  fed_index f;
  const auto c = chain(4);
  f.store(1, {c[0], c[1]});
  f.store(1, {c[3]}, c[2]); // its parent was never stored
  EXPECT_EQ(f.index.stats().unknown_parents, 1u);
  EXPECT_EQ(f.index.worker_entries(1), 3u);
  EXPECT_EQ(f.overlap_of(1, c), 2);
  // Another worker holding block 2 keeps the walk going; worker 1 stays at 2.
  f.store(2, c);
  EXPECT_EQ(f.overlap_of(1, c), 2);
  EXPECT_EQ(f.overlap_of(2, c), 4);
}

TEST(PrefixIndexTest, OverlapListsEachHolderOfTheFirstBlockSortedById) {
  fed_index f;
  const auto c = chain(4);
  f.store(7, c);             // all 4
  f.store(3, prefix(c, 1));  // block 0 only
  f.store(5, {c[1], c[2]});  // no block 0: holds nothing usable
  const auto o = f.index.overlap(c);
  ASSERT_EQ(o.size(), 2u);
  EXPECT_EQ(o[0].worker_id, 3u);
  EXPECT_EQ(o[0].blocks, 1);
  EXPECT_EQ(o[1].worker_id, 7u);
  EXPECT_EQ(o[1].blocks, 4);
}

TEST(PrefixIndexTest, OverlapOfAnEmptyOrUnknownChainIsEmpty) {
  fed_index f;
  f.store(1, chain(3));
  EXPECT_TRUE(f.index.overlap({}).empty());
  EXPECT_TRUE(f.index.overlap(chain(3, 5000)).empty());
}

TEST(PrefixIndexTest, SharedPromptPrefixMatchesThroughRealChainedHashes) {
  using namespace tessera::engine;
  const uint64_t seed = kv_hash_seed(42, 4, "F32");
  const kv_hash_key key{1, 2};
  const auto root = kv_hash_root(key, seed, "");
  std::vector<int32_t> a(16), b(16);
  std::iota(a.begin(), a.end(), 0);
  b = a;
  b[9] = 999; // differs in block 2 (tokens 8..11)
  std::vector<kv_block_hash> ha, hb;
  kv_hash_blocks(key, root, a, 4, 4, ha);
  kv_hash_blocks(key, root, b, 4, 4, hb);
  fed_index f;
  f.store(1, ha);
  EXPECT_EQ(f.overlap_of(1, ha), 4);
  EXPECT_EQ(f.overlap_of(1, hb), 2);
  // Another tenant's salt changes every hash: nothing matches.
  std::vector<kv_block_hash> salted;
  kv_hash_blocks(key, kv_hash_root(key, seed, "tenant-b"), a, 4, 4, salted);
  EXPECT_EQ(f.overlap_of(1, salted), 0);
}

TEST(PrefixIndexTest, RemovedDropsTheHashesOfThatWorkerOnly) {
  fed_index f;
  const auto c = chain(4);
  f.store(1, c);
  f.store(2, c);
  f.remove(1, {c[1]});
  EXPECT_EQ(f.last.status, kv_event_status::applied);
  EXPECT_EQ(f.overlap_of(1, c), 1);
  EXPECT_EQ(f.overlap_of(2, c), 4);
  EXPECT_EQ(f.index.entries(), 7u);
  EXPECT_EQ(f.index.blocks(), 4u); // c[1] is still held by worker 2
  f.remove(1, {c[1], tessera::test::bh(12345)});      // neither is held any more
  EXPECT_EQ(f.index.stats().unknown_removals, 2u);
}

TEST(PrefixIndexTest, BlockHeldInTwoTiersStaysUntilRemovedFromBoth) {
  fed_index f;
  const auto c = chain(2);
  f.store(1, c, std::nullopt, kv_tier::g2_host);
  f.store(1, {c[0]}, std::nullopt, kv_tier::g1_pool);
  EXPECT_EQ(f.index.entries(), 2u); // one entry per (hash, worker)
  EXPECT_EQ(f.index.tier_of(c[0], 1), kv_tier::g1_pool);
  auto o = f.index.overlap(c);
  ASSERT_EQ(o.size(), 1u);
  EXPECT_EQ(o[0].blocks, 2);
  EXPECT_EQ(o[0].tier_blocks[0], 1); // c[0]: fastest copy in the pool
  EXPECT_EQ(o[0].tier_blocks[1], 1); // c[1]: host only

  f.remove(1, {c[0]}, kv_tier::g1_pool);
  EXPECT_EQ(f.index.tier_of(c[0], 1), kv_tier::g2_host);
  EXPECT_EQ(f.overlap_of(1, c), 2);
  f.remove(1, {c[0]}, kv_tier::g3_disk); // not held there
  EXPECT_EQ(f.index.stats().unknown_removals, 1u);
  EXPECT_EQ(f.overlap_of(1, c), 2);
  f.remove(1, {c[0]}, kv_tier::g2_host);
  EXPECT_FALSE(f.index.tier_of(c[0], 1));
  EXPECT_EQ(f.overlap_of(1, c), 0);
  EXPECT_EQ(f.index.entries(), 1u);
}

TEST(PrefixIndexTest, ClearedDropsEveryBlockOfTheWorkerInEveryTier) {
  fed_index f;
  const auto c = chain(3);
  f.store(1, c, std::nullopt, kv_tier::g1_pool);
  f.store(1, chain(2, 5000), std::nullopt, kv_tier::g3_disk);
  f.store(2, c);
  f.clear(1);
  EXPECT_EQ(f.last.status, kv_event_status::applied);
  EXPECT_EQ(f.index.worker_entries(1), 0u);
  EXPECT_EQ(f.overlap_of(1, c), 0);
  EXPECT_EQ(f.overlap_of(2, c), 3);
  EXPECT_EQ(f.index.entries(), 3u);
  EXPECT_EQ(f.index.blocks(), 3u);
  EXPECT_EQ(f.index.next_event_id(1), 3u); // the sequence survives a clear
}

TEST(PrefixIndexTest, RemoveWorkerForgetsItsBlocksAndItsEventSequence) {
  fed_index f;
  const auto c = chain(3);
  f.store(1, c);
  f.store(1, chain(1, 9000));
  f.store(2, c);
  f.index.remove_worker(1);
  EXPECT_EQ(f.overlap_of(1, c), 0);
  EXPECT_EQ(f.overlap_of(2, c), 3);
  EXPECT_EQ(f.index.entries(), 3u);
  EXPECT_FALSE(f.index.next_event_id(1));
  EXPECT_EQ(f.index.workers(), 1u);
  // The restarted worker numbers its events from 0 again.
  auto r = f.index.apply(1, make_event(1, 0, kv_event_kind::stored, prefix(c, 1)));
  EXPECT_EQ(r.status, kv_event_status::applied);
  EXPECT_EQ(f.overlap_of(1, c), 1);
  f.index.remove_worker(99); // unknown: no-op
}

TEST(PrefixIndexTest, GapIsReportedOnceUntilAClearedEventResyncsTheWorker) {
  prefix_index idx;
  const auto c = chain(8);
  ASSERT_EQ(idx.apply(1, make_event(1, 0, kv_event_kind::stored, {c[0]})).status,
            kv_event_status::applied);
  ASSERT_EQ(idx.apply(1, make_event(1, 1, kv_event_kind::stored, {c[1]}, c[0])).status,
            kv_event_status::applied);
  EXPECT_FALSE(idx.needs_resync(1));

  // Events 2 and 3 are lost.
  auto r = idx.apply(1, make_event(1, 4, kv_event_kind::stored, {c[4]}, c[3]));
  EXPECT_EQ(r.status, kv_event_status::applied_after_gap);
  EXPECT_EQ(r.missed, 2u);
  EXPECT_TRUE(r.resync_requested);
  EXPECT_TRUE(idx.needs_resync(1));
  EXPECT_EQ(idx.tier_of(c[4], 1), kv_tier::g1_pool); // applied anyway

  r = idx.apply(1, make_event(1, 5, kv_event_kind::removed, {c[4]}));
  EXPECT_EQ(r.status, kv_event_status::applied);
  EXPECT_FALSE(r.resync_requested);
  EXPECT_TRUE(idx.needs_resync(1));

  // A second gap before the resync: reported, but the resync is already asked.
  r = idx.apply(1, make_event(1, 7, kv_event_kind::stored, {c[7]}));
  EXPECT_EQ(r.status, kv_event_status::applied_after_gap);
  EXPECT_EQ(r.missed, 1u);
  EXPECT_FALSE(r.resync_requested);

  // The resync: cleared, then the worker's blocks.
  r = idx.apply(1, make_event(1, 8, kv_event_kind::cleared));
  EXPECT_EQ(r.status, kv_event_status::applied);
  EXPECT_FALSE(idx.needs_resync(1));
  EXPECT_EQ(idx.worker_entries(1), 0u);
  r = idx.apply(1, make_event(1, 9, kv_event_kind::stored, prefix(c, 3)));
  EXPECT_EQ(r.status, kv_event_status::applied);
  EXPECT_EQ(idx.overlap(c).at(0).blocks, 3);

  EXPECT_EQ(idx.stats().gaps, 2u);
  EXPECT_EQ(idx.stats().missed_events, 3u);
  EXPECT_EQ(idx.stats().events_applied, 7u);
}

TEST(PrefixIndexTest, ClearedEventAfterAGapNeedsNoResync) {
  prefix_index idx;
  ASSERT_EQ(idx.apply(1, make_event(1, 0, kv_event_kind::stored, chain(2))).status,
            kv_event_status::applied);
  auto r = idx.apply(1, make_event(1, 3, kv_event_kind::cleared));
  EXPECT_EQ(r.status, kv_event_status::applied_after_gap);
  EXPECT_EQ(r.missed, 2u);
  EXPECT_FALSE(r.resync_requested);
  EXPECT_FALSE(idx.needs_resync(1));
}

TEST(PrefixIndexTest, AResyncsClearedIsTakenEvenBelowABogusGapsId) {
  // A corrupt or forged event id far ahead looks like a gap; the worker's
  // resync answer (cleared, then its blocks) carries its real, lower ids
  // and must still land, restarting the sequence there.
  prefix_index idx;
  const auto c = chain(4);
  ASSERT_EQ(idx.apply(1, make_event(1, 0, kv_event_kind::stored, prefix(c, 2))).status,
            kv_event_status::applied);
  auto r = idx.apply(1, make_event(1, 1'000'000, kv_event_kind::removed, prefix(c, 2)));
  EXPECT_TRUE(r.resync_requested);
  EXPECT_EQ(idx.worker_entries(1), 0u);
  r = idx.apply(1, make_event(1, 1, kv_event_kind::cleared));
  EXPECT_EQ(r.status, kv_event_status::applied);
  EXPECT_FALSE(idx.needs_resync(1));
  r = idx.apply(1, make_event(1, 2, kv_event_kind::stored, prefix(c, 2)));
  EXPECT_EQ(r.status, kv_event_status::applied);
  EXPECT_EQ(idx.overlap(c).at(0).blocks, 2);
  // Without a pending resync a stale cleared is ignored as before.
  r = idx.apply(1, make_event(1, 1, kv_event_kind::cleared));
  EXPECT_EQ(r.status, kv_event_status::stale);
  EXPECT_EQ(idx.overlap(c).at(0).blocks, 2);
}

TEST(PrefixIndexTest, FirstEventOfAWorkerAfterIdZeroIsAGap) {
  prefix_index idx; // the router started after the worker
  auto r = idx.apply(4, make_event(4, 10, kv_event_kind::stored, chain(2)));
  EXPECT_EQ(r.status, kv_event_status::applied_after_gap);
  EXPECT_EQ(r.missed, 10u);
  EXPECT_TRUE(r.resync_requested);
  EXPECT_EQ(idx.next_event_id(4), 11u);
}

TEST(PrefixIndexTest, DuplicateAndLateEventsAreIgnored) {
  fed_index f;
  const auto c = chain(3);
  f.store(1, prefix(c, 2)); // id 0
  f.remove(1, {c[1]});      // id 1
  // A duplicate of event 0 must not resurrect c[1].
  auto r = f.index.apply(1, make_event(1, 0, kv_event_kind::stored, prefix(c, 2)));
  EXPECT_EQ(r.status, kv_event_status::stale);
  EXPECT_EQ(f.overlap_of(1, c), 1);
  EXPECT_EQ(f.index.stats().stale_events, 1u);
  EXPECT_EQ(f.index.next_event_id(1), 2u);
}

TEST(PrefixIndexTest, EventAttributedToAnotherWorkerOrOutOfRangeIsRejected) {
  prefix_index idx;
  auto ev = make_event(2, 0, kv_event_kind::stored, chain(2));
  EXPECT_EQ(idx.apply(1, ev).status, kv_event_status::rejected);
  ev = make_event(1, 0, kv_event_kind::stored, chain(2));
  ev.tier = static_cast<kv_tier>(7);
  EXPECT_EQ(idx.apply(1, ev).status, kv_event_status::rejected);
  ev = make_event(1, 0, static_cast<kv_event_kind>(9), chain(2));
  EXPECT_EQ(idx.apply(1, ev).status, kv_event_status::rejected);
  EXPECT_EQ(idx.entries(), 0u);
  EXPECT_FALSE(idx.next_event_id(1)); // the sequence did not start
  EXPECT_EQ(idx.stats().rejected_events, 3u);
}

TEST(PrefixIndexTest, CapEvictsTheOldestStoredEntries) {
  prefix_index_options opts;
  opts.max_entries = 4;
  fed_index f(opts);
  const auto a = chain(3, 100);
  const auto b = chain(3, 200);
  f.store(1, a);
  f.store(2, b); // evicts a[0], a[1]
  EXPECT_EQ(f.index.entries(), 4u);
  EXPECT_EQ(f.index.stats().evicted_entries, 2u);
  EXPECT_EQ(f.overlap_of(2, b), 3);
  EXPECT_EQ(f.overlap_of(1, a), 0); // a[2] alone is no prefix
  EXPECT_EQ(f.index.worker_entries(1), 1u);
}

TEST(PrefixIndexTest, StoringOrTouchingAnEntryAgainProtectsItFromEviction) {
  prefix_index_options opts;
  opts.max_entries = 3;
  fed_index f(opts);
  const auto a = chain(2, 100);
  f.store(1, a);                     // a0 a1
  f.store(2, {tessera::test::bh(500)});                 // a0 a1 x
  f.index.touch(1, a);               // x a0 a1
  f.store(2, {tessera::test::bh(501)});                 // evicts x
  EXPECT_EQ(f.overlap_of(1, a), 2);
  EXPECT_FALSE(f.index.tier_of(tessera::test::bh(500), 2));
  f.store(1, {a[0]});                // a1 y a0
  f.store(2, {tessera::test::bh(502)});                 // evicts a1
  EXPECT_EQ(f.overlap_of(1, a), 1);
  EXPECT_EQ(f.index.entries(), 3u);
}

// Bounded memory: whatever the events, the cap holds and freed entries are
// reused.
TEST(PrefixIndexTest, EntriesStayWithinTheCapUnderRandomEvents) {
  prefix_index_options opts;
  opts.max_entries = 1000;
  fed_index f(opts);
  std::mt19937_64 rng(1);
  for (int i = 0; i < 20000; ++i) {
    const uint64_t worker = rng() % 8;
    const auto c = chain(1 + rng() % 16, (rng() % 4000) * 16);
    switch (rng() % 5) {
      case 0: f.remove(worker, c); break;
      case 1:
        if (rng() % 50 == 0)
          f.clear(worker);
        break;
      default: f.store(worker, c, std::nullopt, static_cast<kv_tier>(rng() % 3)); break;
    }
    ASSERT_LE(f.index.entries(), 1000u);
  }
  size_t sum = 0;
  for (uint64_t w = 0; w < 8; ++w)
    sum += f.index.worker_entries(w);
  EXPECT_EQ(sum, f.index.entries());
  EXPECT_GT(f.index.stats().evicted_entries, 0u);
  for (uint64_t w = 0; w < 8; ++w)
    f.clear(w);
  EXPECT_EQ(f.index.entries(), 0u);
  EXPECT_EQ(f.index.blocks(), 0u);
}

TEST(PrefixIndexTest, StatusNamesAreStable) {
  EXPECT_STREQ(to_string(kv_event_status::applied), "applied");
  EXPECT_STREQ(to_string(kv_event_status::applied_after_gap), "applied_after_gap");
  EXPECT_STREQ(to_string(kv_event_status::stale), "stale");
  EXPECT_STREQ(to_string(kv_event_status::rejected), "rejected");
}

} // namespace
