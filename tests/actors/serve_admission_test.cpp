// The router's KV admission behind a real server: a client that leaves while
// its request is held for KV room must not keep that room. The frontend
// tells the router the request finished: the router drops the held call
// (router.cpp, on_finished), and an answer already on its way back is
// answered with `finished` again by the frontend (53ac99e). Without either,
// the router routes the held request when room frees and counts it on its
// decode worker for ever, and the next request that needs the room waits
// out max_wait.

#include "actors/node/serve_node.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "common/child_process.hpp"
#include "tests/actors/nano_serve.hpp"
#include "tests/support/temp_dir.hpp"

namespace tessera::actors {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

constexpr int32_t max_tokens = 480;

/// The value of the unlabelled metric `name` in /metrics of `url`; -1 when absent.
double metric(const std::string& url, const std::string& name) {
  const auto body = tessera::test::http_get(url + "/metrics").body;
  std::smatch m;
  if (std::regex_search(body, m, std::regex{"\n" + name + " ([0-9.e+-]+)"}))
    return std::stod(m[1]);
  return -1;
}

/// Polls `url`'s metric `name` until it equals `want` (up to `limit`).
bool wait_metric(const std::string& url, const std::string& name, double want, std::chrono::seconds limit = 30s) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    if (metric(url, name) == want)
      return true;
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

/// curl streaming a `max_tokens`-token completion of a prompt seeded by
/// `seed`; its body file in `dir`.
caf::expected<child_process> stream(const std::string& url, const tessera::test::temp_dir& dir, int seed) {
  std::vector<int32_t> prompt;
  for (int i = 0; i < 30; ++i)
    prompt.push_back(8 + (seed * 131 + i * 17) % 500);
  json b = {{"model", "nano"}, {"prompt", prompt}, {"max_tokens", max_tokens}, {"ignore_eos", true}, {"stream", true}};
  const auto file = dir.path() / ("b" + std::to_string(seed));
  std::ofstream(file) << b.dump();
  return child_process::spawn("/usr/bin/curl", {"-sN", "-H", "Content-Type: application/json", "--data-binary",
                                                "@" + file.string(), url + "/v1/completions"});
}

TEST(ServeAdmissionTest, AClientThatLeavesWhileHeldForKvRoomDoesNotKeepTheRoom) {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  // `small` (12 KiB of KV a token): an 8 MiB pool holds 42 blocks of 16
  // tokens, and each request here commits 32 (a 2-block prompt and 480
  // tokens of growth): one at a time. 480 tokens take one thread seconds.
  auto o = tessera::test::nano_serve_options("agg");
  o.model_dir = tessera::test::test_model_dir("small");
  o.router.kv_admission.growth_tokens = max_tokens;
  o.router.kv_admission.max_wait = 60s; // what a leaked commitment would cost the next request
  auto node = tessera::test::start_ready(sys, o);
  ASSERT_TRUE(node);
  const auto url = node->url();
  tessera::test::temp_dir dir;

  auto a = stream(url, dir, 1);
  ASSERT_TRUE(a);
  ASSERT_TRUE(a->read_line(30s)) << "A's first chunk";
  // B does not fit beside A: held at the router.
  auto b = stream(url, dir, 2);
  ASSERT_TRUE(b);
  ASSERT_TRUE(wait_metric(url, "tessera_router_kv_admission_waiting", 1)) << "B held for room";
  // B's client leaves while held; the frontend drops its job.
  b->kill(SIGKILL);
  (void) b->wait(5s);
  ASSERT_TRUE(wait_metric(url, "tessera_requests_in_flight", 1)) << "B's job dropped";
  // A's client leaves too: A ends, the room frees, and the router routes B
  // to a frontend that no longer has it.
  a->kill(SIGKILL);
  (void) a->wait(5s);
  ASSERT_TRUE(wait_metric(url, "tessera_router_kv_admission_waiting", 0)) << "B released";
  ASSERT_TRUE(wait_metric(url, "tessera_requests_in_flight", 0));

  // C needs the same room: it goes at once, not after max_wait.
  const auto t0 = std::chrono::steady_clock::now();
  auto c = stream(url, dir, 3);
  ASSERT_TRUE(c);
  ASSERT_TRUE(c->read_line(50s)) << "C's first chunk";
  const auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_LT(waited, 20s) << "C waited for room B's gone client kept";
  EXPECT_EQ(metric(url, "tessera_router_kv_admission_timeouts_total"), 0);
  c->kill(SIGKILL);
  (void) c->wait(5s);
}

} // namespace
} // namespace tessera::actors
