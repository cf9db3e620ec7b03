// The API key file (cluster/api_keys.hpp): tenants and their limits, keys
// found by their SHA-256 only, every bad field named with its file and
// line, duplicate keys and conflicting limits refused, the cache namespace
// as the closure of share_cache_with, and plaintext keys kept private.
#include "cluster/api_keys.hpp"

#include <fstream>

#include "cluster/cluster_config.hpp"

#include <gtest/gtest.h>

#include "common/error.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

using namespace tessera::cluster;

const std::string key_a = "sk-alice-0123456789abcdef";
const std::string key_a2 = "sk-alice-second-key-98765";
const std::string key_b = "sk-bob-0123456789abcdef00";

std::string error_of(const std::string& text) {
  auto t = api_key_table::parse(text, "keys.toml");
  EXPECT_FALSE(t) << text;
  return t ? std::string{} : tessera::error_text(t.error());
}

TEST(ApiKeysTest, ReadsTenantsLimitsAndFindsKeys) {
  const auto text = "[[key]]\nkey = \"" + key_a + "\"\ntenant = \"alice\"\nunits_per_minute = 60000\n" +
                    "max_concurrent = 8\npriority = 10\n" + "[[key]]\nkey = \"" + key_a2 +
                    "\"\ntenant = \"alice\"\n" + "[[key]]\nkey_sha256 = \"" + api_key_sha256_hex(key_b) +
                    "\"\ntenant = \"bob\"\n";
  auto t = api_key_table::parse(text, "keys.toml");
  ASSERT_TRUE(t) << tessera::error_text(t.error());
  EXPECT_EQ(t->key_count(), 3u);
  ASSERT_EQ(t->tenants().size(), 2u);
  const auto* a = t->find(key_a);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->name, "alice");
  EXPECT_EQ(a->units_per_minute, 60000.0);
  EXPECT_EQ(a->max_concurrent, 8);
  EXPECT_EQ(a->priority, 10);
  EXPECT_EQ(a->cache_namespace, "alice");
  EXPECT_EQ(t->find(key_a2), a) << "a second key of the same tenant";
  const auto* b = t->find(key_b);
  ASSERT_NE(b, nullptr) << "found by its key_sha256";
  EXPECT_EQ(b->name, "bob");
  EXPECT_FALSE(b->units_per_minute);
  EXPECT_FALSE(b->max_concurrent);
  EXPECT_EQ(b->priority, 0);
  EXPECT_EQ(b->cache_namespace, "bob");
  EXPECT_EQ(t->find(""), nullptr);
  EXPECT_EQ(t->find(key_a + "x"), nullptr);
  EXPECT_EQ(t->find(key_a.substr(0, key_a.size() - 1)), nullptr);
  EXPECT_EQ(t->find(api_key_sha256_hex(key_b)), nullptr) << "the digest is not a key";
}

