// Where the KV block hash's key comes from: derived from the cluster
// secret (never the secret itself), or kept in the disk tier's folder.

#include "cluster/kv_hash_key.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "common/error.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

namespace fs = std::filesystem;
using namespace tessera::cluster;

std::string hex(const kv_hash_key_bytes& k) {
  std::string s;
  char b[3];
  for (auto x : k) {
    std::snprintf(b, sizeof b, "%02x", std::to_integer<unsigned>(x));
    s += b;
  }
  return s;
}

std::string read_all(const fs::path& p) {
  std::ifstream in{p, std::ios::binary};
  return {std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
}

void write_file(const fs::path& p, const std::string& text, mode_t mode = 0600) {
  {
    std::ofstream out{p, std::ios::binary | std::ios::trunc};
    out << text;
  }
  ::chmod(p.c_str(), mode);
}

// HMAC-SHA256(secret, "tessera-kv-block-hash-v1"), first 16 bytes, as
// Python's hmac module computes it.
TEST(KvHashKeyTest, IsTheHmacOfTheSecretWithTheLabel) {
  EXPECT_EQ(hex(kv_hash_key_from_secret("0123456789abcdef-cluster-secret")), "ee124d705279fae54e46bd8917e237b0");
}

TEST(KvHashKeyTest, SameSecretSameKeyAndNeverTheSecretItself) {
  const std::string secret = "0123456789abcdef"; // exactly 16 bytes
  const auto k = kv_hash_key_from_secret(secret);
  EXPECT_EQ(k, kv_hash_key_from_secret(secret));
  EXPECT_NE(k, kv_hash_key_from_secret("0123456789abcdeg"));
  EXPECT_NE(std::memcmp(k.data(), secret.data(), k.size()), 0);
}

TEST(KvHashKeyTest, IsMadeOnceWithMode600AndReadAfter) {
  tessera::test::temp_dir tmp;
  auto a = load_or_create_kv_hash_key(tmp.path());
  ASSERT_TRUE(a) << tessera::error_text(a.error());
  const auto file = tmp.path() / kv_hash_key_file_name;
  struct stat sb {};
  ASSERT_EQ(::stat(file.c_str(), &sb), 0);
  EXPECT_EQ(sb.st_mode & 07777, 0600u);
  EXPECT_EQ(read_all(file), hex(*a) + "\n");
  auto b = load_or_create_kv_hash_key(tmp.path());
  ASSERT_TRUE(b);
  EXPECT_EQ(*a, *b);
  // No temporary file is left behind.
  size_t files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(tmp.path()))
    ++files;
  EXPECT_EQ(files, 1u);
  // Another folder: another random key.
  tessera::test::temp_dir other;
  auto c = load_or_create_kv_hash_key(other.path());
  ASSERT_TRUE(c);
  EXPECT_NE(*a, *c);
}

TEST(KvHashKeyTest, RacingStartsAgreeOnOneKey) {
  tessera::test::temp_dir tmp;
  std::vector<kv_hash_key_bytes> got(8);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < got.size(); ++i)
    threads.emplace_back([&, i] {
      auto k = load_or_create_kv_hash_key(tmp.path());
      ASSERT_TRUE(k) << tessera::error_text(k.error());
      got[i] = *k;
    });
  for (auto& t : threads)
    t.join();
  for (const auto& k : got)
    EXPECT_EQ(k, got[0]);
}

TEST(KvHashKeyTest, AMalformedFileIsAnErrorNamingIt) {
  tessera::test::temp_dir tmp;
  const auto file = tmp.path() / kv_hash_key_file_name;
  const std::pair<std::string, const char*> cases[] = {
      {"", "32 hex digits"},
      {"00112233\n", "32 hex digits"},
      {std::string(32, 'a') + "b\n", "32 hex digits"},
      {std::string(31, 'a') + "z\n", "not a hex digit at byte 31"},
      {std::string(64, '0'), "or more"},
  };
  for (const auto& [text, says] : cases) {
    write_file(file, text);
    auto k = load_or_create_kv_hash_key(tmp.path());
    ASSERT_FALSE(k) << text;
    const auto msg = tessera::error_text(k.error());
    EXPECT_NE(msg.find(file.string()), std::string::npos) << msg;
    EXPECT_NE(msg.find(says), std::string::npos) << msg;
    EXPECT_EQ(read_all(file), text) << "a bad key file is left for the operator";
  }
}

TEST(KvHashKeyTest, AFileOthersMayReadOrALinkIsRefused) {
  tessera::test::temp_dir tmp;
  const auto file = tmp.path() / kv_hash_key_file_name;
  write_file(file, std::string(32, 'a') + "\n", 0644);
  auto k = load_or_create_kv_hash_key(tmp.path());
  ASSERT_FALSE(k);
  EXPECT_NE(tessera::error_text(k.error()).find("chmod 600"), std::string::npos);

  fs::remove(file);
  const auto target = tmp.path() / "elsewhere";
  write_file(target, std::string(32, 'a') + "\n");
  fs::create_symlink(target, file);
  k = load_or_create_kv_hash_key(tmp.path());
  ASSERT_FALSE(k);
  EXPECT_NE(tessera::error_text(k.error()).find("symbolic link"), std::string::npos)
    << tessera::error_text(k.error());
}

TEST(KvHashKeyTest, AFolderThatCannotBeWrittenIsAnError) {
  if (::geteuid() == 0)
    GTEST_SKIP() << "root writes into read-only folders";
  tessera::test::temp_dir tmp;
  ::chmod(tmp.path().c_str(), 0500);
  auto k = load_or_create_kv_hash_key(tmp.path());
  ::chmod(tmp.path().c_str(), 0700);
  ASSERT_FALSE(k);
  EXPECT_NE(tessera::error_text(k.error()).find("cannot be created"), std::string::npos);
}

} // namespace
