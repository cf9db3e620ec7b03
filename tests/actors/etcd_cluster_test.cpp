// A multi-process cluster whose membership is in a real etcd on loopback
// (membership = "etcd"; skipped where /usr/bin/etcd is missing): a node
// the config does not list joins with flags and takes traffic, a killed
// node leaves /health within its lease's TTL + 2 s, a restarted one is
// back and serving within 5 s, a stopped one leaves at once.

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>

#include "cluster/etcd_client.hpp"
#include "common/child_process.hpp"
#include "common/error.hpp"
#include "tests/support/curl.hpp"
#include "tests/support/etcd_server.hpp"
#include "tests/support/run_tessera.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/test_model.hpp"

namespace {

using namespace std::chrono_literals;
using namespace tessera;
using nlohmann::json;
using clock_type = std::chrono::steady_clock;
using test::free_port;

constexpr int ttl_s = 2;

std::string tessera_bin() {
  return std::string{getenv("TESSERA_BINARY_DIR")} + "/cli/tessera";
}

/// Starts `tessera node <args>` and waits for its "ready" line.
std::optional<child_process> start_node(const std::vector<std::string>& args) {
  std::vector<std::string> all{"node"};
  all.insert(all.end(), args.begin(), args.end());
  auto n = child_process::spawn(tessera_bin(), all);
  EXPECT_TRUE(n) << error_text(n.error());
  if (!n)
    return std::nullopt;
  auto ready = n->read_line(60s);
  EXPECT_TRUE(ready) << error_text(ready.error());
  if (!ready || ready->find("ready") == std::string::npos) {
    ADD_FAILURE() << (ready ? *ready : std::string{"no line"});
    return std::nullopt;
  }
  return std::move(*n);
}

/// /health's worker_states, by node: the state of each node's worker.
std::map<std::string, std::string> worker_states(const std::string& url) {
  std::map<std::string, std::string> out;
  auto j = json::parse(test::http_get(url + "/health").body, nullptr, false);
  if (!j.is_object())
    return out;
  for (const auto& w : j.value("worker_states", json::array()))
    out[w.value("node", "")] = w.value("state", "");
  return out;
}

/// Waits until `pred(worker_states)` holds; how long it took, or nothing
/// after `timeout`.
template <class Pred>
std::optional<std::chrono::milliseconds> wait_states(const std::string& url, Pred pred,
                                                     std::chrono::milliseconds timeout) {
  const auto start = clock_type::now();
  while (clock_type::now() - start < timeout) {
    if (pred(worker_states(url)))
      return std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - start);
    std::this_thread::sleep_for(50ms);
  }
  return std::nullopt;
}

bool healthy(const std::map<std::string, std::string>& s, const std::string& node) {
  auto it = s.find(node);
  return it != s.end() && it->second == "healthy";
}

/// One greedy completion; its text, or the reply when it failed.
std::pair<bool, std::string> complete(const std::string& url) {
  auto r = test::http_post_json(url + "/v1/completions",
                                R"({"model": "nano", "prompt": [11, 12, 13, 14], "max_tokens": 6, "temperature": 0})");
  auto j = json::parse(r.body, nullptr, false);
  const bool ok = r.status == 200 && j.is_object() && j.contains("choices");
  return {ok, ok ? j["choices"][0].value("text", "") : std::to_string(r.status) + " " + r.body};
}

