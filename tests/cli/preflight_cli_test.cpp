// The operator's preflight end to end through the binary: --version,
// unknown subcommands, CLI ranges equal to the API's, model init's refusal
// to overwrite, serve's and node's checks before the model loads (every
// problem at once, exit 2), and `tessera check` on a stopped, a running
// and a half-running cluster (a fake node and a fake frontend on loopback).
#include <atomic>
#include <csignal>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/child_process.hpp"
#include "common/error.hpp"
#include "tests/support/run_tessera.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

using tessera::test::run_result;
namespace fs = std::filesystem;

run_result run(const std::string& args) {
  return tessera::test::run_tessera(args);
}

bool has(const std::string& out, const std::string& what) {
  return out.find(what) != std::string::npos;
}

/// A TCP listener on 127.0.0.1 (an ephemeral port) until destroyed; with
/// `http`, a thread answers GET /health and /v1/models as a frontend does.
class fake_server {
public:
  explicit fake_server(bool http, std::string health = R"({"status":"ok","workers":2})") : health_(std::move(health)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    auto a = tessera::test::loopback_address(0);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    EXPECT_EQ(::listen(fd_, 16), 0);
    socklen_t len = sizeof(a);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    if (http)
      thread_ = std::thread{[this] { serve(); }};
  }
  ~fake_server() {
    stop_ = true;
    if (thread_.joinable())
      thread_.join();
    ::close(fd_);
  }
  [[nodiscard]] uint16_t port() const { return port_; }

private:
  void serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0)
        continue;
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0)
        continue;
      char buf[2048];
      const auto n = ::recv(c, buf, sizeof(buf) - 1, 0);
      const std::string request{buf, n > 0 ? static_cast<size_t>(n) : 0};
      const std::string body = request.starts_with("GET /health ")
                                 ? health_
                                 : R"({"object":"list","data":[{"id":"nano","object":"model"}]})";
      const std::string answer = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
                                 std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
      (void) ::send(c, answer.data(), answer.size(), MSG_NOSIGNAL);
      ::close(c);
    }
  }

  std::string health_;
  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

class PreflightCliTest : public testing::Test {
protected:
  /// A cluster config in the test's folder with a good secret; `nodes`
  /// are its [[node]] tables.
  std::string write_config(const std::string& nodes, const std::string& extra = "") {
    const auto secret = dir_.path() / "c.secret";
    std::ofstream(secret) << "test-cluster-secret-0123456789abcdef\n";
    fs::permissions(secret, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::replace);
    const auto file = dir_.path() / "c.toml";
    std::ofstream(file) << "cluster_secret_file = \"c.secret\"\n" << extra << nodes;
    return file.string();
  }

  static std::string node(const std::string& id, uint16_t port, const std::string& roles,
                          const std::string& more = "") {
    return "[[node]]\nid = \"" + id + "\"\naddress = \"127.0.0.1:" + std::to_string(port) + "\"\nroles = [" +
           roles + "]\n" + more;
  }

  tessera::test::temp_dir dir_{"tessera-preflight-cli"};
};

TEST_F(PreflightCliTest, VersionPrintsCommitBuildTypeIsaAndCuda) {
  auto r = run("--version");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(r.out.starts_with("tessera 0.")) << r.out;
  for (const char* line : {"\ncommit:   ", "\nbuild:    ", "\ncpu isa:  ", "\ncuda:     "})
    EXPECT_TRUE(has(r.out, line)) << line << " in\n" << r.out;
  EXPECT_TRUE(has(r.out, "avx512") || has(r.out, "avx2") || has(r.out, "generic")) << r.out;
}

