#include "engine/block_hash.hpp"

#include <numeric>

#include <gtest/gtest.h>

namespace {

using namespace tessera::engine;

std::vector<int32_t> iota_tokens(int n, int32_t first = 0) {
  std::vector<int32_t> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

// Pins the function: the router, the KV store and the wire format all name
// blocks with it, so any change here must be deliberate (bump the "v1").
TEST(BlockHashTest, MatchesTheTestVector) {
  const uint64_t seed = kv_hash_seed(0x0123456789abcdefull, 16, "BF16");
  const auto root = kv_hash_root(seed, "");
  auto tokens = iota_tokens(32);
  std::vector<kv_block_hash> h;
  kv_hash_blocks(seed, root, tokens, 16, 2, h);
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(seed, 0xe69de12a3f22a551ull) << std::hex << seed;
  EXPECT_EQ(root, 0x67329266e46c952eull) << std::hex << root;
  EXPECT_EQ(h[0], 0xa3f8b922a2cb0188ull) << std::hex << h[0];
  EXPECT_EQ(h[1], 0x98f97647e0a66490ull) << std::hex << h[1];
}

TEST(BlockHashTest, ChainsThroughEveryEarlierBlock) {
  const uint64_t seed = kv_hash_seed(1, 16, "BF16");
  const auto root = kv_hash_root(seed, "");
  auto a = iota_tokens(48);
  auto b = a;
  b[3] = 999; // differs only in block 0
  std::vector<kv_block_hash> ha, hb;
  kv_hash_blocks(seed, root, a, 16, 3, ha);
  kv_hash_blocks(seed, root, b, 16, 3, hb);
  for (int i = 0; i < 3; ++i)
    EXPECT_NE(ha[i], hb[i]) << "block " << i;
  // Same blocks after a common prefix change nothing before it.
  auto c = a;
  c[40] = 7; // block 2 only
  std::vector<kv_block_hash> hc;
  kv_hash_blocks(seed, root, c, 16, 3, hc);
  EXPECT_EQ(ha[0], hc[0]);
  EXPECT_EQ(ha[1], hc[1]);
  EXPECT_NE(ha[2], hc[2]);
}

TEST(BlockHashTest, SaltAndNamespaceSeparateCaches) {
  auto t = iota_tokens(16);
  const uint64_t seed = kv_hash_seed(1, 16, "BF16");
  EXPECT_NE(kv_hash_block(seed, kv_hash_root(seed, "tenant-a"), t),
            kv_hash_block(seed, kv_hash_root(seed, "tenant-b"), t));
  EXPECT_NE(kv_hash_seed(1, 16, "BF16"), kv_hash_seed(2, 16, "BF16"));
  EXPECT_NE(kv_hash_seed(1, 16, "BF16"), kv_hash_seed(1, 32, "BF16"));
  EXPECT_NE(kv_hash_seed(1, 16, "BF16"), kv_hash_seed(1, 16, "F32"));
}

TEST(BlockHashTest, ExtendsIncrementallyAndIgnoresPartialBlocks) {
  const uint64_t seed = kv_hash_seed(1, 4, "F32");
  const auto root = kv_hash_root(seed, "");
  auto t = iota_tokens(11);
  std::vector<kv_block_hash> all, inc;
  kv_hash_blocks(seed, root, t, 4, 100, all);
  EXPECT_EQ(all.size(), 2u); // 11 tokens: two full blocks of 4
  kv_hash_blocks(seed, root, t, 4, 1, inc);
  kv_hash_blocks(seed, root, t, 4, 2, inc);
  EXPECT_EQ(all, inc);
}

} // namespace