TEST(EtcdClusterTest, NodesJoinByEtcdLeaveWithinTheTtlAndRejoinByThemselves) {
  if (!test::have_etcd())
    GTEST_SKIP() << "no " << test::etcd_binary << " (apt-get install etcd-server; scripts/install-deps.sh)";
  test::temp_dir dir{"etcd-cluster-test"};
  auto etcd = test::etcd_server::start(dir.path() / "etcd");
  ASSERT_TRUE(etcd) << error_text(etcd.error());
  std::ofstream(dir.path() / "cluster.secret") << "test-cluster-secret-0123456789abcdef\n";
  std::filesystem::permissions(dir.path() / "cluster.secret",
                               std::filesystem::perms::owner_read | std::filesystem::perms::owner_write,
                               std::filesystem::perm_options::replace);
  const auto http = free_port();
  const std::string url = "http://127.0.0.1:" + std::to_string(http);
  const std::string b_address = "127.0.0.1:" + std::to_string(free_port());
  // The file lists the frontend + router node and decode-a; decode-b is
  // nowhere but in its own flags (and then in etcd).
  std::ofstream(dir.path() / "c.toml")
    << "model = \"" << test::test_model_dir("nano").string() << "\"\n"
    << "served_model_name = \"nano\"\nthreads_per_worker = 1\nkv_cache_mb = 8\nucx_tls = \"tcp\"\n"
    << "cluster_secret_file = \"cluster.secret\"\n"
    << "membership = \"etcd\"\netcd_endpoints = [\"" << (*etcd)->url() << "\"]\n"
    << "etcd_prefix = \"/tessera/etcd-cluster-test/\"\nmembership_ttl_s = " << ttl_s << "\n"
    << "[[node]]\nid = \"front\"\naddress = \"127.0.0.1:" << free_port()
    << "\"\nroles = [\"frontend\", \"router\"]\nhttp = \"127.0.0.1:" << http << "\"\n"
    << "[[node]]\nid = \"decode-a\"\naddress = \"127.0.0.1:" << free_port() << "\"\nroles = [\"decode\"]\n";
  const std::string config = (dir.path() / "c.toml").string();
  const std::vector<std::string> a_args{"--config", config, "--node", "decode-a"};
  const std::vector<std::string> b_args{"--config", config,     "--node",  "decode-b",
                                        "--address", b_address, "--roles", "decode"};

  auto front = start_node({"--config", config, "--node", "front"});
  auto a = start_node(a_args);
  ASSERT_TRUE(front && a);
  ASSERT_TRUE(wait_states(url, [](const auto& s) { return healthy(s, "decode-a"); }, 15s))
    << "decode-a never became healthy: " << test::http_get(url + "/health").body;
  const auto reference = complete(url);
  ASSERT_TRUE(reference.first) << reference.second;

  // A node the file does not list joins with flags.
  auto b = start_node(b_args);
  ASSERT_TRUE(b);
  ASSERT_TRUE(wait_states(url, [](const auto& s) { return healthy(s, "decode-a") && healthy(s, "decode-b"); }, 10s))
    << test::http_get(url + "/health").body;
  {
    cluster::etcd_client c{{{*cluster::parse_etcd_url((*etcd)->url())}}};
    auto r = c.range_prefix("/tessera/etcd-cluster-test/");
    ASSERT_TRUE(r) << error_text(r.error());
    std::vector<std::string> keys;
    for (const auto& kv : r->kvs)
      keys.push_back(kv.key);
    EXPECT_EQ(keys, (std::vector<std::string>{"/tessera/etcd-cluster-test/decode-a",
                                              "/tessera/etcd-cluster-test/decode-b",
                                              "/tessera/etcd-cluster-test/front"}));
  }

  // decode-a dies without a word: it leaves /health within TTL + 2 s,
  // and decode-b (known only through etcd) serves what comes.
  a->kill(SIGKILL);
  (void)a->wait(10s);
  auto left = wait_states(url, [](const auto& s) { return !s.contains("decode-a"); }, 10s);
  ASSERT_TRUE(left) << "decode-a still in /health: " << test::http_get(url + "/health").body;
  EXPECT_LT(*left, std::chrono::seconds{ttl_s + 2});
  std::printf("decode-a left /health %lld ms after its SIGKILL (TTL %d s)\n", static_cast<long long>(left->count()),
              ttl_s);
  auto served = complete(url);
  ASSERT_TRUE(served.first) << served.second;
  EXPECT_EQ(served.second, reference.second) << "decode-b answered differently";

  // Restarted, decode-a rejoins by itself and serves within 5 s: with
  // decode-b killed, it is the only decode worker left.
  const auto restart = clock_type::now();
  a = start_node(a_args);
  ASSERT_TRUE(a);
  ASSERT_TRUE(wait_states(url, [](const auto& s) { return healthy(s, "decode-a"); }, 10s))
    << test::http_get(url + "/health").body;
  b->kill(SIGKILL);
  (void)b->wait(10s);
  std::pair<bool, std::string> again{false, ""};
  while (!again.first && clock_type::now() - restart < 10s)
    again = complete(url);
  const auto back = std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - restart);
  ASSERT_TRUE(again.first) << again.second;
  EXPECT_EQ(again.second, reference.second);
  EXPECT_LT(back, 5s) << "decode-a took " << back.count() << " ms from its restart to serving";
  std::printf("decode-a restarted: serving %lld ms after its start\n", static_cast<long long>(back.count()));
  left = wait_states(url, [](const auto& s) { return !s.contains("decode-b"); }, 10s);
  ASSERT_TRUE(left) << test::http_get(url + "/health").body;
  EXPECT_LT(*left, std::chrono::seconds{ttl_s + 2});

  // decode-b comes back with its flags; stopped (SIGTERM) it revokes its
  // lease and leaves /health at once.
  b = start_node(b_args);
  ASSERT_TRUE(b);
  ASSERT_TRUE(wait_states(url, [](const auto& s) { return healthy(s, "decode-b"); }, 5s))
    << test::http_get(url + "/health").body;
  b->kill(SIGTERM);
  auto code = b->wait(30s);
  ASSERT_TRUE(code) << error_text(code.error());
  EXPECT_EQ(*code, 0);
  left = wait_states(url, [](const auto& s) { return !s.contains("decode-b"); }, 5s);
  ASSERT_TRUE(left) << test::http_get(url + "/health").body;
  EXPECT_LT(*left, 1500ms) << "a stopped node should leave at once (its lease is revoked)";

  for (auto* n : {&a, &front})
    (*n)->kill(SIGTERM);
  for (auto* n : {&a, &front}) {
    auto c = (*n)->wait(30s);
    ASSERT_TRUE(c) << error_text(c.error());
    EXPECT_EQ(*c, 0) << "a node did not stop cleanly";
  }
}

