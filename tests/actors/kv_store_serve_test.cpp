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
#include "tests/actors/kv_store_node.hpp"
#include "tests/support/curl.hpp"
#include "tests/support/engine_runs.hpp"
#include "tests/support/metrics_text.hpp"
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

/// One worker with a pool of 32 blocks, a kv store of 3 blocks in host
/// memory and the rest on disk under `dir`.
std::unique_ptr<serve_node> start_node(caf::actor_system& sys, const std::filesystem::path& dir) {
  const auto o = tessera::test::kv_store_node_options(dir);
  auto node = serve_node::start(sys, o);
  EXPECT_TRUE(node) << error_text(node.error());
  return node ? std::move(*node) : nullptr;
}

/// Different prompts that fill the pool: a conversation's blocks leave the
/// worker's prefix cache (and the store's host tier, for disk).
void flush(const std::string& url, uint64_t seed) {
  for (uint64_t i = 0; i < 5; ++i)
    (void) complete(url, tessera::test::random_prompt(160, 1000 * seed + i));
}

/// The next turn: `prompt`, its answer, and 20 new tokens.
std::vector<int32_t> next_turn(std::vector<int32_t> prompt, uint64_t seed) {
  auto answer = output_ids(prompt);
  prompt.insert(prompt.end(), answer.begin(), answer.end());
  auto user = tessera::test::random_prompt(20, seed);
  prompt.insert(prompt.end(), user.begin(), user.end());
  return prompt;
}

/// The server's metrics once `series` is above 0 (the store's counters are
/// exported every second), or after 5 s.
std::string metrics_once(const std::string& url, const std::string& series) {
  std::string m;
  for (int i = 0; i < 100; ++i) {
    m = tessera::test::http_get(url + "/metrics").body;
    if (tessera::test::metric_value(m, series) > 0)
      break;
    std::this_thread::sleep_for(50ms);
  }
  return m;
}

TEST(KvStoreServeTest, ThreeTurnsComputeOnlyTheirNewTokensAndMatchNoCache) {
  tessera::test::temp_dir dir;
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto node = start_node(sys, dir.path() / "kvstore");
  ASSERT_TRUE(node);
  const auto url = node->url();

  auto prompt = tessera::test::random_prompt(40, 1);
  std::vector<int64_t> cached;
  for (int turn = 1; turn <= 3; ++turn) {
    auto got = complete(url, prompt);
    EXPECT_EQ(got.out, tessera::test::run_alone("nano", prompt, output_tokens, 0, 7)) << "turn " << turn;
    cached.push_back(got.cached_tokens);
    prompt = next_turn(prompt, 100 + static_cast<uint64_t>(turn));
    flush(url, static_cast<uint64_t>(turn));
  }
  // Turn 1 is new. Turn 2's prompt is 40 + 12 + 20 tokens: the first 51
  // had KV at the end of turn 1 (the last sampled token has none), so 3
  // full blocks (48 tokens) come from the store; turn 3 (104 tokens) gets
  // the 5 full blocks of turn 2's 83.
  EXPECT_EQ(cached, (std::vector<int64_t>{0, 48, 80}));

  const auto m = metrics_once(url, "tessera_kvstore_hits_total{tier=\"disk\"}");
  EXPECT_EQ(tessera::test::metric_value(m, "tessera_kvstore_fetched_blocks_total{worker=\"worker-0\"}"), 8) << m;
  EXPECT_GT(tessera::test::metric_value(m, "tessera_kvstore_hits_total{tier=\"disk\"}"), 0) << m;
  EXPECT_GT(tessera::test::metric_value(m, "tessera_kvstore_spills_total"), 0) << m;
  EXPECT_EQ(tessera::test::metric_value(m, "tessera_kvstore_checksum_failures_total{tier=\"disk\"}"), 0) << m;
  // An exact store: its int8 series are there, at 0.
  EXPECT_EQ(tessera::test::metric_value(m, "tessera_kvstore_int8_blocks_total"), 0) << m;
  EXPECT_EQ(tessera::test::metric_value(m, "tessera_kvstore_int8_refused_total"), 0) << m;
  EXPECT_EQ(tessera::test::metric_value(m, "tessera_kvstore_decode_failures_total"), 0) << m;
  // The default bound (64 MiB per worker) holds these few blocks.
  EXPECT_GT(tessera::test::metric_value(m, "tessera_kvstore_offered_blocks_total{worker=\"worker-0\"}"), 0) << m;
  EXPECT_EQ(tessera::test::metric_value(m, "tessera_kvstore_offer_dropped_blocks_total{worker=\"worker-0\"}"), 0)
    << m;
}

TEST(KvStoreServeTest, ARestartedServerServesTheBlocksItHadOnDisk) {
  tessera::test::temp_dir dir;
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto prompt = tessera::test::random_prompt(40, 2);
  {
    auto first = start_node(sys, dir.path() / "kvstore");
    ASSERT_TRUE(first);
    (void) complete(first->url(), prompt);
    flush(first->url(), 9); // the conversation's blocks go to disk
  } // stopped: its store writes what it still queues and closes
  auto second = start_node(sys, dir.path() / "kvstore");
  ASSERT_TRUE(second);
  prompt = next_turn(prompt, 7);
  auto got = complete(second->url(), prompt);
  EXPECT_EQ(got.out, tessera::test::run_alone("nano", prompt, output_tokens, 0, 7));
  EXPECT_EQ(got.cached_tokens, 48) << "turn 1's 3 full blocks, from the disk the first server left";
  const auto m = metrics_once(second->url(), "tessera_kvstore_hits_total{tier=\"disk\"}");
  EXPECT_EQ(tessera::test::metric_value(m, "tessera_kvstore_hits_total{tier=\"disk\"}"), 3) << m;
}

} // namespace
} // namespace tessera::actors
