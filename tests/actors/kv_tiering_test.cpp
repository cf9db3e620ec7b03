// The fetch path of a worker's kv tiering, without actors: a kv store's
// read_chain (what its actor answers a kv_fetch_request with, for its own
// node's workers and for other nodes') and insert_fetched (what a worker
// does with the answer). Blocks that went through both are prefix-cache
// hits that change nothing; a block that is not what the chain says is
// refused and computed instead.
#include <gtest/gtest.h>

#include "actors/kvstore/kvstore_actor.hpp"
#include "actors/worker/kv_tiering.hpp"
#include "kvstore/tiered_block_store.hpp"
#include "tests/support/engine_runs.hpp"
#include "tests/support/test_model.hpp"

namespace {

using namespace tessera;
namespace wire = transport::wire;

test::test_engine_options with_blocks(int32_t blocks) {
  test::test_engine_options o;
  o.backend.num_blocks = blocks;
  return o;
}

struct KvTieringTest : ::testing::Test {
  void SetUp() override {
    auto s = kvstore::tiered_block_store::open({});
    ASSERT_TRUE(s);
    store = std::move(*s);
    a = test::make_test_engine("nano", with_blocks(64));
    // 70 tokens + 12 generated: 81 with KV, 5 full blocks offered.
    done = test::run_one(*a, test::make_request(1, prompt, 12)).tokens;
    std::vector<int32_t> seq = prompt;
    seq.insert(seq.end(), done.begin(), done.end());
    ASSERT_EQ(actors::offer_sequence(*a, *store, seq, {}), 5u);
    next = seq;
    for (int32_t t : test::random_prompt(9, 4))
      next.push_back(t);
  }

  wire::kv_fetch_request ask(const actors::prefix_need& need, uint64_t max_bytes = uint64_t{1} << 30) const {
    return {a->hash_seed(), need.hashes, max_bytes};
  }

  std::vector<int32_t> prompt = test::random_prompt(70, 3);
  std::vector<int32_t> done, next;
  std::unique_ptr<kvstore::tiered_block_store> store;
  std::unique_ptr<engine::engine> a;
};

TEST_F(KvTieringTest, FetchedBlocksAreHitsAndChangeNothing) {
  auto b = test::make_test_engine("nano", with_blocks(64));
  const auto need = actors::prefix_need_of(*b, next, {});
  ASSERT_EQ(need.hashes.size(), 5u) << "89 tokens, the last never fetched: 5 full blocks";
  EXPECT_EQ(need.cached, 0u);
  const auto reply = actors::read_chain(*store, ask(need));
  ASSERT_EQ(reply.blocks.size(), 5u);
  EXPECT_FALSE(reply.more);
  const auto r = actors::insert_fetched(*b, need.hashes, 0, reply);
  EXPECT_EQ(r.cached, 5u);
  EXPECT_EQ(r.refused, 0u);
  auto c = test::make_test_engine("nano", with_blocks(64));
  const auto want = test::run_one(*c, test::make_request(2, next, 8));
  const auto got = test::run_one(*b, test::make_request(2, next, 8));
  EXPECT_EQ(got, want);
  EXPECT_EQ(got.cached_prompt_tokens, 80);
}

TEST_F(KvTieringTest, ReadChainStopsAtAMissAtMaxBytesAndInAnotherNamespace) {
  auto b = test::make_test_engine("nano", with_blocks(64));
  auto need = actors::prefix_need_of(*b, next, {});
  const uint64_t bb = b->get_backend().layout().block_bytes();
  auto part = actors::read_chain(*store, ask(need, 2 * bb));
  EXPECT_EQ(part.blocks.size(), 2u);
  EXPECT_TRUE(part.more) << "stopped at max_bytes, not at a miss";
  EXPECT_EQ(actors::read_chain(*store, ask(need, 1)).blocks.size(), 1u) << "one block always comes";
  auto other = ask(need);
  other.ns ^= 1;
  EXPECT_TRUE(actors::read_chain(*store, other).blocks.empty());
  auto gap = ask(need);
  gap.block_hashes[2].lo ^= 1; // a block the store does not hold
  const auto stopped = actors::read_chain(*store, gap);
  EXPECT_EQ(stopped.blocks.size(), 2u);
  EXPECT_FALSE(stopped.more);
  // A continued fetch (the rest after the first two) lines up.
  auto rest = ask(need);
  rest.block_hashes.erase(rest.block_hashes.begin(), rest.block_hashes.begin() + 2);
  EXPECT_EQ(actors::insert_fetched(*b, need.hashes, 0, part).cached, 2u);
  EXPECT_EQ(actors::insert_fetched(*b, need.hashes, 2, actors::read_chain(*store, rest)).cached, 5u);
}

TEST_F(KvTieringTest, BlocksThatAreNotWhatTheChainSaysAreRefused) {
  auto b = test::make_test_engine("nano", with_blocks(64));
  const auto need = actors::prefix_need_of(*b, next, {});
  const auto good = actors::read_chain(*store, ask(need));
  ASSERT_EQ(good.blocks.size(), 5u);

  auto flipped = good;
  flipped.blocks[2].data[17] ^= std::byte{1}; // corrupted on the way: the checksum says so
  auto r = actors::insert_fetched(*b, need.hashes, 0, flipped);
  EXPECT_EQ(r.cached, 2u);
  EXPECT_EQ(r.refused, 1u);

  auto c = test::make_test_engine("nano", with_blocks(64));
  auto renamed = good;
  renamed.blocks[0].hash.hi ^= 1; // another chain's block
  r = actors::insert_fetched(*c, need.hashes, 0, renamed);
  EXPECT_EQ(r.cached, 0u);
  EXPECT_EQ(r.refused, 1u);

  auto relaid = good;
  relaid.layout.head_dim *= 2; // another model's layout
  r = actors::insert_fetched(*c, need.hashes, 0, relaid);
  EXPECT_EQ(r.cached, 0u);
  EXPECT_EQ(r.refused, 5u);

  auto partial = good;
  partial.blocks[1].token_count -= 1; // not a full block
  r = actors::insert_fetched(*c, need.hashes, 0, partial);
  EXPECT_EQ(r.cached, 1u);
  EXPECT_EQ(r.refused, 1u);

  // The engine with the refused blocks still answers as one without cache.
  auto d = test::make_test_engine("nano", with_blocks(64));
  EXPECT_EQ(test::run_one(*b, test::make_request(3, next, 8)), test::run_one(*d, test::make_request(3, next, 8)));
}

} // namespace
