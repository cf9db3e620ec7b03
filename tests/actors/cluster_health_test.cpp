// /health and /ready of a three-process cluster (frontend + router,
// prefill, decode) tell the truth within 2 s: when the decode node hangs
// (SIGSTOP: only its heartbeats and canaries stop) or dies (SIGKILL: its
// connection fails), /ready goes 503 and /health names the decode worker
// and why; when it resumes or restarts, both are 200 again.

#include <gtest/gtest.h>

#include <csignal>
#include <chrono>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "common/child_process.hpp"
#include "common/error.hpp"
#include "tests/support/curl.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/test_model.hpp"

namespace {

using namespace std::chrono_literals;
using namespace tessera;
using nlohmann::json;
using clock_type = std::chrono::steady_clock;

/// Starts `tessera node --config config --node id` and waits until it says it is ready.
std::optional<child_process> start_node(const std::filesystem::path& config, const std::string& id) {
  const std::string bin = std::string{getenv("TESSERA_BINARY_DIR")} + "/cli/tessera";
  auto n = child_process::spawn(bin, {"node", "--config", config.string(), "--node", id});
  EXPECT_TRUE(n) << error_text(n.error());
  if (!n)
    return std::nullopt;
  auto ready = n->read_line(60s);
  EXPECT_TRUE(ready) << id << ": " << error_text(ready.error());
  if (!ready)
    return std::nullopt;
  return std::move(*n);
}

/// Polls `url` + `path` every 50 ms until its status is `status`: the time
/// it took from `since`, or nullopt after `timeout`.
std::optional<clock_type::duration> wait_status(const std::string& url, const std::string& path, int status,
                                                clock_type::time_point since, std::chrono::milliseconds timeout) {
  while (clock_type::now() - since < timeout) {
    if (tessera::test::http_get(url + path).status == status)
      return clock_type::now() - since;
    std::this_thread::sleep_for(50ms);
  }
  return std::nullopt;
}

/// The decode worker's entry of /health's worker_states.
json decode_worker(const json& health) {
  for (const auto& w : health.value("worker_states", json::array()))
    if (w.value("node", "") == "decode")
      return w;
  return json::object();
}

TEST(ClusterHealthTest, ReadyTurns503Within2sWhenTheDecodeNodeHangsOrDiesAnd200WhenItIsBack) {
  tessera::test::temp_dir dir;
  const auto http = tessera::test::free_port();
  {
    std::ofstream(dir.path() / "cluster.secret") << "test-cluster-secret-0123456789abcdef\n";
    std::filesystem::permissions(dir.path() / "cluster.secret",
                                 std::filesystem::perms::owner_read | std::filesystem::perms::owner_write,
                                 std::filesystem::perm_options::replace);
  }
  const auto config = dir.path() / "c.toml";
  std::ofstream(config) << "model = \"" << tessera::test::test_model_dir("nano").string() << "\"\n"
                        << "served_model_name = \"nano\"\nmax_local_prefill_tokens = 0\nthreads_per_worker = 1\n"
                        << "kv_cache_mb = 8\nucx_tls = \"tcp\"\ncluster_secret_file = \"cluster.secret\"\n"
                        << "[[node]]\nid = \"front\"\naddress = \"127.0.0.1:" << tessera::test::free_port()
                        << "\"\nroles = [\"frontend\", \"router\"]\nhttp = \"127.0.0.1:" << http << "\"\n"
                        << "[[node]]\nid = \"prefill\"\naddress = \"127.0.0.1:" << tessera::test::free_port()
                        << "\"\nroles = [\"prefill\"]\n"
                        << "[[node]]\nid = \"decode\"\naddress = \"127.0.0.1:" << tessera::test::free_port()
                        << "\"\nroles = [\"decode\"]\n";
  auto decode = start_node(config, "decode");
  auto prefill = start_node(config, "prefill");
  auto front = start_node(config, "front");
  ASSERT_TRUE(decode && prefill && front);
  const std::string url = "http://127.0.0.1:" + std::to_string(http);
  ASSERT_TRUE(wait_status(url, "/ready", 200, clock_type::now(), 15s)) << "the cluster did not become ready";
  // Both workers joined (/ready is 200 once the decode worker has) and
  // pass their canaries across the processes.
  json health;
  for (int i = 0; i < 200; ++i) {
    health = json::parse(tessera::test::http_get(url + "/health").body, nullptr, false);
    if (health.value("status", "") == "ok" && health["worker_states"].size() == 2 &&
        decode_worker(health).contains("canary_ms"))
      break;
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_EQ(health.value("status", ""), "ok") << health.dump();
  ASSERT_EQ(health["worker_states"].size(), 2u) << health.dump();
  EXPECT_TRUE(decode_worker(health).contains("canary_ms")) << "no canary passed: " << health.dump();
  EXPECT_EQ(health.value("workers", 0), 2) << "the count older clients read";

  // Hung: the connection stays up, heartbeats and canaries stop.
  decode->kill(SIGSTOP);
  auto hung = wait_status(url, "/ready", 503, clock_type::now(), 2s);
  EXPECT_TRUE(hung) << "/ready still 200 2 s after the decode node stopped";
  auto h = tessera::test::http_get(url + "/health");
  EXPECT_EQ(h.status, 503) << h.body;
  health = json::parse(h.body, nullptr, false);
  EXPECT_EQ(health.value("status", ""), "unavailable") << h.body;
  EXPECT_EQ(decode_worker(health).value("state", ""), "unhealthy") << h.body;
  const auto reason = decode_worker(health).value("reason", "");
  EXPECT_TRUE(reason.find("no heartbeat") != std::string::npos || reason.find("canary") != std::string::npos)
    << h.body;
  decode->kill(SIGCONT);
  EXPECT_TRUE(wait_status(url, "/ready", 200, clock_type::now(), 5s)) << "not ready after SIGCONT";

  // Dead: its connection fails.
  decode->kill(SIGKILL);
  (void) decode->wait(10s);
  auto dead = wait_status(url, "/ready", 503, clock_type::now(), 2s);
  EXPECT_TRUE(dead) << "/ready still 200 2 s after the decode node was killed";
  h = tessera::test::http_get(url + "/health");
  EXPECT_EQ(h.status, 503) << h.body;
  EXPECT_NE(decode_worker(json::parse(h.body, nullptr, false)).value("reason", "").find("decode"),
            std::string::npos)
    << h.body;
  if (hung && dead)
    std::cout << "detected in " << std::chrono::duration<double>(*hung).count() << " s (SIGSTOP), "
              << std::chrono::duration<double>(*dead).count() << " s (SIGKILL)\n";

  // Restarted: the new worker joins under the same name and takes its place.
  decode = start_node(config, "decode");
  ASSERT_TRUE(decode);
  EXPECT_TRUE(wait_status(url, "/ready", 200, clock_type::now(), 10s)) << "not ready after the restart";
  h = tessera::test::http_get(url + "/health");
  EXPECT_EQ(h.status, 200) << h.body;
  health = json::parse(h.body, nullptr, false);
  EXPECT_EQ(health.value("status", ""), "ok") << h.body;
  EXPECT_EQ(health["worker_states"].size(), 2u) << h.body;

  for (auto* n : {&front, &prefill, &decode})
    (*n)->kill(SIGTERM);
  for (auto* n : {&front, &prefill, &decode}) {
    auto code = (*n)->wait(30s);
    ASSERT_TRUE(code) << error_text(code.error());
    EXPECT_EQ(*code, 0) << "a node did not stop cleanly";
  }
}

} // namespace
