// Blocks out of one engine's prefix cache and into another's (the path a
// kv store tier takes): a request whose prefix arrived that way computes
// only the rest, and generates exactly what it generates without a cache.
#include <gtest/gtest.h>

#include "tests/support/block_hash_util.hpp"

#include "tests/support/engine_runs.hpp"
#include "tests/support/test_model.hpp"

namespace {

using namespace tessera;
using namespace tessera::engine;

test::test_engine_options with_blocks(int32_t blocks) {
  test::test_engine_options o;
  o.backend.num_blocks = blocks;
  return o;
}

TEST(EngineTiersTest, BlocksMovedThroughATierAreHitsAndChangeNothing) {
  for (float temperature : {0.0f, 0.8f}) {
    const auto r = test::make_request(1, test::random_prompt(53, 9), 10, temperature);
    auto a = test::make_test_engine("nano", with_blocks(64));
    const auto want = test::run_one(*a, r);
    EXPECT_EQ(want.cached_prompt_tokens, 0);

    const auto hashes = a->block_hashes(r.prompt);
    ASSERT_EQ(hashes.size(), 3u) << "53 tokens: 3 full blocks of 16";
    EXPECT_EQ(a->cached_prefix_blocks(hashes), 3u) << "a finished request leaves its blocks cached";

    auto b = test::make_test_engine("nano", with_blocks(64));
    EXPECT_EQ(b->hash_seed(), a->hash_seed());
    EXPECT_EQ(b->cached_prefix_blocks(hashes), 0u);
    EXPECT_EQ(b->extend_cached_prefix(hashes, [&](size_t i, std::span<std::byte> out) {
      return a->read_cached_block(hashes[i], out);
    }), 3u);
    EXPECT_EQ(b->cached_prefix_blocks(hashes), 3u);
    EXPECT_EQ(b->stats().free_blocks, 64) << "inserted blocks are cached and free";
    const auto got = test::run_one(*b, r);
    EXPECT_EQ(got, want) << "temperature " << temperature;
    EXPECT_EQ(got.cached_prompt_tokens, 48);
    EXPECT_EQ(b->stats().tokens_computed, want.tokens.size() - 1 + 5) << "only the last 5 prompt tokens";
  }
}

// Bytes of block i: i + 1 everywhere.
bool fake_block(size_t i, std::span<std::byte> out) {
  std::fill(out.begin(), out.end(), static_cast<std::byte>(i + 1));
  return true;
}

TEST(EngineTiersTest, ReadAndExtendStopWhereTheyMust) {
  auto e = test::make_test_engine("nano", with_blocks(4));
  const size_t bb = e->get_backend().layout().block_bytes();
  std::vector<std::byte> block(bb), small(bb - 1);
  EXPECT_FALSE(e->read_cached_block(tessera::test::bh(12345), block)) << "not cached";
  const auto chain = tessera::test::bhs({7, 8, 9});
  EXPECT_EQ(e->extend_cached_prefix(chain, [](size_t i, std::span<std::byte> out) {
    return i < 2 && fake_block(i, out);
  }), 2u) << "the source has 2 blocks";
  EXPECT_FALSE(e->read_cached_block(tessera::test::bh(7), small)) << "wrong size";
  ASSERT_TRUE(e->read_cached_block(tessera::test::bh(8), block));
  EXPECT_EQ(block, std::vector<std::byte>(bb, std::byte{2}));
  EXPECT_EQ(e->extend_cached_prefix(chain, fake_block), 3u) << "cached blocks are kept, the rest fetched";
  // Every block held by a running request: nothing can be added.
  auto r = test::make_request(2, test::random_prompt(60, 3), 4);
  ASSERT_FALSE(e->add_request(r));
  (void) e->step();
  EXPECT_EQ(e->stats().free_blocks, 0);
  EXPECT_EQ(e->extend_cached_prefix(tessera::test::bhs({20, 21}), fake_block), 0u);
  EXPECT_EQ(e->cached_prefix_blocks(chain), 0u) << "evicted for the request";
}

TEST(EngineTiersTest, ExtendingNeverEvictsTheChainItExtends) {
  // A full pool of cached blocks whose least recently freed is the chain's
  // own first block: the blocks fetched after it must not evict it.
  auto e = test::make_test_engine("nano", with_blocks(8));
  const auto chain = tessera::test::bhs({31, 32, 33, 34, 35, 36, 37, 38});
  EXPECT_EQ(e->extend_cached_prefix(std::span{chain}.first(1), fake_block), 1u);
  EXPECT_EQ(e->extend_cached_prefix(tessera::test::bhs({41, 42, 43, 44, 45, 46, 47}), fake_block), 7u);
  EXPECT_EQ(e->cached_prefix_blocks(chain), 1u);
  EXPECT_EQ(e->extend_cached_prefix(chain, fake_block), 8u) << "the whole pool, the first block kept";
  EXPECT_EQ(e->cached_prefix_blocks(chain), 8u);
}

TEST(EngineTiersTest, SaltedHashesDifferAndMatchWhatRequestsCache) {
  auto e = test::make_test_engine("nano", with_blocks(64));
  const auto prompt = test::random_prompt(40, 4);
  EXPECT_NE(e->block_hashes(prompt, "tenant-a"), e->block_hashes(prompt));
  auto r = test::make_request(3, prompt, 2);
  r.cache_salt = "tenant-a";
  (void) test::run_one(*e, r);
  EXPECT_EQ(e->cached_prefix_blocks(e->block_hashes(prompt, "tenant-a")), 2u);
  EXPECT_EQ(e->cached_prefix_blocks(e->block_hashes(prompt)), 0u);
}

} // namespace
