// A kv store on a node of its own (roles = ["kvstore"]) serving a worker
// node that keeps none (store = "store"), as real `tessera node` processes
// over UCX: the worker offers its finished blocks to the store over the
// bridge, and after the worker restarted (its pool empty) a prompt with the
// same prefix is fetched from the store node and the completion equals one
// engine alone, token for token (greedy); the store node's and the worker's
// counters show it served the blocks. Then the store node is killed: the
// next requests are computed (right, none lost), offers to it are dropped
// at once; restarted, it takes offers again.

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/child_process.hpp"
#include "common/error.hpp"
#include "tests/support/curl.hpp"
#include "tests/support/metrics_text.hpp"
#include "tests/support/served_output.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/test_model.hpp"

namespace {

using namespace std::chrono_literals;
using namespace tessera;
using nlohmann::json;
using tessera::test::free_port;

struct StoreNodeClusterTest : ::testing::Test {
  void SetUp() override {
    const auto secret = dir.path() / "cluster.secret";
    std::ofstream(secret) << "test-cluster-secret-0123456789abcdef\n";
    std::filesystem::permissions(secret, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write,
                                 std::filesystem::perm_options::replace);
    http = free_port();
    worker_metrics = free_port();
    store_metrics = free_port();
    std::ofstream(config)
      << "model = \"" << test::test_model_dir("nano").string() << "\"\n"
      << "served_model_name = \"nano\"\nthreads_per_worker = 1\nkv_cache_mb = 8\nkvstore_host_mb = 16\n"
      << "ucx_tls = \"tcp\"\ncluster_secret_file = \"cluster.secret\"\n"
      << "[[node]]\nid = \"front\"\naddress = \"127.0.0.1:" << free_port()
      << "\"\nroles = [\"frontend\", \"router\"]\nhttp = \"127.0.0.1:" << http << "\"\n"
      << "[[node]]\nid = \"w\"\naddress = \"127.0.0.1:" << free_port()
      << "\"\nroles = [\"worker\"]\nstore = \"store\"\nmetrics = \"127.0.0.1:" << worker_metrics << "\"\n"
      << "[[node]]\nid = \"store\"\naddress = \"127.0.0.1:" << free_port()
      << "\"\nroles = [\"kvstore\"]\nmetrics = \"127.0.0.1:" << store_metrics << "\"\n";
    for (const char* id : {"store", "w", "front"})
      start(id);
    url = "http://127.0.0.1:" + std::to_string(http);
    ASSERT_TRUE(wait_healthy()) << "the cluster did not come up";
  }

  void TearDown() override {
    for (auto& [id, n] : nodes)
      n.kill(SIGTERM);
    for (auto& [id, n] : nodes)
      (void) n.wait(30s);
  }

  /// Starts node `id` and waits for its "ready" line.
  void start(const std::string& id) {
    const std::string bin = std::string{getenv("TESSERA_BINARY_DIR")} + "/cli/tessera";
    auto n = child_process::spawn(bin, {"node", "--config", config.string(), "--node", id});
    ASSERT_TRUE(n) << error_text(n.error());
    auto ready = n->read_line(60s);
    ASSERT_TRUE(ready) << error_text(ready.error());
    ASSERT_NE(ready->find("ready"), std::string::npos) << *ready;
    nodes.insert_or_assign(id, std::move(*n));
  }

  bool wait_healthy() {
    for (int i = 0; i < 300; ++i) {
      if (test::http_get(url + "/health").body.find("\"workers\":1") != std::string::npos)
        return true;
      std::this_thread::sleep_for(50ms);
    }
    return false;
  }

  std::string metrics_of(uint16_t port) { return test::http_get("http://127.0.0.1:" + std::to_string(port) + "/metrics").body; }

  /// Waits up to 10 s until metric `series` of the node at `port` is at
  /// least `at_least`; its last value.
  double wait_metric(uint16_t port, const std::string& series, double at_least) {
    double v = -1;
    for (int i = 0; i < 200; ++i) {
      v = test::metric_value(metrics_of(port), series);
      if (v >= at_least)
        break;
      std::this_thread::sleep_for(50ms);
    }
    return v;
  }

