// Cross-turn KV reuse through the node's kv store, end to end over HTTP: a
// three-turn conversation on one worker whose own pool is flushed between
// turns (so the earlier turns' blocks can only come back from the store),
// with a host tier of a few blocks over RocksDB (so they come back from
// disk). Turns 2 and 3 compute only their new tokens, and every turn's
// output equals one engine without any cache.

#include "actors/node/serve_node.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/error.hpp"
#include "tests/support/curl.hpp"
#include "tests/support/engine_runs.hpp"
#include "tests/support/served_output.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/test_model.hpp"

namespace tessera::actors {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

constexpr int output_tokens = 12;

struct turn_result {
  tessera::test::served_output out;
  int64_t cached_tokens = -1;
};

turn_result complete(const std::string& url, const std::vector<int32_t>& prompt) {
  json b = {{"model", "nano"}, {"prompt", prompt}, {"max_tokens", output_tokens}, {"temperature", 0},
            {"seed", 7}, {"ignore_eos", true}, {"logprobs", 0}};
  auto r = tessera::test::http_post_json(url + "/v1/completions", b.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  auto j = json::parse(r.body, nullptr, false);
  turn_result t;
  if (!j.is_object() || !j.contains("choices"))
    return t;
  t.out = tessera::test::from_completion(j);
  t.cached_tokens = j["usage"].value("prompt_tokens_details", json::object()).value("cached_tokens", int64_t{0});
  return t;
}

/// The output token ids (greedy) of `prompt` on one engine.
std::vector<int32_t> output_ids(const std::vector<int32_t>& prompt) {
  auto eng = tessera::test::make_test_engine("nano");
  return tessera::test::run_one(*eng, tessera::test::make_request(1, prompt, output_tokens)).tokens;
}

double metric(const std::string& text, const std::string& series) {
  auto at = text.find("\n" + series + " ");
  return at == std::string::npos ? -1 : std::stod(text.substr(at + series.size() + 2));
}

TEST(KvStoreServeTest, ThreeTurnsComputeOnlyTheirNewTokensAndMatchNoCache) {
  tessera::test::temp_dir dir;
  auto probe = tessera::test::make_test_engine("nano");
  const size_t bb = probe->get_backend().layout().block_bytes();
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  serve_options o;
  o.model_dir = tessera::test::test_model_dir("nano");
  o.model_name = "nano";
  o.mode = "agg";
  o.port = 0;
  o.threads_per_worker = 1;
  o.kv_cache_bytes = 32 * bb;                   // a pool of 32 blocks
  o.kv_store_host_bytes = 3 * (bb + 128);       // 3 blocks in host memory
  o.kv_store_disk_dir = dir.path() / "kvstore"; // the rest on disk
  auto node = serve_node::start(sys, o);
  ASSERT_TRUE(node) << error_text(node.error());
  const auto url = (*node)->url();

  // Different prompts that fill the pool: the conversation's blocks leave
  // the worker's prefix cache (and the store's host tier, for disk).
  auto flush = [&](uint64_t seed) {
    for (uint64_t i = 0; i < 5; ++i)
      (void) complete(url, tessera::test::random_prompt(160, 1000 * seed + i));
  };

  auto prompt = tessera::test::random_prompt(40, 1);
  std::vector<int64_t> cached;
  for (int turn = 1; turn <= 3; ++turn) {
    auto got = complete(url, prompt);
    EXPECT_EQ(got.out, tessera::test::run_alone("nano", prompt, output_tokens, 0, 7)) << "turn " << turn;
    cached.push_back(got.cached_tokens);
    // The next turn: this prompt, the answer, and 20 new tokens.
    auto answer = output_ids(prompt);
    prompt.insert(prompt.end(), answer.begin(), answer.end());
    auto user = tessera::test::random_prompt(20, 100 + static_cast<uint64_t>(turn));
    prompt.insert(prompt.end(), user.begin(), user.end());
    flush(static_cast<uint64_t>(turn));
  }
  // Turn 1 is new. Turn 2's prompt is 40 + 12 + 20 tokens: the first 51
  // had KV at the end of turn 1 (the last sampled token has none), so 3
  // full blocks (48 tokens) come from the store; turn 3 (104 tokens) gets
  // the 5 full blocks of turn 2's 83.
  EXPECT_EQ(cached, (std::vector<int64_t>{0, 48, 80}));

  std::string m;
  for (int i = 0; i < 100; ++i) { // the store's counters are exported every second
    m = tessera::test::http_get(url + "/metrics").body;
    if (metric(m, "tessera_kvstore_hits_total{tier=\"disk\"}") > 0)
      break;
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(metric(m, "tessera_kvstore_fetched_blocks_total{worker=\"worker-0\"}"), 8) << m;
  EXPECT_GT(metric(m, "tessera_kvstore_hits_total{tier=\"disk\"}"), 0) << m;
  EXPECT_GT(metric(m, "tessera_kvstore_spills_total"), 0) << m;
  EXPECT_EQ(metric(m, "tessera_kvstore_checksum_failures_total{tier=\"disk\"}"), 0) << m;
}

} // namespace
} // namespace tessera::actors
