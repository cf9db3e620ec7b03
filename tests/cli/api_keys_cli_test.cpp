// `tessera serve --api-keys FILE` as a process: SIGHUP reloads the key
// file (a key added works at once, a stream running across the reload
// finishes untouched, a bad file keeps the keys in use), and listening
// beyond loopback without keys logs a warning. The sim engine (a
// config-only llama3-8b at the modelled H100 speed, a few ms per token)
// makes a stream last long enough to reload in the middle of it.

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/child_process.hpp"
#include "common/error.hpp"
#include "tests/support/curl.hpp"
#include "tests/support/run_tessera.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

using namespace std::chrono_literals;
using tessera::child_process;
using tessera::test::free_port;

const std::string key_a = "sk-cli-tenant-a-0123456789";
const std::string key_b = "sk-cli-tenant-b-0123456789";

class ApiKeysCliTest : public testing::Test {
protected:
  static void SetUpTestSuite() {
    dir_ = new tessera::test::temp_dir{"tessera-api-keys-cli"};
    auto r = tessera::test::run_tessera("model init --shape llama3-8b --out " + model());
    ASSERT_EQ(r.exit_code, 0) << r.out;
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::string model() { return (dir_->path() / "llama3-8b").string(); }
  static std::filesystem::path keys() { return dir_->path() / "keys.toml"; }

  static void write_keys(const std::string& text) {
    std::ofstream(keys(), std::ios::trunc) << text;
    std::filesystem::permissions(keys(), std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  }

  /// Starts the server with `extra` arguments; returns once it listens,
  /// with every line it printed until then in `lines`.
  child_process start(const std::vector<std::string>& extra, std::vector<std::string>& lines) {
    port_ = free_port();
    std::vector<std::string> args{"serve",        "--model", model(), "--engine", "sim", "--sim-gpu", "h100",
                                  "--sim-time-scale", "1",   "--sim-payload-scale", "256", "--kv-cache-mb", "0",
                                  "--port",       std::to_string(port_), "--mode", "agg"};
    args.insert(args.end(), extra.begin(), extra.end());
    // The log goes to stderr: read it with stdout (exec keeps the pid, so
    // signals reach the server).
    std::string cmd = "exec " + tessera::test::tessera_binary();
    for (const auto& a : args)
      cmd += " '" + a + "'";
    auto c = child_process::spawn("/bin/sh", {"-c", cmd + " 2>&1"}, {.capture_stdout = true});
    EXPECT_TRUE(c) << tessera::error_text(c.error());
    for (int i = 0; i < 100; ++i) {
      auto line = c->read_line(60s);
      EXPECT_TRUE(line) << "the server did not start";
      if (!line)
        break;
      lines.push_back(*line);
      if (line->find("listening on") != std::string::npos)
        break;
    }
    return std::move(*c);
  }

  /// Reads the server's lines until one holds `text` (false at the end or
  /// after 30 s).
  static bool wait_for_line(child_process& c, const std::string& text) {
    for (;;) {
      auto line = c.read_line(30s);
      if (!line)
        return false;
      if (line->find(text) != std::string::npos)
        return true;
    }
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  tessera::test::http_reply complete(const std::string& key) const {
    return tessera::test::curl({"-H", "Content-Type: application/json", "-H", "Authorization: Bearer " + key, "-d",
                                R"({"model": "llama3-8b", "prompt": "hi", "max_tokens": 2})"},
                               url() + "/v1/completions");
  }

  /// A streaming completion of `max_tokens` as `key`, its output piped.
  child_process stream(const std::string& key, int max_tokens) const {
    const std::string body = R"({"model": "llama3-8b", "prompt": "Once upon a time", "stream": true, )"
                             R"("ignore_eos": true, "max_tokens": )" +
                             std::to_string(max_tokens) + "}";
    return tessera::test::stream_post(url() + "/v1/completions", body, {"Authorization: Bearer " + key});
  }

  static tessera::test::temp_dir* dir_;
  uint16_t port_ = 0;
};

tessera::test::temp_dir* ApiKeysCliTest::dir_ = nullptr;

TEST_F(ApiKeysCliTest, SighupReloadsTheKeysWhileAStreamRunsOn) {
  write_keys("[[key]]\nkey = \"" + key_a + "\"\ntenant = \"a\"\n");
  std::vector<std::string> lines;
  auto server = start({"--api-keys", keys().string()}, lines);
  EXPECT_EQ(complete(key_a).status, 200);
  EXPECT_EQ(complete(key_b).status, 401);

  auto client = stream(key_a, 600); // about 3 s of modelled decoding
  auto first = tessera::test::read_sse_events(client, true);
  ASSERT_EQ(first.size(), 1u) << "no first token";
  write_keys("[[key]]\nkey = \"" + key_a + "\"\ntenant = \"a\"\n[[key]]\nkey = \"" + key_b + "\"\ntenant = \"b\"\n");
  server.kill(SIGHUP);
  ASSERT_TRUE(wait_for_line(server, "API keys reloaded")) << "no reload logged";
  EXPECT_EQ(complete(key_b).status, 200) << "the added key works after the reload";
  EXPECT_EQ(complete(key_a).status, 200);

  // A broken file: the error is logged and the keys in use stay.
  std::ofstream(keys(), std::ios::trunc) << "[[key]]\nkey = \"short\"\ntenant = \"b\"\n";
  server.kill(SIGHUP);
  ASSERT_TRUE(wait_for_line(server, "the API keys in use stay")) << "no error logged";
  EXPECT_EQ(complete(key_b).status, 200);

  // The stream that started before both reloads ends as it would have.
  auto rest = tessera::test::read_sse_events(client);
  ASSERT_GE(rest.size(), 2u);
  EXPECT_EQ(rest.back(), "[DONE]");
  EXPECT_NE(rest[rest.size() - 2].find("\"finish_reason\":\"length\""), std::string::npos) << rest[rest.size() - 2];
  for (const auto& e : rest)
    EXPECT_EQ(e.find("\"error\""), std::string::npos) << e;
  EXPECT_TRUE(server.running()) << "SIGHUP does not stop the server";
  server.kill(SIGTERM);
  auto code = server.wait(30s);
  ASSERT_TRUE(code);
  EXPECT_EQ(*code, 0);
}

TEST_F(ApiKeysCliTest, ListeningBeyondLoopbackWithoutKeysWarns) {
  std::vector<std::string> open_lines;
  auto open = start({"--host", "0.0.0.0"}, open_lines);
  bool warned = false;
  for (const auto& l : open_lines)
    warned = warned || l.find("without API keys") != std::string::npos;
  EXPECT_TRUE(warned) << "no warning for 0.0.0.0 without keys";
  open.kill(SIGTERM);
  (void) open.wait(30s);

  write_keys("[[key]]\nkey = \"" + key_a + "\"\ntenant = \"a\"\n");
  for (const auto& extra : {std::vector<std::string>{"--host", "0.0.0.0", "--api-keys", keys().string()},
                            std::vector<std::string>{"--host", "127.0.0.1"}}) {
    std::vector<std::string> lines;
    auto s = start(extra, lines);
    for (const auto& l : lines)
      EXPECT_EQ(l.find("without API keys"), std::string::npos) << l;
    s.kill(SIGTERM);
    (void) s.wait(30s);
  }
}

TEST_F(ApiKeysCliTest, ABadKeyFileStopsTheStartNamingTheProblem) {
  std::ofstream(keys(), std::ios::trunc) << "[[key]]\nkey = \"" << key_a << "\"\ntenant = \"a\"\nprioriti = 3\n";
  std::filesystem::permissions(keys(), std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  auto r = tessera::test::run_tessera("serve --model " + model() + " --engine sim --port 0 --api-keys " +
                                      keys().string());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("unknown key 'key[0] (line 1).prioriti'; did you mean 'priority'?"), std::string::npos)
    << r.out;
  EXPECT_EQ(r.out.find(key_a), std::string::npos) << "the key is never printed";
}

} // namespace