/// Runs `command` through the shell; its output and exit status.
run_result shell(const std::string& command) {
  run_result r;
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr)
    return r;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof(buf), p))
    r.out.append(buf, n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

TEST_F(PreflightCliTest, TheVersionsCommitIsUnknownOutsideGit) {
  // The script the build runs, on a folder that is no git checkout.
  const auto out = dir_.path() / "build_info.hpp";
  auto r = shell("cmake -DSOURCE_DIR=" + dir_.path().string() + " -DIN=" TESSERA_SOURCE_DIR
                 "/cli/build_info.hpp.in -DOUT=" + out.string() +
                 " -DPROJECT_VERSION=9.9.9 -DTESSERA_BUILD_TYPE=Debug -DTESSERA_CLI_CUDA=0 -P " TESSERA_SOURCE_DIR
                 "/cli/build_info.cmake");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::stringstream text;
  text << std::ifstream{out}.rdbuf();
  EXPECT_TRUE(has(text.str(), "#define TESSERA_CLI_GIT_COMMIT \"unknown\"")) << text.str();
  EXPECT_TRUE(has(text.str(), "#define TESSERA_CLI_VERSION \"9.9.9\"")) << text.str();
  EXPECT_TRUE(has(text.str(), "#define TESSERA_CLI_CUDA 0")) << text.str();
}

TEST_F(PreflightCliTest, AnUnknownSubcommandIsNamedWithTheNearestOne) {
  auto r = run("serv");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(has(r.out, "unknown subcommand 'serv'; did you mean 'serve'?")) << r.out;
  r = run("--log-level warn model int --out /tmp/x");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(has(r.out, "unknown subcommand 'int'; did you mean 'init'?")) << r.out;
  r = run("deploy");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(has(r.out, "unknown subcommand 'deploy' (tessera has: serve, node, check")) << r.out;
}

TEST_F(PreflightCliTest, GenerateSamplingRangesAreTheApis) {
  for (const char* bad : {"--temperature 2.5", "--temperature -0.1", "--top-p 0", "--top-p 1.5", "--top-k -2"}) {
    auto r = run(std::string{"generate --model /nonexistent/m "} + bad);
    EXPECT_NE(r.exit_code, 0) << bad;
    EXPECT_TRUE(has(r.out, std::string{bad}.substr(0, std::string{bad}.find(' ')))) << bad << ": " << r.out;
    EXPECT_FALSE(has(r.out, "/nonexistent/m")) << "refused before the model: " << r.out;
  }
  // The API's edges themselves are accepted (the run then fails on the model).
  auto r = run("generate --model /nonexistent/m --temperature 2 --top-p 1 --top-k -1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(has(r.out, "/nonexistent/m")) << r.out;
}

TEST_F(PreflightCliTest, ServeLimitsAreRangeCheckedBeforeAnythingStarts) {
  for (const char* bad : {"--max-model-len 2000000", "--max-model-len -5", "--threads -1", "--actor-threads 100000",
                          "--max-local-prefill -1", "--port 70000"}) {
    // Were the value let through, the preflight would stop the server on
    // the missing model instead (and the test would not hang).
    auto r = run(std::string{"serve --model /nonexistent/m "} + bad);
    EXPECT_NE(r.exit_code, 0) << bad;
    EXPECT_TRUE(has(r.out, std::string{bad}.substr(0, std::string{bad}.find(' ')))) << bad << ": " << r.out;
    EXPECT_FALSE(has(r.out, "/nonexistent/m")) << "refused while parsing: " << r.out;
  }
}

TEST_F(PreflightCliTest, ModelInitRefusesToOverwriteWithoutForce) {
  const auto out = dir_.path() / "nano";
  auto r = run("model init --shape nano --seed 1 --out " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto size = fs::file_size(out / "model.safetensors");
  const auto written = fs::last_write_time(out / "model.safetensors");
  r = run("model init --shape micro --seed 2 --out " + out.string());
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_TRUE(has(r.out, "already holds a model (config.json, model.safetensors); pass --force")) << r.out;
  EXPECT_EQ(fs::file_size(out / "model.safetensors"), size);
  EXPECT_EQ(fs::last_write_time(out / "model.safetensors"), written);
  r = run("model init --shape nano --seed 2 --force --out " + out.string());
  EXPECT_EQ(r.exit_code, 0) << r.out;
}

TEST_F(PreflightCliTest, ServeReportsEveryProblemAtOnceBeforeLoading) {
  fake_server busy{false};
  std::ofstream(dir_.path() / "file") << "x";
  const auto started = std::chrono::steady_clock::now();
  auto r = run("serve --port " + std::to_string(busy.port()) + " --model " + (dir_.path() / "missing").string() +
               " --kv-store-disk-dir " + (dir_.path() / "file" / "cache").string());
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds{10});
  EXPECT_TRUE(has(r.out, "tessera serve: 2 problems found before start (and 1 warning):")) << r.out;
  EXPECT_TRUE(has(r.out, "--host/--port 127.0.0.1:" + std::to_string(busy.port()) +
                           ": cannot listen: already in use by another process"))
    << r.out;
  EXPECT_TRUE(has(r.out, "--model " + (dir_.path() / "missing").string() + ": ")) << r.out;
  EXPECT_TRUE(has(r.out, "tessera model init --out")) << r.out;
  EXPECT_TRUE(has(r.out, "  - warning: --kv-store-disk-dir " + (dir_.path() / "file" / "cache").string() +
                           ": cannot make"))
    << r.out;
}

TEST_F(PreflightCliTest, ADiskTierProblemIsAWarningAndTheServerStartsAnyway) {
  // The kv store's disk tier is a cache: a node whose tier cannot be used
  // runs on host memory (kvstore/disk_recovery.hpp), so the preflight says
  // so before start and does not refuse.
  const auto model = dir_.path() / "llama3-8b";
  ASSERT_EQ(run("model init --shape llama3-8b --out " + model.string()).exit_code, 0);
  std::ofstream(dir_.path() / "file") << "x";
  const auto port = tessera::test::free_port();
  auto c = tessera::child_process::spawn(
    "/bin/sh", {"-c", "exec " + tessera::test::tessera_binary() + " serve --model " + model.string() +
                        " --engine sim --sim-time-scale 0 --kv-cache-mb 0 --mode agg --port " + std::to_string(port) +
                        " --kv-store-host-mb 16 --kv-store-disk-dir " + (dir_.path() / "file" / "kv").string() +
                        " 2>&1"});
  ASSERT_TRUE(c) << tessera::error_text(c.error());
  std::string out;
  for (int i = 0; i < 100 && !has(out, "listening on"); ++i) {
    auto line = c->read_line(std::chrono::seconds{60});
    if (!line)
      break;
    out += *line + "\n";
  }
  EXPECT_TRUE(has(out, "tessera serve: 1 warning:")) << out;
  EXPECT_TRUE(has(out, "  - warning: --kv-store-disk-dir " + (dir_.path() / "file" / "kv").string())) << out;
  EXPECT_TRUE(has(out, "listening on")) << out;
  c->kill(SIGTERM);
  auto code = c->wait(std::chrono::seconds{30});
  ASSERT_TRUE(code) << tessera::error_text(code.error());
  EXPECT_EQ(*code, 0);
}

TEST_F(PreflightCliTest, ServeNamesABrokenModelFileBeforeLoading) {
  const auto model = dir_.path() / "nano";
  ASSERT_EQ(run("model init --shape nano --out " + model.string()).exit_code, 0);
  fs::resize_file(model / "model.safetensors", 100);
  std::ofstream(model / "config.json") << "{ not json";
  auto r = run("serve --port 0 --model " + model.string());
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_TRUE(has(r.out, "2 problems found before start")) << r.out;
  EXPECT_TRUE(has(r.out, (model / "config.json").string())) << r.out;
  EXPECT_TRUE(has(r.out, (model / "model.safetensors").string())) << r.out;
}

TEST_F(PreflightCliTest, NodeReportsEveryConfigProblemWithTheFix) {
  const auto port = tessera::test::free_port();
  const auto config = write_config("[[node]]\nid = \"front\"\naddress = \"localhost:" + std::to_string(port) +
                                     "\"\nroles = [\"frontend\", \"router\"]\n" + node("decode", port, "\"decode\""),
                                   "kv_cache_mbb = 512\n");
  auto r = run("node --config " + config + " --node front");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_TRUE(has(r.out, "unknown key 'kv_cache_mbb'; did you mean 'kv_cache_mb'?")) << r.out;
  EXPECT_TRUE(has(r.out, "node[1].address '127.0.0.1:" + std::to_string(port) +
                           "' is the same address as node[0].address 'localhost:"))
    << r.out;
  EXPECT_FALSE(has(r.out, "ready")) << r.out;
}

TEST_F(PreflightCliTest, NodeRefusesALooseSecretAndABusyPortBeforeLoading) {
  fake_server busy{false};
  const auto config = write_config(node("front", tessera::test::free_port(), "\"frontend\", \"router\"",
                                        "http = \"127.0.0.1:" + std::to_string(busy.port()) + "\"\n") +
                                   node("decode", tessera::test::free_port(), "\"decode\""));
  fs::permissions(dir_.path() / "c.secret", fs::perms::group_read | fs::perms::others_read, fs::perm_options::add);
  auto r = run("node --config " + config + " --node front");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_TRUE(has(r.out, "tessera node front: 2 problems found before start:")) << r.out;
  EXPECT_TRUE(has(r.out, "run chmod 600")) << r.out;
  EXPECT_TRUE(has(r.out, "node 'front': http 127.0.0.1:" + std::to_string(busy.port()) +
                           ": cannot listen: already in use"))
    << r.out;
  r = run("node --config " + config + " --node frnt");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_TRUE(has(r.out, "the config has no node 'frnt'; did you mean 'front'?")) << r.out;
}

TEST_F(PreflightCliTest, CheckPassesAClusterReadyToStart) {
  const auto config = write_config(node("front", tessera::test::free_port(), "\"frontend\", \"router\"",
                                        "http = \"127.0.0.1:" + std::to_string(tessera::test::free_port()) + "\"\n") +
                                     node("decode", tessera::test::free_port(), "\"decode\""),
                                   "kvstore_disk_dir = \"" + (dir_.path() / "cache").string() +
                                     "\"\nkvstore_disk_mb = 16\n");
  auto r = run("check --config " + config);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(has(r.out, "STATUS")) << r.out;
  EXPECT_TRUE(has(r.out, "not running")) << r.out;
  EXPECT_TRUE(has(r.out, ", 0 failed, ")) << r.out;
  EXPECT_FALSE(fs::exists(dir_.path() / "cache")) << "check makes nothing";
  r = run("check --config " + config + " --json --node decode");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["ok"], true);
  std::set<std::string> checks;
  for (const auto& c : j["checks"]) {
    checks.insert(c["check"].get<std::string>());
    EXPECT_NE(c["node"], "front") << "--node decode checks one node: " << c.dump();
  }
  EXPECT_EQ(checks, (std::set<std::string>{"config", "secret", "model", "reachable", "port", "disk"}));
}

TEST_F(PreflightCliTest, CheckJsonNamesEachProblem) {
  const auto config = write_config(node("front", 0, "\"router\"") + "colour = 1\n");
  auto r = run("check --json --config " + config);
  EXPECT_EQ(r.exit_code, 2) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["ok"], false);
  EXPECT_EQ(j["failures"], 2) << j.dump(1);
  for (const auto& c : j["checks"])
    if (c["status"] == "failed") {
      EXPECT_EQ(c["check"], "config");
      EXPECT_EQ(c["subject"], config);
    }
}