  /// A greedy completion of `prompt` (10 tokens) through the cluster,
  /// checked against one engine alone.
  void expect_right(const std::vector<int32_t>& prompt, const std::string& what) {
    json body = {{"model", "nano"},       {"prompt", prompt}, {"max_tokens", 10},
                 {"temperature", 0.0}, {"ignore_eos", true}, {"logprobs", 0}};
    auto out = test::http_post_json(url + "/v1/completions", body.dump()).body;
    auto j = json::parse(out, nullptr, false);
    ASSERT_TRUE(j.is_object() && j.contains("choices")) << what << ": " << out;
    EXPECT_EQ(test::from_completion(j), test::run_alone("nano", prompt, 10, 0.0f, 0)) << what;
  }

  static std::vector<int32_t> prompt_of(int n, uint64_t seed) {
    std::mt19937_64 rng{seed};
    std::vector<int32_t> p;
    for (int i = 0; i < n; ++i)
      p.push_back(static_cast<int32_t>(8 + rng() % 500));
    return p;
  }

  test::temp_dir dir{"tessera-store-node"};
  std::filesystem::path config = dir.path() / "c.toml";
  std::map<std::string, child_process> nodes;
  uint16_t http = 0, worker_metrics = 0, store_metrics = 0;
  std::string url;
};

const std::string stored = "tessera_kvstore_remote_offer_blocks_total{result=\"stored\"}";

TEST_F(StoreNodeClusterTest, APrefixFetchedFromTheStoreNodeGivesTheSameTokens) {
  const auto prefix = prompt_of(80, 1);
  expect_right(prefix, "the first turn");
  // 80 + 10 tokens, 89 with KV: 5 full blocks reach the store node.
  EXPECT_GE(wait_metric(store_metrics, stored, 5), 5) << metrics_of(store_metrics);
  // The worker restarts with an empty pool; the store keeps the blocks.
  nodes.at("w").kill(SIGTERM);
  ASSERT_TRUE(nodes.at("w").wait(30s));
  nodes.erase("w");
  start("w");
  ASSERT_TRUE(wait_healthy());
  auto next = prefix;
  for (int32_t t : prompt_of(12, 2))
    next.push_back(t);
  expect_right(next, "the prompt whose prefix came from the store node");
  const auto worker = metrics_of(worker_metrics);
  EXPECT_GE(test::metric_sum(worker, "tessera_kvstore_fetched_blocks_total"), 5) << worker;
  EXPECT_GE(wait_metric(store_metrics, "tessera_kvstore_hits_total{tier=\"host\"}", 5), 5) << metrics_of(store_metrics);
}

TEST_F(StoreNodeClusterTest, AKilledStoreNodeLosesNothingAndARestartedOneTakesOffersAgain) {
  expect_right(prompt_of(40, 3), "before the kill");
  ASSERT_GE(wait_metric(store_metrics, stored, 2), 2);
  nodes.at("store").kill(SIGKILL);
  (void) nodes.at("store").wait(10s);
  nodes.erase("store");
  const auto t0 = std::chrono::steady_clock::now();
  for (uint64_t s = 10; s < 13; ++s)
    expect_right(prompt_of(40, s), "with the store node dead");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 20s) << "no request waited on the dead store";
  EXPECT_GT(test::metric_sum(metrics_of(worker_metrics), "tessera_kvstore_offer_dropped_blocks_total"), 0)
    << "offers to the dead store are dropped";
  start("store");
  // The worker's node dials it again; offers reach the new store.
  double got = 0;
  for (uint64_t s = 20; s < 40 && got < 2; ++s) {
    expect_right(prompt_of(40, s), "after the store's restart");
    got = wait_metric(store_metrics, stored, 2);
  }
  EXPECT_GE(got, 2) << metrics_of(store_metrics);
}

} // namespace
