#include "engine/siphash.hpp"

#include <array>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>

namespace {

using namespace tessera::engine;

// The reference key: bytes 00..0f.
constexpr siphash_key ref_key{0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull};

std::string digest_hex(const siphash_digest& d) {
  unsigned char b[16];
  std::memcpy(b, &d.first, 8);
  std::memcpy(b + 8, &d.second, 8);
  static constexpr char digits[] = "0123456789abcdef";
  std::string s;
  for (auto c : b) {
    s += digits[c >> 4];
    s += digits[c & 0xf];
  }
  return s;
}

// vectors_sip128 of the reference implementation (github.com/veorq/SipHash,
// vectors.h): key 00..0f, message 00, 01, ..., (len - 1).
TEST(SipHashTest, MatchesTheReferenceVectors) {
  const std::pair<size_t, const char*> vectors[] = {
      {0, "a3817f04ba25a8e66df67214c7550293"},  {1, "da87c1d86b99af44347659119b22fc45"},
      {7, "a1f1ebbed8dbc153c0b84aa61ff08239"},  {8, "3b62a9ba6258f5610f83e264f31497b4"},
      {15, "5493e99933b0a8117e08ec0f97cfc3d9"}, {16, "6ee2a4ca67b054bbfd3315bf85230577"},
      {31, "2939b0183223fafc1723de4f52c43d35"}, {63, "5150d1772f50834a503e069a973fbd7c"},
  };
  std::array<unsigned char, 64> msg{};
  for (size_t i = 0; i < msg.size(); ++i)
    msg[i] = static_cast<unsigned char>(i);
  for (const auto& [len, want] : vectors)
    EXPECT_EQ(digest_hex(siphash128_of(ref_key, msg.data(), len)), want) << "length " << len;
}

// OpenSSL 3's EVP_MAC "SIPHASH", 16-byte output: an implementation written
// apart from this one.
siphash_digest openssl_siphash128(const unsigned char key[16], const unsigned char* data, size_t size) {
  EVP_MAC* mac = EVP_MAC_fetch(nullptr, "SIPHASH", nullptr);
  EXPECT_NE(mac, nullptr);
  EVP_MAC_CTX* ctx = EVP_MAC_CTX_new(mac);
  size_t out_size = 16;
  OSSL_PARAM params[] = {OSSL_PARAM_construct_size_t(OSSL_MAC_PARAM_SIZE, &out_size), OSSL_PARAM_construct_end()};
  EXPECT_EQ(EVP_MAC_init(ctx, key, 16, params), 1);
  EXPECT_EQ(EVP_MAC_update(ctx, data, size), 1);
  unsigned char out[16];
  size_t got = 0;
  EXPECT_EQ(EVP_MAC_final(ctx, out, &got, sizeof out), 1);
  EXPECT_EQ(got, 16u);
  EVP_MAC_CTX_free(ctx);
  EVP_MAC_free(mac);
  siphash_digest d;
  std::memcpy(&d.first, out, 8);
  std::memcpy(&d.second, out + 8, 8);
  return d;
}

TEST(SipHashTest, AgreesWithOpenSslOnRandomKeysAndInputs) {
  std::mt19937_64 rng{20261201};
  for (int trial = 0; trial < 2000; ++trial) {
    unsigned char key[16];
    for (auto& b : key)
      b = static_cast<unsigned char>(rng());
    siphash_key k;
    std::memcpy(&k.k0, key, 8);
    std::memcpy(&k.k1, key + 8, 8);
    // Every length up to 80 bytes (a 16-token block and its parent), then
    // some longer ones.
    const size_t len = trial < 1000 ? static_cast<size_t>(trial % 81) : static_cast<size_t>(rng() % 4096);
    std::vector<unsigned char> msg(len);
    for (auto& b : msg)
      b = static_cast<unsigned char>(rng());
    const auto mine = siphash128_of(k, msg.data(), msg.size());
    const auto theirs = openssl_siphash128(key, msg.data(), msg.size());
    ASSERT_EQ(digest_hex(mine), digest_hex(theirs)) << "trial " << trial << ", " << len << " bytes";
  }
}

TEST(SipHashTest, SplittingTheInputChangesNothing) {
  std::mt19937_64 rng{7};
  std::vector<unsigned char> msg(300);
  for (auto& b : msg)
    b = static_cast<unsigned char>(rng());
  const auto whole = siphash128_of(ref_key, msg.data(), msg.size());
  for (int trial = 0; trial < 200; ++trial) {
    siphash128 h{ref_key};
    size_t at = 0;
    while (at < msg.size()) {
      const size_t n = std::min(msg.size() - at, static_cast<size_t>(rng() % 20));
      h.update(msg.data() + at, n);
      at += n;
    }
    const auto parts = h.final();
    ASSERT_EQ(digest_hex(parts), digest_hex(whole)) << "trial " << trial;
  }
}

TEST(SipHashTest, DependsOnEveryKeyBit) {
  const unsigned char msg[] = "tessera";
  const auto base = digest_hex(siphash128_of(ref_key, msg, sizeof msg));
  for (int bit = 0; bit < 128; ++bit) {
    siphash_key k = ref_key;
    (bit < 64 ? k.k0 : k.k1) ^= uint64_t{1} << (bit % 64);
    EXPECT_NE(digest_hex(siphash128_of(k, msg, sizeof msg)), base) << "key bit " << bit;
  }
}

} // namespace