TEST_F(PreflightCliTest, CheckReportsARunningClustersNodesAndHealth) {
  fake_server front{false};
  fake_server http{true};
  fake_server decode{false};
  const auto config = write_config(node("front", front.port(), "\"frontend\", \"router\"",
                                        "http = \"127.0.0.1:" + std::to_string(http.port()) + "\"\n") +
                                   node("decode", decode.port(), "\"decode\""));
  auto r = run("check --config " + config);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(has(r.out, "running (frontend+router)")) << r.out;
  EXPECT_TRUE(has(r.out, "running (decode)")) << r.out;
  EXPECT_TRUE(has(r.out, "HTTP 200, status ok, workers 2")) << r.out;
  EXPECT_TRUE(has(r.out, "serves nano")) << r.out;
  // The launchers' form: a running cluster is not one to start.
  r = run("check --before-start --config " + config);
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_TRUE(has(r.out, "already running")) << r.out;
}

TEST_F(PreflightCliTest, CheckReportsEachNodesWorkersAsTheRouterJudgesThem) {
  // A prefill node that still accepts connections (stopped, say) but whose
  // worker the router judges unhealthy: a warning on that node, naming why.
  fake_server front{false};
  fake_server prefill{false};
  fake_server decode{false};
  fake_server http{true, R"j({"status":"degraded","ready":true,"workers":1,"worker_states":[)j"
                         R"j({"name":"prefill-0","node":"prefill","role":"prefill","state":"unhealthy",)j"
                         R"j("reason":"no heartbeat for 3.5 s (timeout 1.5 s)"},)j"
                         R"j({"name":"decode-0","node":"decode","role":"decode","state":"healthy","reason":""}],)j"
                         R"j("reason":"prefill-0 on node 'prefill' (prefill): no heartbeat for 3.5 s"})j"};
  const auto config = write_config(node("prefill", prefill.port(), "\"prefill\"") +
                                   node("front", front.port(), "\"frontend\", \"router\"",
                                        "http = \"127.0.0.1:" + std::to_string(http.port()) + "\"\n") +
                                   node("decode", decode.port(), "\"decode\""));
  auto r = run("check --json --config " + config);
  EXPECT_EQ(r.exit_code, 0) << "a degraded cluster still serves: warnings, not failures\n" << r.out;
  auto j = nlohmann::json::parse(r.out);
  std::map<std::string, nlohmann::json> workers;
  for (const auto& c : j["checks"])
    if (c["check"] == "workers")
      workers[c["node"].get<std::string>()] = c;
  ASSERT_EQ(workers.size(), 2u) << j.dump(1);
  EXPECT_EQ(workers["prefill"]["status"], "warning");
  EXPECT_TRUE(has(workers["prefill"]["detail"].get<std::string>(), "prefill-0 (prefill) unhealthy: 'no heartbeat"))
    << workers["prefill"].dump();
  EXPECT_EQ(workers["decode"]["status"], "ok");
  EXPECT_TRUE(has(workers["decode"]["detail"].get<std::string>(), "healthy: decode-0 (decode)"));
  for (const auto& c : j["checks"]) {
    if (c["check"] == "health") {
      EXPECT_EQ(c["status"], "warning") << c.dump();
    }
  }
}

