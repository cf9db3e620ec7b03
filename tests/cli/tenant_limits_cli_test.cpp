// Tenants' rate limits on a real `tessera serve` with a key file
// (actors/frontend/tenant_limits.hpp): a tenant over its units_per_minute
// gets a 429 with Retry-After and an OpenAI error object before any work is
// queued (no token is generated for it); a prompt bigger than the whole
// bucket gets a 400 that says it can never fit; max_concurrent 1 with two
// streams refuses the second, and cancelling the first (the client goes
// away) frees the slot. The sim engine (a config-only llama3-8b at the
// modelled H100 speed) keeps the streams long enough to overlap. The model
// has no fitted units, so a unit is a token (a = b = 1, c = 0).

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <string>
#include <thread>

#include "common/child_process.hpp"
#include "common/error.hpp"
#include "tests/support/curl.hpp"
#include "tests/support/metrics_text.hpp"
#include "tests/support/run_tessera.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

using namespace std::chrono_literals;
using tessera::child_process;
using tessera::test::free_port;

const std::string tight_key = "sk-test-tight-0123456789abcdef";
const std::string single_key = "sk-test-single-0123456789abcdef";

class TenantLimitsCliTest : public testing::Test {
protected:
  static void SetUpTestSuite() {
    dir_ = new tessera::test::temp_dir{"tessera-tenant-limits"};
    auto r = tessera::test::run_tessera("model init --shape llama3-8b --out " + model());
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const auto keys = dir_->path() / "keys.toml";
    std::ofstream{keys} << "[[key]]\nkey = \"" << tight_key
                        << "\"\ntenant = \"tight\"\nunits_per_minute = 150\n\n"
                           "[[key]]\nkey = \""
                        << single_key << "\"\ntenant = \"single\"\nmax_concurrent = 1\n";
    ASSERT_EQ(::chmod(keys.c_str(), 0600), 0);
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::string model() { return (dir_->path() / "llama3-8b").string(); }

  void SetUp() override {
    port_ = free_port();
    auto c = child_process::spawn(
      tessera::test::tessera_binary(),
      {"serve", "--model", model(), "--engine", "sim", "--sim-gpu", "h100", "--sim-time-scale", "1",
       "--sim-payload-scale", "256", "--kv-cache-mb", "0", "--port", std::to_string(port_), "--mode", "agg",
       "--api-keys", (dir_->path() / "keys.toml").string()},
      {.capture_stdout = true});
    ASSERT_TRUE(c) << tessera::error_text(c.error());
    for (int i = 0; i < 50; ++i) {
      auto line = c->read_line(60s);
      ASSERT_TRUE(line) << "the server did not start";
      if (line->find("listening on") != std::string::npos)
        break;
    }
    server_ = std::move(*c);
  }
  void TearDown() override {
    if (server_) {
      server_->kill(SIGTERM);
      (void) server_->wait(30s);
    }
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  /// A completion body of `prompt_tokens` token ids and `max_tokens`.
  static std::string body(int prompt_tokens, int max_tokens, bool stream = false) {
    std::string ids;
    for (int i = 0; i < prompt_tokens; ++i)
      ids += (i ? "," : "") + std::to_string(100 + i);
    return R"({"model": "llama3-8b", "prompt": [)" + ids + R"(], "ignore_eos": true, "max_tokens": )" +
           std::to_string(max_tokens) + (stream ? R"(, "stream": true})" : "}");
  }

  /// POSTs a completion as `key`; the reply's body starts with the headers.
  tessera::test::http_reply post(const std::string& key, const std::string& json) const {
    return tessera::test::curl({"-i", "-H", "Authorization: Bearer " + key, "-H", "Content-Type: application/json",
                                "--data-binary", json},
                               url() + "/v1/completions");
  }

  /// A streaming completion through curl, its output piped.
  child_process stream(const std::string& key, int max_tokens) const {
    auto c = child_process::spawn("/usr/bin/curl",
                                  {"-sN", "-X", "POST", url() + "/v1/completions", "-H", "Authorization: Bearer " + key,
                                   "-H", "Content-Type: application/json", "-d", body(8, max_tokens, true)},
                                  {.capture_stdout = true});
    EXPECT_TRUE(c) << tessera::error_text(c.error());
    return std::move(*c);
  }

  /// The Retry-After header's value in a `curl -i` reply; -1 when absent.
  static int retry_after(const std::string& reply) {
    for (const auto* name : {"Retry-After: ", "retry-after: "})
      if (auto at = reply.find(name); at != std::string::npos)
        return std::stoi(reply.substr(at + std::string{name}.size()));
    return -1;
  }

  double metric(const std::string& series) const {
    return tessera::test::metric_value(tessera::test::http_get(url() + "/metrics").body, series);
  }

  static tessera::test::temp_dir* dir_;
  uint16_t port_ = 0;
  std::optional<child_process> server_;
};

tessera::test::temp_dir* TenantLimitsCliTest::dir_ = nullptr;

TEST_F(TenantLimitsCliTest, OverItsUnitsPerMinuteATenantGets429WithRetryAfterBeforeAnyWork) {
  // 100 prompt tokens + 10 output tokens of 150 units a minute.
  auto first = post(tight_key, body(100, 10));
  ASSERT_EQ(first.status, 200) << first.body;
  const double generated = metric("tessera_generation_tokens_total");
  ASSERT_GE(generated, 10);

  auto refused = post(tight_key, body(100, 10));
  EXPECT_EQ(refused.status, 429) << refused.body;
  // 40 units left, 110 wanted (the prompt's 100 and 10 held for its
  // max_tokens), 2.5 units a second: 28 s.
  const int after = retry_after(refused.body);
  EXPECT_GE(after, 19) << refused.body; // less if the first request took long
  EXPECT_LE(after, 28) << refused.body;
  EXPECT_NE(refused.body.find("holds 10 more for its max_tokens of output"), std::string::npos) << refused.body;
  EXPECT_NE(refused.body.find(R"("type":"rate_limit_error")"), std::string::npos) << refused.body;
  EXPECT_NE(refused.body.find(R"("code":"rate_limit_exceeded")"), std::string::npos) << refused.body;
  EXPECT_NE(refused.body.find("tenant 'tight' is over its rate limit of 150 model units per minute"),
            std::string::npos)
    << refused.body;

  // A prompt over the whole bucket can never fit: 400, not 429.
  auto never = post(tight_key, body(151, 1));
  EXPECT_EQ(never.status, 400) << never.body;
  EXPECT_EQ(retry_after(never.body), -1) << never.body;
  EXPECT_NE(never.body.find("request_exceeds_rate_limit"), std::string::npos) << never.body;

  // Nothing ran for the refused requests: no token generated, none in flight.
  EXPECT_EQ(metric("tessera_generation_tokens_total"), generated);
  EXPECT_EQ(metric("tessera_requests_in_flight"), 0);
  EXPECT_EQ(metric(R"(tessera_request_errors_total{kind="rate_limit_exceeded"})"), 1);

  // Another tenant is not limited by it.
  auto other = post(single_key, body(100, 10));
  EXPECT_EQ(other.status, 200) << other.body;
}

TEST_F(TenantLimitsCliTest, MaxConcurrentRefusesASecondStreamUntilTheFirstIsCancelled) {
  auto first = stream(single_key, 2000); // about 10 s of modelled decoding
  auto line = first.read_line(60s);
  while (line && line->rfind("data: ", 0) != 0)
    line = first.read_line(60s);
  ASSERT_TRUE(line) << "no first event";

  auto second = post(single_key, body(8, 4));
  EXPECT_EQ(second.status, 429) << second.body;
  EXPECT_EQ(retry_after(second.body), 1) << second.body;
  EXPECT_NE(second.body.find("max_concurrent"), std::string::npos) << second.body;

  // The client of the first stream goes away: its slot is free again (the
  // frontend learns it from the closed connection, so allow it a moment).
  first.kill(SIGKILL);
  (void) first.wait(10s);
  int status = 0;
  for (auto deadline = std::chrono::steady_clock::now() + 20s; std::chrono::steady_clock::now() < deadline;) {
    status = post(single_key, body(8, 4)).status;
    if (status != 429)
      break;
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(status, 200);
  EXPECT_GE(metric("tessera_requests_cancelled_total"), 1);
}

} // namespace
