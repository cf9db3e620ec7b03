// Who a request comes from (actors/frontend/api_auth.hpp): the Bearer key
// check with its 401s, the cache salt that keeps tenants apart (and that no
// choice of tenant and salt can forge), the request's own cache_salt field,
// and the bounded endpoint label.
#include "actors/frontend/api_auth.hpp"

#include <set>

#include <gtest/gtest.h>

#include "actors/frontend/openai_request.hpp"
#include "common/error.hpp"

namespace tessera::actors::frontend {
namespace {

const std::string key_a = "sk-alice-0123456789abcdef";

std::shared_ptr<const cluster::api_key_table> table() {
  auto t = cluster::api_key_table::parse("[[key]]\nkey = \"" + key_a + "\"\ntenant = \"alice\"\npriority = 3\n",
                                         "keys.toml");
  EXPECT_TRUE(t) << error_text(t.error());
  return std::make_shared<const cluster::api_key_table>(std::move(*t));
}

api_error refused(const std::shared_ptr<const cluster::api_key_table>& keys,
                  std::optional<std::string_view> header) {
  auto r = authenticate(keys, header);
  auto* e = std::get_if<api_error>(&r);
  EXPECT_NE(e, nullptr) << (header ? *header : "no header");
  return e ? *e : api_error{};
}

TEST(ApiAuthTest, WithoutKeysEveryoneIsLetInWithoutATenant) {
  auto r = authenticate(nullptr, std::nullopt);
  ASSERT_EQ(r.index(), 0u);
  EXPECT_EQ(std::get<0>(r), nullptr);
  auto with = authenticate(nullptr, "Bearer whatever");
  ASSERT_EQ(with.index(), 0u);
  EXPECT_EQ(std::get<0>(with), nullptr);
}

TEST(ApiAuthTest, AGoodKeyGivesItsTenantWhichOutlivesTheTable) {
  std::shared_ptr<const cluster::tenant_policy> tenant;
  {
    auto keys = table();
    const std::vector<std::string> headers{"Bearer " + key_a, "bearer  " + key_a + " "};
    for (const auto& h : headers) {
      auto r = authenticate(keys, h);
      ASSERT_EQ(r.index(), 0u) << h;
      ASSERT_NE(std::get<0>(r), nullptr);
      EXPECT_EQ(std::get<0>(r)->name, "alice");
    }
    tenant = std::get<0>(authenticate(keys, "Bearer " + key_a));
  }
  // The table was replaced (a reload): the request's tenant stays valid.
  EXPECT_EQ(tenant->name, "alice");
  EXPECT_EQ(tenant->priority, 3);
}

TEST(ApiAuthTest, MissingMalformedAndUnknownKeysGetA401ThatNeverQuotesTheKey) {
  auto keys = table();
  auto missing = refused(keys, std::nullopt);
  EXPECT_EQ(missing.status, 401);
  EXPECT_EQ(missing.type, "authentication_error");
  EXPECT_EQ(missing.code, "invalid_api_key");
  EXPECT_NE(missing.message.find("needs an API key"), std::string::npos) << missing.message;
  auto basic = refused(keys, "Basic dXNlcjpwYXNz");
  EXPECT_EQ(basic.status, 401);
  EXPECT_NE(basic.message.find("must be \"Bearer <key>\""), std::string::npos) << basic.message;
  auto empty = refused(keys, "Bearer   ");
  EXPECT_NE(empty.message.find("no key"), std::string::npos) << empty.message;
  const std::string wrong = "sk-mallory-guessing-0123";
  auto unknown = refused(keys, "Bearer " + wrong);
  EXPECT_EQ(unknown.status, 401);
  EXPECT_NE(unknown.message.find("unknown key"), std::string::npos) << unknown.message;
  EXPECT_EQ(unknown.message.find(wrong), std::string::npos) << unknown.message;
  auto prefix = refused(keys, "Bearer " + key_a.substr(0, 10));
  EXPECT_EQ(prefix.status, 401) << "a prefix of a key is no key";
}

TEST(ApiAuthTest, TheCacheSaltKeepsEveryTenantAndSaltApart) {
  EXPECT_EQ(compose_cache_salt("", ""), "") << "no tenant, no salt: the shared namespace";
  // Pairs a naive "tenant|salt" would confuse.
  const std::vector<std::pair<std::string, std::string>> pairs = {
    {"a", "b|c"}, {"a|b", "c"}, {"a", ""}, {"", "a"}, {"", "a|"}, {"a", "|"}, {"1:a", ""}, {"", "1:a|"},
    {"alice", "x"}, {"bob", "x"}, {"", "x"}, {"alice", ""}};
  std::set<std::string> salts;
  for (const auto& [ns, salt] : pairs) {
    auto s = compose_cache_salt(ns, salt);
    EXPECT_FALSE(s.empty());
    EXPECT_TRUE(salts.insert(s).second) << "'" << ns << "' + '" << salt << "' collides: " << s;
  }
}

TEST(ApiAuthTest, TheRequestsCacheSaltIsReadAndChecked) {
  auto ok = parse_request(api_kind::completion, R"({"model": "m", "prompt": "hi", "cache_salt": "team-7"})");
  ASSERT_EQ(ok.index(), 0u) << std::get<api_error>(ok).message;
  EXPECT_EQ(std::get<api_request>(ok).cache_salt, "team-7");
  auto none = parse_request(api_kind::completion, R"({"model": "m", "prompt": "hi", "cache_salt": null})");
  ASSERT_EQ(none.index(), 0u);
  EXPECT_EQ(std::get<api_request>(none).cache_salt, "");
  struct bad_case {
    std::string body;
    std::string says;
  };
  const std::vector<bad_case> cases = {
    {R"({"model": "m", "prompt": "hi", "cache_salt": ""})", "cache_salt must be a non-empty string"},
    {R"({"model": "m", "prompt": "hi", "cache_salt": "a\nb"})", "without control characters"},
    {R"({"model": "m", "prompt": "hi", "cache_salt": 5})", "cache_salt must be a string"},
    {R"({"model": "m", "prompt": "hi", "cache_salt": ")" + std::string(300, 'x') + "\"}", "more than the limit of 256"},
  };
  for (const auto& c : cases) {
    auto r = parse_request(api_kind::completion, c.body);
    auto* e = std::get_if<api_error>(&r);
    ASSERT_NE(e, nullptr) << c.body;
    EXPECT_EQ(e->status, 400);
    EXPECT_EQ(e->param, "cache_salt") << e->message;
    EXPECT_NE(e->message.find(c.says), std::string::npos) << e->message;
  }
}

TEST(ApiAuthTest, OnlyKnownEndpointsGetALabelOfTheirOwn) {
  for (std::string_view p : {"/v1/completions", "/v1/chat/completions", "/v1/models", "/health", "/ready", "/live",
                             "/metrics", "/admin/drain", "/admin/fault", "/v1/tokenize", "/v1/detokenize"})
    EXPECT_EQ(endpoint_label(p), p);
  EXPECT_EQ(endpoint_label("/v1/models/nano"), "/v1/models/{id}");
  EXPECT_EQ(endpoint_label("/v1/models/other-9"), "/v1/models/{id}");
  std::set<std::string_view> labels;
  for (int i = 0; i < 1000; ++i) {
    const std::string p = "/v1/x" + std::to_string(i);
    labels.insert(endpoint_label(p));
  }
  labels.insert(endpoint_label("/v1/completions/"));
  labels.insert(endpoint_label("/admin/other"));
  labels.insert(endpoint_label(""));
  EXPECT_EQ(labels, std::set<std::string_view>{"other"});
}

} // namespace
} // namespace tessera::actors::frontend
