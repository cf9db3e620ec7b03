#include "engine/block_hash.hpp"

#include <array>
#include <numeric>
#include <type_traits>
#include <unordered_set>

#include <gtest/gtest.h>

#include "engine/engine.hpp"
#include "tests/support/block_hash_util.hpp"

namespace {

using namespace tessera::engine;

std::vector<int32_t> iota_tokens(int n, int32_t first = 0) {
  std::vector<int32_t> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

// The reference implementation's test key: bytes 00..0f.
constexpr kv_hash_key ref_key{0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull};

// Pins the function: the router, the KV store and the wire format all name
// blocks with it, so any change here must be deliberate. The expected
// values were computed apart from this code, with OpenSSL's SipHash
// (`openssl mac -macopt hexkey:000102...0f -macopt size:16 SIPHASH`) over
// "R" || le64(ns), then "B" || le64(hi) || le64(lo) || le32 tokens.
TEST(BlockHashTest, MatchesTheTestVector) {
  const uint64_t ns = kv_hash_seed(0x0123456789abcdefull, 16, "BF16");
  EXPECT_EQ(ns, 0xe69de12a3f22a551ull) << std::hex << ns;
  const auto root = kv_hash_root(ref_key, ns, "");
  auto tokens = iota_tokens(32);
  std::vector<kv_block_hash> h;
  kv_hash_blocks(ref_key, root, tokens, 16, 2, h);
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(root, (kv_block_hash{0xd7b1e64a905ff706ull, 0x6bd448a65e12af7eull}));
  EXPECT_EQ(h[0], (kv_block_hash{0x14fab670044155aaull, 0x3e49aa1bd2be1044ull}));
  EXPECT_EQ(h[1], (kv_block_hash{0xb7e793108cb1bb86ull, 0xf9aecb456ccdc7b2ull}));
  EXPECT_EQ(to_hex(h[1]), "b7e793108cb1bb86f9aecb456ccdc7b2");
}

TEST(BlockHashTest, IsASmallTriviallyCopyableValue) {
  static_assert(std::is_trivially_copyable_v<kv_block_hash>);
  static_assert(sizeof(kv_block_hash) == 16);
  const kv_block_hash a{1, 2}, b{1, 3}, c{2, 0};
  EXPECT_LT(a, b);
  EXPECT_LT(b, c); // hi first
  EXPECT_NE(std::hash<kv_block_hash>{}(a), std::hash<kv_block_hash>{}(b));
  EXPECT_EQ(to_hex(a), "00000000000000010000000000000002");
}

TEST(BlockHashTest, ChainsThroughEveryEarlierBlock) {
  const uint64_t ns = kv_hash_seed(1, 16, "BF16");
  const auto root = kv_hash_root(ref_key, ns, "");
  auto a = iota_tokens(48);
  auto b = a;
  b[3] = 999; // differs only in block 0
  std::vector<kv_block_hash> ha, hb;
  kv_hash_blocks(ref_key, root, a, 16, 3, ha);
  kv_hash_blocks(ref_key, root, b, 16, 3, hb);
  for (int i = 0; i < 3; ++i)
    EXPECT_NE(ha[i], hb[i]) << "block " << i;
  // Same blocks after a common prefix change nothing before it.
  auto c = a;
  c[40] = 7; // block 2 only
  std::vector<kv_block_hash> hc;
  kv_hash_blocks(ref_key, root, c, 16, 3, hc);
  EXPECT_EQ(ha[0], hc[0]);
  EXPECT_EQ(ha[1], hc[1]);
  EXPECT_NE(ha[2], hc[2]);
}

TEST(BlockHashTest, SaltNamespaceAndKeySeparateCaches) {
  auto t = iota_tokens(16);
  const uint64_t ns = kv_hash_seed(1, 16, "BF16");
  auto block = [&](const kv_hash_key& k, uint64_t space, std::string_view salt) {
    return kv_hash_block(k, kv_hash_root(k, space, salt), t);
  };
  // Same key, namespace, salt and tokens: the same name, every time.
  EXPECT_EQ(block(ref_key, ns, "tenant-a"), block(ref_key, ns, "tenant-a"));
  // Any one of them different: another name.
  EXPECT_NE(block(ref_key, ns, "tenant-a"), block(ref_key, ns, "tenant-b"));
  EXPECT_NE(block(ref_key, ns, ""), block(ref_key, ns, "tenant-a"));
  EXPECT_NE(block(ref_key, ns, ""), block(ref_key, kv_hash_seed(2, 16, "BF16"), ""));
  const kv_hash_key other{ref_key.k0, ref_key.k1 ^ 1};
  EXPECT_NE(block(ref_key, ns, ""), block(other, ns, ""));
  EXPECT_NE(kv_hash_seed(1, 16, "BF16"), kv_hash_seed(2, 16, "BF16"));
  EXPECT_NE(kv_hash_seed(1, 16, "BF16"), kv_hash_seed(1, 32, "BF16"));
  EXPECT_NE(kv_hash_seed(1, 16, "BF16"), kv_hash_seed(1, 16, "F32"));
}

// A salt cannot be chosen to make a root read as a block: roots and blocks
// hash under different tags, so a salt of 16 parent bytes + tokens gives a
// root that is not the block hash of those tokens.
TEST(BlockHashTest, RootsAndBlocksAreDomainSeparated) {
  const auto t = iota_tokens(4);
  const kv_block_hash parent{0, 0};
  std::string salt(reinterpret_cast<const char*>(&parent), sizeof parent);
  salt.append(reinterpret_cast<const char*>(t.data()), t.size() * sizeof(int32_t));
  EXPECT_NE(kv_hash_root(ref_key, 0, salt), kv_hash_block(ref_key, parent, t));
}

TEST(BlockHashTest, ProcessKeyIsStableWithinAProcessAndNotZero) {
  const auto& k = process_kv_hash_key();
  EXPECT_EQ(&k, &process_kv_hash_key());
  EXPECT_FALSE(k.k0 == 0 && k.k1 == 0);
  EXPECT_EQ(engine_config{}.hash_key, k); // what an engine not given a key uses
}

TEST(BlockHashTest, KeyFromBytesIsLittleEndian) {
  std::array<std::byte, kv_hash_key_bytes> b{};
  for (size_t i = 0; i < b.size(); ++i)
    b[i] = static_cast<std::byte>(i);
  EXPECT_EQ(kv_hash_key_from_bytes(b), ref_key);
}

TEST(BlockHashTest, ExtendsIncrementallyAndIgnoresPartialBlocks) {
  const uint64_t ns = kv_hash_seed(1, 4, "F32");
  const auto root = kv_hash_root(ref_key, ns, "");
  auto t = iota_tokens(11);
  std::vector<kv_block_hash> all, inc;
  kv_hash_blocks(ref_key, root, t, 4, 100, all);
  EXPECT_EQ(all.size(), 2u); // 11 tokens: two full blocks of 4
  kv_hash_blocks(ref_key, root, t, 4, 1, inc);
  kv_hash_blocks(ref_key, root, t, 4, 2, inc);
  EXPECT_EQ(all, inc);
}

} // namespace
