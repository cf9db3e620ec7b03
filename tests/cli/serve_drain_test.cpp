// Graceful stop of `tessera serve`: SIGTERM while a stream is running lets
// it finish (then the process exits 0), new requests meanwhile get a 503,
// and with a drain timeout shorter than the stream the stream ends with an
// error event and [DONE] instead of being cut silently, and the process
// still exits 0 within about the timeout. The sim engine (a config-only
// llama3-8b at the modelled H100 speed, a few ms per token) makes the
// streams last long enough to stop mid-way.
//
// Also here, since it needs the same slow server: a worker whose steps
// outlast the router's heartbeat timeout (a saturated host) is only late,
// and keeps its stream rather than having it moved (frontend_config::
// late_grace) until the moves fail the request.

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
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

class ServeDrainTest : public testing::Test {
protected:
  static void SetUpTestSuite() {
    dir_ = new tessera::test::temp_dir{"tessera-serve-drain"};
    auto r = tessera::test::run_tessera("model init --shape llama3-8b --out " + model());
    ASSERT_EQ(r.exit_code, 0) << r.out;
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::string model() { return (dir_->path() / "llama3-8b").string(); }

  /// Starts the server; returns once it listens.
  /// `time_scale` stretches the modelled step times (sim_settings).
  child_process start(double drain_timeout_s, double time_scale = 1) {
    port_ = free_port();
    auto c = child_process::spawn(
      tessera::test::tessera_binary(),
      {"serve", "--model", model(), "--engine", "sim", "--sim-gpu", "h100", "--sim-time-scale",
       std::to_string(time_scale),
       "--sim-payload-scale", "256", "--kv-cache-mb", "0", "--port", std::to_string(port_),
       "--mode", "agg", "--drain-timeout", std::to_string(drain_timeout_s)},
      {.capture_stdout = true});
    EXPECT_TRUE(c) << tessera::error_text(c.error());
    for (int i = 0; i < 50; ++i) {
      auto line = c->read_line(60s);
      EXPECT_TRUE(line) << "the server did not start";
      if (!line || line->find("listening on") != std::string::npos)
        break;
    }
    return std::move(*c);
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  /// A streaming completion of `max_tokens` through curl, its output piped.
  child_process stream(int max_tokens) {
    const std::string body = R"({"model": "llama3-8b", "prompt": "Once upon a time", "stream": true, )"
                             R"("ignore_eos": true, "max_tokens": )"
                             + std::to_string(max_tokens) + "}";
    return tessera::test::stream_post(url() + "/v1/completions", body);
  }

  static tessera::test::temp_dir* dir_;
  uint16_t port_ = 0;
};

tessera::test::temp_dir* ServeDrainTest::dir_ = nullptr;

TEST_F(ServeDrainTest, SigtermLetsARunningStreamFinishThenExitsZero) {
  auto server = start(60.0);
  auto client = stream(300); // about 1.5 s of modelled decoding
  auto first = tessera::test::read_sse_events(client, true);
  ASSERT_EQ(first.size(), 1u) << "no first token";
  server.kill(SIGTERM);
  // Meanwhile the server takes no new request and says it is draining.
  std::this_thread::sleep_for(100ms);
  auto refused = tessera::test::http_post_json(
    url() + "/v1/completions", R"({"model": "llama3-8b", "prompt": "hi", "max_tokens": 2})");
  EXPECT_EQ(refused.status, 503) << refused.body;
  EXPECT_NE(refused.body.find("shutting_down"), std::string::npos) << refused.body;
  auto health = tessera::test::http_get(url() + "/health");
  EXPECT_EQ(health.status, 503) << health.body;
  EXPECT_NE(health.body.find("draining"), std::string::npos) << health.body;
  auto rest = tessera::test::read_sse_events(client);
  ASSERT_FALSE(rest.empty());
  EXPECT_EQ(rest.back(), "[DONE]");
  ASSERT_GE(rest.size(), 2u);
  EXPECT_NE(rest[rest.size() - 2].find("\"finish_reason\":\"length\""), std::string::npos)
    << rest[rest.size() - 2];
  for (const auto& e : rest)
    EXPECT_EQ(e.find("\"error\""), std::string::npos) << e;
  auto code = server.wait(30s);
  ASSERT_TRUE(code) << "the server did not exit after its requests finished";
  EXPECT_EQ(*code, 0);
}

TEST_F(ServeDrainTest, AStreamLongerThanTheDrainTimeoutEndsWithAnErrorEventAndDone) {
  auto server = start(0.5);
  auto client = stream(4000); // about 20 s of modelled decoding
  auto first = tessera::test::read_sse_events(client, true);
  ASSERT_EQ(first.size(), 1u) << "no first token";
  const auto stopped = std::chrono::steady_clock::now();
  server.kill(SIGTERM);
  auto rest = tessera::test::read_sse_events(client);
  ASSERT_GE(rest.size(), 2u);
  EXPECT_EQ(rest.back(), "[DONE]");
  EXPECT_NE(rest[rest.size() - 2].find("shutting_down"), std::string::npos) << rest[rest.size() - 2];
  auto code = server.wait(30s);
  ASSERT_TRUE(code) << "the server did not exit";
  EXPECT_EQ(*code, 0);
  EXPECT_LT(std::chrono::steady_clock::now() - stopped, 10s);
}

TEST_F(ServeDrainTest, AWorkerWhoseStepsOutlastTheHeartbeatTimeoutKeepsItsStream) {
  // Each step lasts ~2 s (a decode step of llama3-8b on an H100 is ~7 ms
  // modelled, x 300): heartbeats, sent between steps, come past the
  // router's 1.2 s timeout and canaries wait behind the steps, so the one
  // worker is late throughout while it serves.
  auto server = start(10.0, 300);
  auto client = stream(5);
  auto events = tessera::test::read_sse_events(client, true);
  ASSERT_EQ(events.size(), 1u) << "no first token";
  // While it decodes, the router holds the worker late.
  bool late = false;
  std::string health;
  for (int i = 0; i < 40 && !late; ++i, std::this_thread::sleep_for(100ms)) {
    health = tessera::test::http_get(url() + "/health").body;
    late = health.find("no heartbeat") != std::string::npos;
  }
  EXPECT_TRUE(late) << "the worker was never late: the test shows nothing\n" << health;
  for (auto& e : tessera::test::read_sse_events(client))
    events.push_back(std::move(e));
  EXPECT_EQ(events.back(), "[DONE]");
  for (const auto& e : events)
    EXPECT_EQ(e.find("\"error\""), std::string::npos) << e;
  ASSERT_GE(events.size(), 2u);
  EXPECT_NE(events[events.size() - 2].find("\"finish_reason\":\"length\""), std::string::npos)
    << events[events.size() - 2];
  auto metrics = tessera::test::http_get(url() + "/metrics");
  EXPECT_NE(metrics.body.find("tessera_requests_migrated_total 0"), std::string::npos)
    << "a late worker's stream was moved\n" << metrics.body.substr(0, 4000);
  server.kill(SIGTERM);
  EXPECT_TRUE(server.wait(30s));
}

} // namespace
