// Three `tessera node` processes (frontend + router, prefill, decode) from
// one config, talking over UCX on loopback: every prompt prefills on the
// prefill node, its KV goes to the decode node by RMA, and the tokens come
// back to the frontend; the output equals one engine alone, token for
// token (greedy and seeded).

#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "common/child_process.hpp"
#include "common/error.hpp"
#include "tests/support/curl.hpp"
#include "tests/support/served_output.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/test_model.hpp"

namespace {

using namespace std::chrono_literals;
using namespace tessera;
using nlohmann::json;

/// A TCP port free right now (bound to port 0, then released).
uint16_t free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

TEST(ClusterTest, ThreeProcessesOverUcxEqualOneEngine) {
  const std::string bin = std::string{getenv("TESSERA_BINARY_DIR")} + "/cli/tessera";
  tessera::test::temp_dir dir;
  const auto http = free_port();
  const auto prefill_metrics = free_port();
  std::ofstream(dir.path() / "c.toml")
    << "model = \"" << tessera::test::test_model_dir("nano").string() << "\"\n"
    << "served_model_name = \"nano\"\nmax_local_prefill_tokens = 0\nthreads_per_worker = 1\n"
    << "kv_cache_mb = 8\nucx_tls = \"tcp\"\n"
    << "[[node]]\nid = \"front\"\naddress = \"127.0.0.1:" << free_port()
    << "\"\nroles = [\"frontend\", \"router\"]\nhttp = \"127.0.0.1:" << http << "\"\n"
    << "[[node]]\nid = \"prefill\"\naddress = \"127.0.0.1:" << free_port()
    << "\"\nroles = [\"prefill\"]\nmetrics = \"127.0.0.1:" << prefill_metrics << "\"\n"
    << "[[node]]\nid = \"decode\"\naddress = \"127.0.0.1:" << free_port()
    << "\"\nroles = [\"decode\"]\n";
  std::vector<child_process> nodes;
  for (const char* id : {"decode", "prefill", "front"}) {
    auto n = child_process::spawn(bin, {"node", "--config", (dir.path() / "c.toml").string(),
                                        "--node", id});
    ASSERT_TRUE(n) << error_text(n.error());
    nodes.push_back(std::move(*n));
  }
  for (auto& n : nodes) {
    auto ready = n.read_line(60s);
    ASSERT_TRUE(ready) << error_text(ready.error());
    EXPECT_NE(ready->find("ready"), std::string::npos) << *ready;
  }
  const std::string url = "http://127.0.0.1:" + std::to_string(http);
  bool healthy = false;
  for (int i = 0; i < 300 && !healthy; ++i) {
    healthy = tessera::test::http_get(url + "/health").body.find("\"workers\":2") != std::string::npos;
    if (!healthy)
      std::this_thread::sleep_for(50ms); // the nodes connect and join in the background
  }
  ASSERT_TRUE(healthy) << "the cluster did not come up";
  for (float temperature : {0.0f, 0.8f})
    for (int len : {7, 33}) {
      std::mt19937_64 rng{static_cast<uint64_t>(len)};
      std::vector<int32_t> prompt;
      for (int i = 0; i < len; ++i)
        prompt.push_back(static_cast<int32_t>(8 + rng() % 500));
      json body = {{"model", "nano"}, {"prompt", prompt}, {"max_tokens", 10},
                   {"temperature", temperature}, {"seed", 5}, {"ignore_eos", true}, {"logprobs", 0}};
      auto out = tessera::test::http_post_json(url + "/v1/completions", body.dump()).body;
      auto j = json::parse(out, nullptr, false);
      ASSERT_TRUE(j.is_object() && j.contains("choices")) << out;
      EXPECT_EQ(tessera::test::from_completion(j),
                tessera::test::run_alone("nano", prompt, 10, temperature, 5))
        << len << " tokens, t=" << temperature;
    }
  // Every token of the four requests came back through the frontend.
  auto metrics = tessera::test::http_get(url + "/metrics").body;
  EXPECT_NE(metrics.find("tessera_generation_tokens_total 40"), std::string::npos) << metrics;
  // The prefill node's own series are on its metrics endpoint: it put the
  // four prompts' KV into the decode node's pool.
  auto prefill = tessera::test::http_get("http://127.0.0.1:" + std::to_string(prefill_metrics) + "/metrics");
  EXPECT_EQ(prefill.status, 200);
  EXPECT_NE(prefill.body.find("tessera_kv_transfer_bytes_total{worker=\"prefill-0\"}"), std::string::npos)
    << prefill.body;
  EXPECT_EQ(prefill.body.find("tessera_kv_transfer_bytes_total{worker=\"prefill-0\"} 0\n"), std::string::npos)
    << prefill.body;
  // The decode node dies without a word: the frontend's node notices (its
  // bridge's peer fails), the router stops sending there, and a new
  // request gets a clear 503 instead of hanging.
  nodes[0].kill(SIGKILL);
  (void) nodes[0].wait(10s);
  tessera::test::http_reply answer;
  const auto killed = std::chrono::steady_clock::now();
  for (int i = 0; i < 200; ++i) {
    answer = tessera::test::http_post_json(url + "/v1/completions",
                                           R"({"model": "nano", "prompt": "hi", "max_tokens": 4})");
    if (answer.status == 503)
      break;
    std::this_thread::sleep_for(50ms); // until the failure is noticed (bounded by the peer timeout)
  }
  EXPECT_EQ(answer.status, 503) << answer.body;
  EXPECT_NE(answer.body.find("no healthy worker can decode"), std::string::npos) << answer.body;
  EXPECT_LT(std::chrono::steady_clock::now() - killed, 10s);
  nodes.erase(nodes.begin());
  for (auto& n : nodes)
    n.kill(SIGTERM);
  for (auto& n : nodes) {
    auto code = n.wait(30s);
    ASSERT_TRUE(code) << error_text(code.error());
    EXPECT_EQ(*code, 0) << "a node did not stop cleanly";
  }
}

} // namespace
