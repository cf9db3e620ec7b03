// A fresh start of a three-process cluster (frontend + router, prefill,
// decode over UCX), one request and a graceful stop (the router's node
// first) log no warning and no error: the one-way heartbeats workers send
// before their node has connected to the router's are part of a normal
// join (counted in tessera_bridge_dropped_messages_total{reason=
// "not_connected"}, logged at debug), not a failure.

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/child_process.hpp"
#include "common/error.hpp"
#include "tests/support/curl.hpp"
#include "tests/support/run_tessera.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/test_model.hpp"

namespace {

using namespace std::chrono_literals;
using tessera::child_process;
using tessera::test::free_port;
namespace fs = std::filesystem;

TEST(QuietStartTest, AFreshThreeProcessClusterLogsNoWarning) {
  tessera::test::temp_dir dir{"tessera-quiet-start"};
  std::ofstream(dir.path() / "cluster.secret") << "test-cluster-secret-0123456789abcdef\n";
  fs::permissions(dir.path() / "cluster.secret", fs::perms::owner_read | fs::perms::owner_write,
                  fs::perm_options::replace);
  const auto http = free_port();
  std::ofstream(dir.path() / "c.toml")
    << "model = \"" << tessera::test::test_model_dir("nano").string() << "\"\n"
    << "served_model_name = \"nano\"\nmax_local_prefill_tokens = 0\nthreads_per_worker = 1\n"
    << "kv_cache_mb = 8\nucx_tls = \"tcp\"\ncluster_secret_file = \"cluster.secret\"\n"
    << "[[node]]\nid = \"front\"\naddress = \"127.0.0.1:" << free_port()
    << "\"\nroles = [\"frontend\", \"router\"]\nhttp = \"127.0.0.1:" << http << "\"\n"
    << "[[node]]\nid = \"prefill\"\naddress = \"127.0.0.1:" << free_port()
    << "\"\nroles = [\"prefill\"]\n"
    << "[[node]]\nid = \"decode\"\naddress = \"127.0.0.1:" << free_port() << "\"\nroles = [\"decode\"]\n";
  // The workers' nodes first: they heartbeat before the router's node is up.
  std::vector<child_process> nodes;
  for (const char* id : {"decode", "prefill", "front"}) {
    const auto log = dir.path() / (std::string{id} + ".log");
    const std::string cmd = "exec \"$0\" node --config " + (dir.path() / "c.toml").string() + " --node " + id +
                            " 2>" + log.string();
    auto n = child_process::spawn("/bin/sh", {"-c", cmd, tessera::test::tessera_binary()});
    ASSERT_TRUE(n) << tessera::error_text(n.error());
    nodes.push_back(std::move(*n));
  }
  for (auto& n : nodes) {
    auto ready = n.read_line(60s);
    ASSERT_TRUE(ready) << tessera::error_text(ready.error());
  }
  const std::string url = "http://127.0.0.1:" + std::to_string(http);
  bool healthy = false;
  for (int i = 0; i < 300 && !healthy; ++i) {
    healthy = tessera::test::http_get(url + "/health").body.find("\"workers\":2") != std::string::npos;
    if (!healthy)
      std::this_thread::sleep_for(50ms);
  }
  ASSERT_TRUE(healthy) << "the cluster did not come up";
  auto reply = tessera::test::http_post_json(url + "/v1/completions",
                                             R"({"model": "nano", "prompt": "hi", "max_tokens": 4})");
  EXPECT_EQ(reply.status, 200) << reply.body;
  // The router's node first: a worker node stopping under a running
  // router is a worker down, which the router warns about (workers do
  // not announce a planned leave).
  for (auto* n : {&nodes[2], &nodes[0], &nodes[1]}) {
    n->kill(SIGTERM);
    auto code = n->wait(30s);
    ASSERT_TRUE(code) << tessera::error_text(code.error());
    EXPECT_EQ(*code, 0);
  }
  for (const char* id : {"decode", "prefill", "front"}) {
    std::ifstream in{dir.path() / (std::string{id} + ".log")};
    std::stringstream text;
    text << in.rdbuf();
    std::string line;
    while (std::getline(text, line))
      EXPECT_TRUE(line.find(" warning ") == std::string::npos && line.find(" error ") == std::string::npos &&
                  line.find(" critical ") == std::string::npos)
        << id << ": " << line;
  }
}

} // namespace
