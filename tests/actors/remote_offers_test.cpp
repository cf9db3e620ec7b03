// What a worker offers a kv store on another node (actors/worker/
// remote_offers.hpp), without actors: the blocks of a finished sequence,
// in chain order, in chunks, within the bytes allowed, skipping what it
// knows that store holds; and how that knowledge is bounded and heals
// (a fetch that misses forgets).
#include <gtest/gtest.h>

#include "actors/worker/remote_offers.hpp"
#include "kvstore/block.hpp"
#include "tests/support/engine_runs.hpp"
#include "tests/support/test_model.hpp"

namespace {

using namespace tessera;
namespace wire = transport::wire;
using actors::remote_store_memory;

engine::kv_block_hash h(uint64_t i) {
  return {i, ~i};
}

TEST(RemoteStoreMemoryTest, RemembersAtMostItsBoundOldestForgottenFirst) {
  remote_store_memory m{3};
  const std::vector<engine::kv_block_hash> a{h(1), h(2), h(3), h(4)};
  m.remember(a);
  EXPECT_EQ(m.size(), 3u);
  EXPECT_FALSE(m.holds(h(1)));
  EXPECT_TRUE(m.holds(h(4)));
  m.forget(std::vector{h(3)});
  EXPECT_FALSE(m.holds(h(3)));
  m.clear();
  EXPECT_EQ(m.size(), 0u);
  for (uint64_t i = 0; i < 100000; ++i) { // remember/forget churn stays bounded
    const std::vector one{h(i)};
    m.remember(one);
    m.forget(one);
  }
  EXPECT_EQ(m.size(), 0u);
}

TEST(RemoteStoreMemoryTest, AFetchRemembersWhatCameAndForgetsWhatDidNot) {
  remote_store_memory m;
  const std::vector<engine::kv_block_hash> asked{h(1), h(2), h(3), h(4)};
  m.remember(asked);
  wire::kv_fetch_reply r;
  r.blocks.resize(2);
  actors::note_fetched(m, asked, r);
  EXPECT_TRUE(m.holds(h(2)));
  EXPECT_FALSE(m.holds(h(3))) << "the store stopped at block 2: it lacks 3 and 4";
  EXPECT_FALSE(m.holds(h(4)));
  m.remember(asked);
  r.more = true; // stopped at its byte bound, not at a miss
  actors::note_fetched(m, asked, r);
  EXPECT_TRUE(m.holds(h(4)));
  wire::kv_fetch_reply busy;
  busy.busy = true;
  actors::note_fetched(m, asked, busy);
  EXPECT_TRUE(m.holds(h(3))) << "busy says nothing of what it holds";
}

struct CopyRemoteOfferTest : ::testing::Test {
  void SetUp() override {
    test::test_engine_options o;
    o.backend.num_blocks = 64;
    eng = test::make_test_engine("nano", o);
    auto done = test::run_one(*eng, test::make_request(1, prompt, 12)).tokens;
    seq = prompt;
    seq.insert(seq.end(), done.begin(), done.end()); // 82 tokens, 81 with KV: 5 full blocks
    bb = eng->get_backend().layout().block_bytes();
  }
  std::vector<int32_t> prompt = test::random_prompt(70, 3);
  std::vector<int32_t> seq;
  std::unique_ptr<engine::engine> eng;
  uint64_t bb = 0;
};

TEST_F(CopyRemoteOfferTest, TheSequencesFullBlocksInChunksWithTheirChecksums) {
  auto c = actors::copy_remote_offer(*eng, remote_store_memory{}, seq, {}, uint64_t{1} << 30, 2 * bb);
  ASSERT_EQ(c.offers.size(), 3u) << "5 blocks, 2 per chunk";
  EXPECT_EQ(c.dropped, 0u);
  const auto hashes = eng->block_hashes(std::span<const int32_t>{seq}.first(seq.size() - 1), {});
  ASSERT_EQ(hashes.size(), 5u);
  size_t i = 0;
  for (const auto& o : c.offers) {
    EXPECT_EQ(o.layout, eng->get_backend().layout());
    EXPECT_FALSE(o.more);
    EXPECT_FALSE(o.busy);
    for (const auto& b : o.blocks) {
      EXPECT_EQ(b.hash, hashes[i++]);
      EXPECT_EQ(b.token_count, eng->get_backend().layout().block_tokens);
      EXPECT_EQ(b.data.size(), bb);
      EXPECT_EQ(b.checksum, kvstore::payload_checksum(b.data.data(), b.data.size()));
    }
  }
  EXPECT_EQ(i, 5u);
}

TEST_F(CopyRemoteOfferTest, SkipsWhatTheStoreHoldsAndDropsWhatDoesNotFit) {
  const auto hashes = eng->block_hashes(std::span<const int32_t>{seq}.first(seq.size() - 1), {});
  remote_store_memory held;
  held.remember(std::span{hashes}.first(2));
  auto c = actors::copy_remote_offer(*eng, held, seq, {}, 2 * bb, uint64_t{1} << 30);
  ASSERT_EQ(c.offers.size(), 1u);
  ASSERT_EQ(c.offers[0].blocks.size(), 2u);
  EXPECT_EQ(c.offers[0].blocks[0].hash, hashes[2]);
  EXPECT_EQ(c.offers[0].blocks[1].hash, hashes[3]);
  EXPECT_EQ(c.dropped, 1u);
  auto none = actors::copy_remote_offer(*eng, remote_store_memory{}, seq, {}, 0, uint64_t{1} << 30);
  EXPECT_TRUE(none.offers.empty());
  EXPECT_EQ(none.dropped, 5u);
}

} // namespace
