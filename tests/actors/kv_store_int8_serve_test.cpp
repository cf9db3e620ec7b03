// serve --kv-store-int8 end to end over HTTP: a worker whose own pool is
// flushed between two turns gets the first turn's blocks back from an int8
// kv store (dequantized to its KV dtype), so the second turn computes only
// its new tokens. The output may differ from an exact run's (the KV is
// quantized); bench/README.md measures by how much.

#include "actors/node/serve_node.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/error.hpp"
#include "tests/actors/kv_store_node.hpp"
#include "tests/support/curl.hpp"
#include "tests/support/engine_runs.hpp"
#include "tests/support/metrics_text.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/test_model.hpp"

namespace tessera::actors {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

constexpr int output_tokens = 12;

// The completion's output token count and cached prompt tokens.
std::pair<int64_t, int64_t> complete(const std::string& url, const std::vector<int32_t>& prompt) {
  json b = {{"model", "nano"}, {"prompt", prompt}, {"max_tokens", output_tokens},
            {"temperature", 0},  {"ignore_eos", true}};
  auto r = tessera::test::http_post_json(url + "/v1/completions", b.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  auto j = json::parse(r.body, nullptr, false);
  if (!j.is_object() || !j.contains("usage"))
    return {-1, -1};
  return {j["usage"].value("completion_tokens", int64_t{-1}),
          j["usage"].value("prompt_tokens_details", json::object()).value("cached_tokens", int64_t{0})};
}

TEST(KvStoreInt8ServeTest, TheNextTurnComesBackFromQuantizedBlocks) {
  tessera::test::temp_dir dir;
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto o = tessera::test::kv_store_node_options(dir.path() / "kvstore"); // 5 int8 blocks in host memory
  o.kv_store_int8 = true;
  auto node = serve_node::start(sys, o);
  ASSERT_TRUE(node) << error_text(node.error());
  const auto url = (*node)->url();
  EXPECT_NE((*node)->description().find("int8 blocks"), std::string::npos) << (*node)->description();

  auto prompt = tessera::test::random_prompt(40, 1);
  EXPECT_EQ(complete(url, prompt), (std::pair<int64_t, int64_t>{output_tokens, 0}));
  // Other prompts fill the worker's pool: turn 1's blocks leave it.
  for (uint64_t i = 0; i < 5; ++i)
    (void) complete(url, tessera::test::random_prompt(160, 1000 + i));
  auto user = tessera::test::random_prompt(30, 5);
  prompt.insert(prompt.end(), user.begin(), user.end());
  // Turn 1's 40 tokens had KV: its 2 full blocks come from the store.
  EXPECT_EQ(complete(url, prompt), (std::pair<int64_t, int64_t>{output_tokens, 32}));

  std::string m;
  for (int i = 0; i < 100; ++i) { // the store's counters are exported every second
    m = tessera::test::http_get(url + "/metrics").body;
    if (tessera::test::metric_value(m, "tessera_kvstore_fetched_blocks_total{worker=\"worker-0\"}") > 0 &&
        tessera::test::metric_value(m, "tessera_kvstore_int8_blocks_total") > 0)
      break;
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(tessera::test::metric_value(m, "tessera_kvstore_fetched_blocks_total{worker=\"worker-0\"}"), 2) << m;
  EXPECT_EQ(tessera::test::metric_value(m, "tessera_kvstore_checksum_failures_total{tier=\"host\"}"), 0) << m;
  EXPECT_EQ(tessera::test::metric_value(m, "tessera_kvstore_checksum_failures_total{tier=\"disk\"}"), 0) << m;
  // Every block put was quantized (random weights: no NaN, no infinity)
  // and every one read back decoded.
  EXPECT_GE(tessera::test::metric_value(m, "tessera_kvstore_int8_blocks_total"), 2) << m;
  EXPECT_EQ(tessera::test::metric_value(m, "tessera_kvstore_int8_refused_total"), 0) << m;
  EXPECT_EQ(tessera::test::metric_value(m, "tessera_kvstore_decode_failures_total"), 0) << m;
  EXPECT_NE(m.find("# HELP tessera_kvstore_int8_blocks_total "), std::string::npos) << m;
}

} // namespace
} // namespace tessera::actors