TEST(EtcdClusterTest, ANodeRefusesFlagsWithoutEtcdAndAnUnreachableEtcd) {
  test::temp_dir dir{"etcd-cluster-test"};
  const auto write = [&](const std::string& extra) {
    std::ofstream(dir.path() / "c.toml", std::ios::trunc)
      << "served_model_name = \"nano\"\n" << extra << "[[node]]\nid = \"front\"\naddress = \"127.0.0.1:"
      << free_port() << "\"\nroles = [\"frontend\", \"router\"]\nhttp = \"127.0.0.1:" << free_port() << "\"\n";
    return (dir.path() / "c.toml").string();
  };
  const auto address = "127.0.0.1:" + std::to_string(free_port());
  const auto flags = " --address " + address + " --roles decode --insecure";
  auto refused = [](const std::string& args, const std::string& why) {
    auto r = test::run_tessera("node " + args);
    EXPECT_EQ(r.exit_code, 2) << r.out;
    EXPECT_NE(r.out.find(why), std::string::npos) << why << " not in:\n" << r.out;
  };
  // Flags without etcd: refused before anything starts (exit 2).
  refused("--config " + write("") + " --node x" + flags, "only with membership = \"etcd\"");
  const std::string unreachable = "membership = \"etcd\"\netcd_endpoints = [\"http://127.0.0.1:" +
                                  std::to_string(free_port()) + "\"]\n";
  // A joining node may not claim the frontend, nor a listed node's id.
  refused("--config " + write(unreachable) + " --node x --address " + address + " --roles frontend --insecure",
          "the frontend and router run on the node the config lists");
  refused("--config " + write(unreachable) + " --node front" + flags, "is listed in the config");
  refused("--config " + write(unreachable) + " --node x --address " + address + " --roles decoder --insecure",
          "did you mean 'decode'");
  // No etcd where the config says: named, with how to start one.
  refused("--config " + write(unreachable) + " --node x" + flags, "no etcd answers");
}

} // namespace