TEST_F(PreflightCliTest, CheckFailsANodeDownWhileOthersRun) {
  fake_server front{false};
  fake_server http{true};
  const auto down = tessera::test::free_port();
  const auto config = write_config(node("front", front.port(), "\"frontend\", \"router\"",
                                        "http = \"127.0.0.1:" + std::to_string(http.port()) + "\"\n") +
                                   node("decode", down, "\"decode\""));
  auto r = run("check --json --timeout-ms 500 --config " + config);
  EXPECT_EQ(r.exit_code, 2) << r.out;
  auto j = nlohmann::json::parse(r.out);
  bool named = false;
  for (const auto& c : j["checks"])
    if (c["status"] == "failed") {
      EXPECT_EQ(c["node"], "decode") << c.dump();
      EXPECT_EQ(c["check"], "reachable") << c.dump();
      EXPECT_TRUE(has(c["detail"].get<std::string>(), "connection refused")) << c.dump();
      named = true;
    }
  EXPECT_TRUE(named) << j.dump(1);
}

TEST_F(PreflightCliTest, TheClusterScriptChecksBeforeItStartsAnything) {
  const auto config = write_config(node("front", tessera::test::free_port(), "\"frontend\", \"router\""));
  const std::string cmd = "TESSERA_BIN=/nonexistent/tessera TESSERA_RUN_DIR=" + (dir_.path() / "run").string() +
                          " " TESSERA_SOURCE_DIR "/scripts/cluster.sh " + config + " start --dry-run";
  const auto r = shell(cmd);
  const auto& out = r.out;
  EXPECT_EQ(r.exit_code, 0) << out << "\n(a dry run needs no binary)";
  const auto check = out.find("/nonexistent/tessera check --config " + config + " --before-start");
  const auto start = out.find("/nonexistent/tessera node --config");
  ASSERT_NE(check, std::string::npos) << out;
  ASSERT_NE(start, std::string::npos) << out;
  EXPECT_LT(check, start) << out;
}

} // namespace
