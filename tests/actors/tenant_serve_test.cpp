// API keys and tenants on a real server (serve_node, the CPU engine, the
// nano model, curl): /v1/* needs a key (401 otherwise, 200 with one), the
// probes stay open, --protect-metrics closes /metrics, /admin/* is 404
// without an admin key, tenants never see each other's prefix cache unless
// the key file shares it, a request's cache_salt splits it further, and
// 1,000 unknown paths do not grow the metrics.

#include "actors/node/serve_node.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "common/error.hpp"
#include "tests/support/curl.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/test_model.hpp"

namespace tessera::actors {
namespace {

using nlohmann::json;
using tessera::test::http_reply;

const std::string key_a = "sk-tenant-a-0123456789abcdef";
const std::string key_b = "sk-tenant-b-0123456789abcdef";
const std::string key_c = "sk-tenant-c-0123456789abcdef";
const std::string key_d = "sk-tenant-d-0123456789abcdef";

/// POST `body` to `url` with "Authorization: Bearer <key>" (none if empty).
http_reply post(const std::string& url, const std::string& body, const std::string& key) {
  std::vector<std::string> args{"-H", "Content-Type: application/json", "--data-binary", body};
  if (!key.empty())
    args.insert(args.end(), {"-H", "Authorization: Bearer " + key});
  return tessera::test::curl(args, url);
}

http_reply get(const std::string& url, const std::string& key = {}) {
  std::vector<std::string> args;
  if (!key.empty())
    args = {"-H", "Authorization: Bearer " + key};
  return tessera::test::curl(args, url);
}

std::vector<int32_t> prompt_ids(uint64_t seed, int n) {
  std::mt19937_64 rng{seed};
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i)
    p.push_back(static_cast<int32_t>(8 + rng() % 500));
  return p;
}

class TenantServeTest : public ::testing::Test {
protected:
  TenantServeTest() : sys(cfg) {
    // C and D share their cache; A and B do not.
    keys_file = dir.path() / "keys.toml";
    std::ofstream(keys_file) << "[[key]]\nkey = \"" << key_a << "\"\ntenant = \"a\"\n"
                             << "[[key]]\nkey = \"" << key_b << "\"\ntenant = \"b\"\n"
                             << "[[key]]\nkey = \"" << key_c << "\"\ntenant = \"c\"\nshare_cache_with = [\"d\"]\n"
                             << "[[key]]\nkey = \"" << key_d << "\"\ntenant = \"d\"\n";
    std::filesystem::permissions(keys_file, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  }

  std::unique_ptr<serve_node> start(bool with_keys, bool protect_metrics = false) {
    serve_options o;
    o.model_dir = tessera::test::test_model_dir("nano");
    o.model_name = "nano";
    o.mode = "agg";
    o.decode_workers = 1;
    o.port = 0;
    o.threads_per_worker = 1;
    o.kv_cache_bytes = size_t{8} << 20;
    o.kv_store_host_bytes = size_t{64} << 20;
    o.fault_injection = true; // /admin/fault would exist, if there were an admin key
    if (with_keys)
      o.api_keys_file = keys_file;
    o.protect_metrics = protect_metrics;
    auto n = serve_node::start(sys, o);
    EXPECT_TRUE(n) << error_text(n.error());
    return n ? std::move(*n) : nullptr;
  }

  /// cached_tokens of a completion of `prompt` as `key` (-1: it failed).
  static int cached_tokens(const serve_node& node, const std::vector<int32_t>& prompt, const std::string& key,
                           const std::string& cache_salt = {}) {
    json b = {{"model", "nano"}, {"prompt", prompt}, {"max_tokens", 2}, {"temperature", 0}};
    if (!cache_salt.empty())
      b["cache_salt"] = cache_salt;
    auto r = post(node.url() + "/v1/completions", b.dump(), key);
    EXPECT_EQ(r.status, 200) << r.body;
    auto j = json::parse(r.body, nullptr, false);
    if (r.status != 200 || !j.is_object())
      return -1;
    EXPECT_EQ(j["usage"]["prompt_tokens"], prompt.size());
    return j["usage"].contains("prompt_tokens_details")
             ? j["usage"]["prompt_tokens_details"].value("cached_tokens", 0)
             : 0;
  }

  tessera::test::temp_dir dir;
  std::filesystem::path keys_file;
  caf::actor_system_config cfg;
  caf::actor_system sys;
};

TEST_F(TenantServeTest, TheApiNeedsAKeyAndTheProbesStayOpen) {
  auto node = start(true);
  ASSERT_TRUE(node);
  const auto url = node->url() + "/v1/completions";
  const std::string body = R"({"model": "nano", "prompt": "hi", "max_tokens": 2})";
  auto missing = post(url, body, "");
  EXPECT_EQ(missing.status, 401) << missing.body;
  auto e = json::parse(missing.body, nullptr, false);
  ASSERT_TRUE(e.is_object()) << missing.body;
  EXPECT_EQ(e["error"]["type"], "authentication_error");
  EXPECT_EQ(e["error"]["code"], "invalid_api_key");
  EXPECT_NE(e["error"]["message"].get<std::string>().find("needs an API key"), std::string::npos) << missing.body;
  auto unknown = post(url, body, "sk-not-a-key-at-all-000000");
  EXPECT_EQ(unknown.status, 401) << unknown.body;
  EXPECT_NE(unknown.body.find("unknown key"), std::string::npos) << unknown.body;
  EXPECT_EQ(unknown.body.find("sk-not-a-key"), std::string::npos) << "the key is never echoed";
  EXPECT_EQ(get(node->url() + "/v1/models").status, 401);
  auto headers = tessera::test::curl({"-D", "-"}, node->url() + "/v1/models");
  EXPECT_NE(headers.body.find("WWW-Authenticate: Bearer"), std::string::npos) << headers.body;
  EXPECT_EQ(get(node->url() + "/v1/nope").status, 401) << "nothing under /v1/ is told without a key";

  auto ok = post(url, body, key_a);
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(get(node->url() + "/v1/models", key_b).status, 200);
  EXPECT_EQ(get(node->url() + "/v1/nope", key_b).status, 404);

  EXPECT_EQ(get(node->url() + "/health").status, 200);
  EXPECT_EQ(get(node->url() + "/ready").status, 200);
  EXPECT_EQ(get(node->url() + "/live").status, 200);
  auto m = get(node->url() + "/metrics");
  EXPECT_EQ(m.status, 200);
  EXPECT_NE(m.body.find("tessera_request_errors_total{kind=\"invalid_api_key\"} 5"), std::string::npos) << m.body;

  // No admin key: no admin endpoint, even with fault injection on.
  auto fault = post(node->url() + "/admin/fault", R"({"worker": "worker-0", "fault": "crash"})", key_a);
  EXPECT_EQ(fault.status, 404) << fault.body;
  auto drain = post(node->url() + "/admin/drain", R"({"node": "local"})", "");
  EXPECT_EQ(drain.status, 404) << drain.body;
  EXPECT_EQ(post(url, body, key_a).status, 200) << "the worker still serves";
}

TEST_F(TenantServeTest, ProtectMetricsClosesMetricsOnly) {
  auto node = start(true, true);
  ASSERT_TRUE(node);
  auto m = get(node->url() + "/metrics");
  EXPECT_EQ(m.status, 401) << m.body;
  EXPECT_EQ(get(node->url() + "/metrics", key_c).status, 200);
  EXPECT_EQ(get(node->url() + "/health").status, 200);
  EXPECT_EQ(get(node->url() + "/live").status, 200);
}

TEST_F(TenantServeTest, TenantsDoNotSeeEachOthersPrefixCacheUnlessShared) {
  auto node = start(true);
  ASSERT_TRUE(node);
  const auto prompt = prompt_ids(21, 200);
  EXPECT_EQ(cached_tokens(*node, prompt, key_a), 0);
  EXPECT_EQ(cached_tokens(*node, prompt, key_b), 0) << "b must not hit a's blocks";
  EXPECT_GT(cached_tokens(*node, prompt, key_a), 100) << "a hits its own";
  EXPECT_GT(cached_tokens(*node, prompt, key_b), 100) << "and b its own, once it sent it";

  // c and d share (share_cache_with): d's first try hits c's blocks.
  const auto shared = prompt_ids(22, 200);
  EXPECT_EQ(cached_tokens(*node, shared, key_c), 0);
  EXPECT_GT(cached_tokens(*node, shared, key_d), 100);
  EXPECT_EQ(cached_tokens(*node, shared, key_a), 0) << "a does not share with c";

  // The request's cache_salt splits a tenant's cache further.
  const auto salted = prompt_ids(23, 200);
  EXPECT_EQ(cached_tokens(*node, salted, key_a, "s1"), 0);
  EXPECT_EQ(cached_tokens(*node, salted, key_a, "s2"), 0);
  EXPECT_EQ(cached_tokens(*node, salted, key_a), 0);
  EXPECT_GT(cached_tokens(*node, salted, key_a, "s1"), 100);
}

TEST_F(TenantServeTest, WithoutKeysTheRequestsCacheSaltStillSplitsTheCache) {
  auto node = start(false);
  ASSERT_TRUE(node);
  const auto prompt = prompt_ids(31, 200);
  EXPECT_EQ(cached_tokens(*node, prompt, ""), 0);
  EXPECT_GT(cached_tokens(*node, prompt, ""), 100) << "one shared namespace without keys";
  EXPECT_EQ(cached_tokens(*node, prompt, "", "mine"), 0);
  EXPECT_GT(cached_tokens(*node, prompt, "", "mine"), 100);
  EXPECT_EQ(get(node->url() + "/v1/models").status, 200) << "no keys: no authentication";
  EXPECT_EQ(post(node->url() + "/admin/fault", R"({"worker": "worker-0", "fault": "crash"})", "").status, 404)
    << "fault injection without an admin key is no open door";
}

TEST_F(TenantServeTest, ThousandUnknownPathsDoNotGrowTheMetrics) {
  auto node = start(false);
  ASSERT_TRUE(node);
  // The request counter's series and their bytes (other series come and
  // go with the workers' heartbeats).
  auto series = [&] {
    auto m = get(node->url() + "/metrics").body;
    size_t n = 0;
    size_t bytes = 0;
    for (size_t at = m.find("tessera_requests_total{"); at != std::string::npos;
         at = m.find("tessera_requests_total{", at + 1)) {
      ++n;
      bytes += m.find('\n', at) - at;
    }
    EXPECT_EQ(m.find("unknown-"), std::string::npos) << "no path leaks into a label";
    return std::make_pair(n, bytes);
  };
  EXPECT_EQ(get(node->url() + "/v1/first-unknown").status, 404);
  const auto before = series();
  // One curl, one connection, 1,000 distinct paths.
  std::vector<std::string> args;
  for (int i = 0; i < 999; ++i)
    args.push_back(node->url() + "/v1/unknown-" + std::to_string(i));
  auto r = tessera::test::curl(args, node->url() + "/v1/unknown-last");
  EXPECT_EQ(r.status, 404);
  const auto after = series();
  EXPECT_EQ(after.first, before.first) << "no new tessera_requests_total series";
  EXPECT_LE(after.second, before.second + 8) << "only counts grew (1 -> 1001, the /metrics count)";
  auto m = get(node->url() + "/metrics").body;
  EXPECT_NE(m.find("tessera_requests_total{endpoint=\"other\"} 1001"), std::string::npos) << m;
}

} // namespace
} // namespace tessera::actors