TEST(ApiKeysTest, Sha256HexIsTheStandardDigest) {
  // sha256("abc"), FIPS 180-2.
  EXPECT_EQ(api_key_sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(ApiKeysTest, ShareCacheWithIsSymmetricAndTransitive) {
  std::string text;
  int n = 0;
  auto add = [&](const std::string& tenant, const std::string& share) {
    text += "[[key]]\nkey = \"sk-key-number-" + std::to_string(n++) + "-padding\"\ntenant = \"" + tenant + "\"\n";
    if (!share.empty())
      text += "share_cache_with = [" + share + "]\n";
  };
  add("zed", "\"mia\"");
  add("mia", "");
  add("bob", "\"mia\"");
  add("eve", "");
  add("kim", "\"kim\"");
  auto t = api_key_table::parse(text, "keys.toml");
  ASSERT_TRUE(t) << tessera::error_text(t.error());
  const auto& ts = t->tenants();
  EXPECT_EQ(ts.at("zed").cache_namespace, "bob") << "zed - mia - bob: the smallest name";
  EXPECT_EQ(ts.at("mia").cache_namespace, "bob") << "mia never named anyone, yet shares";
  EXPECT_EQ(ts.at("bob").cache_namespace, "bob");
  EXPECT_EQ(ts.at("eve").cache_namespace, "eve");
  EXPECT_EQ(ts.at("kim").cache_namespace, "kim");
}

TEST(ApiKeysTest, EachBadFieldIsNamedWithItsLine) {
  struct bad_case {
    std::string text;
    std::string says;
  };
  const std::string k = "key = \"" + key_a + "\"\n";
  const std::vector<bad_case> cases = {
    {"[[key]]\n" + k + "tenant = \"a\"\nunits_per_mintue = 5\n", "unknown key 'key[0] (line 1).units_per_mintue'"},
    {"[[key]]\n" + k + "tenant = \"a\"\nunits_per_mintue = 5\n", "did you mean 'units_per_minute'?"},
    {"[[key]]\n" + k + "tenant = \"a\"\nmax_concurrent = 0\n", "'key[0] (line 1).max_concurrent' must be an integer in [1, 1000000], got 0"},
    {"[[key]]\n" + k + "tenant = \"a\"\nmax_concurrent = \"8\"\n", "max_concurrent' must be an integer"},
    {"[[key]]\n" + k + "tenant = \"a\"\nunits_per_minute = -1\n", "units_per_minute' must be a number in (0"},
    {"[[key]]\n" + k + "tenant = \"a\"\npriority = 1.5\n", "priority' must be an integer"},
    {"[[key]]\n" + k + "tenant = \"a b\"\n", "tenant' must be 1 to 64 of"},
    {"[[key]]\n" + k + "tenant = 7\n", "tenant' must be a string"},
    {"[[key]]\n" + k, "key[0] (line 1): needs tenant"},
    {"[[key]]\ntenant = \"a\"\n", "needs key = \"...\" or key_sha256"},
    {"[[key]]\n" + k + "key_sha256 = \"" + api_key_sha256_hex("x") + "\"\ntenant = \"a\"\n", "not both"},
    {"[[key]]\nkey = \"short\"\ntenant = \"a\"\n", "'key[0] (line 1).key' must be 16 to 512 bytes, got 5"},
    {"[[key]]\nkey = \"has a space in the key text\"\ntenant = \"a\"\n", "printable ASCII without spaces"},
    {"[[key]]\nkey_sha256 = \"abc\"\ntenant = \"a\"\n", "key_sha256' must be 64 hex digits"},
    {"[[key]]\nkey_sha256 = \"" + std::string(64, 'g') + "\"\ntenant = \"a\"\n", "must be 64 hex digits"},
    {"[[key]]\n" + k + "tenant = \"a\"\nshare_cache_with = \"b\"\n", "must be a list of tenant names"},
    {"[[key]]\n" + k + "tenant = \"alice\"\nshare_cache_with = [\"alcie\"]\n",
     "line 1: share_cache_with names 'alcie', which no [[key]] has as its tenant; did you mean 'alice'?"},
    {"kye = 1\n", "unknown key 'kye'; did you mean 'key'?"},
    {"", "holds no [[key]] table"},
    {"key = \"" + key_a + "\"\n", "'key' must be a list of [[key]] tables"},
    {"[[key]]\n" + k + "tenant = \"a\"\n[[key\n", "line 4"},
    {"\n\n[[key]]\n" + k + "tenant = \"a\"\n[[key]]\nkey = \"x\"\ntenant = \"b\"\n", "key[1] (line 6).key"},
  };
  for (const auto& c : cases) {
    const auto e = error_of(c.text);
    EXPECT_NE(e.find("keys.toml: "), std::string::npos) << e;
    EXPECT_NE(e.find(c.says), std::string::npos) << c.text << "\n-> " << e;
    EXPECT_EQ(e.find(key_a), std::string::npos) << "an error never shows a key: " << e;
  }
}

TEST(ApiKeysTest, DuplicateKeysAndConflictingLimitsNameBothLines) {
  const std::string a = "[[key]]\nkey = \"" + key_a + "\"\ntenant = \"alice\"\n";
  auto dup = error_of(a + "[[key]]\nkey = \"" + key_a + "\"\ntenant = \"bob\"\n");
  EXPECT_NE(dup.find("line 4: the same key as line 1"), std::string::npos) << dup;
  auto dup_digest = error_of(a + "[[key]]\nkey_sha256 = \"" + api_key_sha256_hex(key_a) + "\"\ntenant = \"alice\"\n");
  EXPECT_NE(dup_digest.find("line 4: the same key as line 1"), std::string::npos)
    << "a key and its own digest are one key: " << dup_digest;
  auto units = error_of("[[key]]\nkey = \"" + key_a + "\"\ntenant = \"alice\"\nunits_per_minute = 100\n" +
                        "[[key]]\nkey = \"" + key_a2 + "\"\ntenant = \"alice\"\nunits_per_minute = 200\n");
  EXPECT_NE(units.find("line 5: tenant 'alice' has units_per_minute = 200, but line 1 gave it 100"), std::string::npos)
    << units;
  auto prio = error_of("[[key]]\nkey = \"" + key_a + "\"\ntenant = \"alice\"\npriority = 1\n" + "[[key]]\nkey = \"" +
                       key_a2 + "\"\ntenant = \"alice\"\npriority = 2\n");
  EXPECT_NE(prio.find("priority = 2, but line 1 gave it 1"), std::string::npos) << prio;
  // Leaving a limit out in one of a tenant's entries is no conflict.
  auto ok = api_key_table::parse("[[key]]\nkey = \"" + key_a + "\"\ntenant = \"alice\"\nmax_concurrent = 3\n" +
                                   "[[key]]\nkey = \"" + key_a2 + "\"\ntenant = \"alice\"\n",
                                 "keys.toml");
  ASSERT_TRUE(ok) << tessera::error_text(ok.error());
  EXPECT_EQ(ok->find(key_a2)->max_concurrent, 3);
}

TEST(ApiKeysTest, LoadRefusesAPlaintextKeyFileOthersCanRead) {
  tessera::test::temp_dir dir;
  const auto plain = dir.path() / "keys.toml";
  std::ofstream(plain) << "[[key]]\nkey = \"" << key_a << "\"\ntenant = \"alice\"\n";
  std::filesystem::permissions(plain, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
                                        std::filesystem::perms::group_read | std::filesystem::perms::others_read);
  auto open = api_key_table::load(plain);
  ASSERT_FALSE(open);
  EXPECT_NE(tessera::error_text(open.error()).find("chmod 600 " + plain.string()), std::string::npos)
    << tessera::error_text(open.error());
  std::filesystem::permissions(plain, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  auto t = api_key_table::load(plain);
  ASSERT_TRUE(t) << tessera::error_text(t.error());
  EXPECT_NE(t->find(key_a), nullptr);
  // Digests only: readable by others is fine.
  const auto hashed = dir.path() / "hashed.toml";
  std::ofstream(hashed) << "[[key]]\nkey_sha256 = \"" << api_key_sha256_hex(key_b) << "\"\ntenant = \"bob\"\n";
  std::filesystem::permissions(hashed, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
                                         std::filesystem::perms::others_read);
  auto h = api_key_table::load(hashed);
  ASSERT_TRUE(h) << tessera::error_text(h.error());
  EXPECT_NE(h->find(key_b), nullptr);
  auto missing = api_key_table::load(dir.path() / "nope.toml");
  ASSERT_FALSE(missing);
  EXPECT_NE(tessera::error_text(missing.error()).find("nope.toml: cannot be read"), std::string::npos);
  // A bad file names itself and the line.
  const auto bad = dir.path() / "bad.toml";
  std::ofstream(bad) << "[[key]]\nkey_sha256 = \"zz\"\ntenant = \"bob\"\n";
  auto b = api_key_table::load(bad);
  ASSERT_FALSE(b);
  EXPECT_NE(tessera::error_text(b.error()).find(bad.string() + ": 'key[0] (line 1).key_sha256'"), std::string::npos)
    << tessera::error_text(b.error());
}

TEST(ApiKeysTest, TheClusterConfigNamesTheKeyFileBesideItself) {
  tessera::test::temp_dir dir;
  const auto toml = dir.path() / "c.toml";
  const std::string node = "[[node]]\nid = \"f\"\naddress = \"127.0.0.1:14000\"\nroles = [\"frontend\", \"router\", "
                           "\"worker\"]\nhttp = \"127.0.0.1:9000\"\n";
  std::ofstream(toml) << "transport = \"loopback\"\napi_keys_file = \"keys.toml\"\nprotect_metrics = true\n" << node;
  auto c = load_cluster_config(toml);
  ASSERT_TRUE(c) << tessera::error_text(c.error());
  EXPECT_EQ(c->api_keys_file, (dir.path() / "keys.toml").string());
  EXPECT_TRUE(c->protect_metrics);
  auto plain = parse_cluster_config("transport = \"loopback\"\n" + node, "c.toml");
  ASSERT_TRUE(plain) << tessera::error_text(plain.error());
  EXPECT_EQ(plain->api_keys_file, "");
  EXPECT_FALSE(plain->protect_metrics);
  auto typo = parse_cluster_config("transport = \"loopback\"\napi_key_file = \"k\"\n" + node, "c.toml");
  ASSERT_FALSE(typo);
  EXPECT_NE(tessera::error_text(typo.error()).find("did you mean 'api_keys_file'?"), std::string::npos)
    << tessera::error_text(typo.error());
}

} // namespace
