// The whole single-process cluster (serve_node) behind its HTTP API, driven
// with curl: aggregated == disaggregated == one engine alone (greedy and
// seeded, streamed and not), 64 concurrent streams, a client disconnect
// freeing its KV blocks, and bad input answered with the right status while
// the server keeps serving.

#include "actors/node/serve_node.hpp"

#include <gtest/gtest.h>

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

namespace tessera::actors {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

using tessera::test::http_get;
using tessera::test::http_post_json;
using http_result = tessera::test::http_reply;

http_result post(const std::string& url, const std::string& body) {
  return http_post_json(url, body);
}

http_result get(const std::string& url) {
  return http_get(url);
}

using served = tessera::test::served_output;

std::vector<int32_t> prompt_ids(uint64_t seed, int n) {
  std::mt19937_64 rng{seed};
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i)
    p.push_back(static_cast<int32_t>(8 + rng() % 500));
  return p;
}

json completion_body(const std::vector<int32_t>& prompt, float temperature, bool stream) {
  json b = {{"model", "nano"},     {"prompt", prompt}, {"max_tokens", 12},
            {"temperature", temperature}, {"seed", 7},   {"ignore_eos", true},
            {"logprobs", 0},       {"stream", stream}};
  return b;
}

served from_response(const http_result& r) {
  return tessera::test::from_completion(json::parse(r.body));
}

served from_stream(const http_result& r) {
  bool ended = false;
  auto s = tessera::test::from_completion_stream(r.body, ended);
  EXPECT_TRUE(ended) << "the stream ends with data: [DONE]";
  return s;
}

served alone(const std::vector<int32_t>& prompt, float temperature) {
  return tessera::test::run_alone("nano", prompt, 12, temperature, 7);
}

class ServeTest : public ::testing::Test {
protected:
  ServeTest() : sys(cfg) {}

  std::unique_ptr<serve_node> start(const std::string& mode, int32_t max_local_prefill = 1000,
                                    const std::string& shape = "nano", bool fault_injection = false) {
    serve_options o;
    o.fault_injection = fault_injection;
    if (fault_injection) {
      // /admin/fault exists only with an admin key.
      std::ofstream(admin_dir.path() / "admin.key") << admin_key;
      std::filesystem::permissions(admin_dir.path() / "admin.key",
                                   std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
      o.admin_key_file = admin_dir.path() / "admin.key";
    }
    o.model_dir = tessera::test::test_model_dir(shape);
    o.model_name = "nano";
    o.mode = mode;
    o.port = 0;
    o.threads_per_worker = 1;
    o.kv_cache_bytes = size_t{8} << 20;
    o.router.options.max_local_prefill_tokens = max_local_prefill;
    auto n = serve_node::start(sys, o);
    EXPECT_TRUE(n) << error_text(n.error());
    return n ? std::move(*n) : nullptr;
  }

  /// POST /admin/fault with the admin key.
  static http_result fault(const std::string& url, const std::string& body) {
    return tessera::test::curl({"-H", "Content-Type: application/json", "-H", "Authorization: Bearer " + admin_key,
                                "--data-binary", body},
                               url + "/admin/fault");
  }

  static inline const std::string admin_key = "serve-test-admin-key-0123456789";
  tessera::test::temp_dir admin_dir;
  caf::actor_system_config cfg;
  caf::actor_system sys;
};

TEST_F(ServeTest, DisaggregatedEqualsAggregatedEqualsOneEngine) {
  auto agg = start("agg");
  auto disagg = start("disagg", 0); // every prompt prefills remotely
  ASSERT_TRUE(agg && disagg);
  for (float temperature : {0.0f, 0.8f})
    for (int len : {5, 16, 40}) {
      auto prompt = prompt_ids(static_cast<uint64_t>(len), len);
      auto want = alone(prompt, temperature);
      ASSERT_EQ(want.logprobs.size(), 12u);
      for (auto* node : {agg.get(), disagg.get()}) {
        const auto url = node->url() + "/v1/completions";
        auto whole = post(url, completion_body(prompt, temperature, false).dump());
        ASSERT_EQ(whole.status, 200) << whole.body;
        EXPECT_EQ(from_response(whole), want) << node->description() << ", t=" << temperature;
        auto streamed = post(url, completion_body(prompt, temperature, true).dump());
        ASSERT_EQ(streamed.status, 200) << streamed.body;
        EXPECT_EQ(from_stream(streamed), want) << node->description() << " streamed";
      }
    }
  auto m = get(disagg->url() + "/metrics");
  EXPECT_NE(m.body.find("tessera_generation_tokens_total 144"), std::string::npos) << m.body;
}

TEST_F(ServeTest, SixtyFourConcurrentStreamsAllComplete) {
  auto node = start("agg");
  ASSERT_TRUE(node);
  tessera::test::temp_dir dir;
  std::vector<child_process> clients;
  for (int i = 0; i < 64; ++i) {
    auto file = dir.path() / std::to_string(i);
    json b = {{"model", "nano"},      {"prompt", prompt_ids(static_cast<uint64_t>(i), 10 + i % 7)},
              {"max_tokens", 16},     {"ignore_eos", true},
              {"stream", true},       {"stream_options", {{"include_usage", true}}}};
    std::ofstream(file) << b.dump();
    auto c = child_process::spawn("/usr/bin/curl", {"-sN", "-H", "Content-Type: application/json",
                                                    "--data-binary", std::string{"@"}.append(file.string()),
                                                    node->url() + "/v1/completions"});
    ASSERT_TRUE(c);
    clients.push_back(std::move(*c));
  }
  int complete = 0;
  for (auto& c : clients) {
    std::string all;
    for (;;) {
      auto line = c.read_line(60s);
      if (!line)
        break;
      all.append(*line).push_back('\n');
    }
    (void) c.wait(10s);
    auto usage = all.find("\"completion_tokens\":16");
    if (usage != std::string::npos && all.find("data: [DONE]") != std::string::npos)
      ++complete;
  }
  EXPECT_EQ(complete, 64);
}

/// curl streaming a 480-token completion (seconds on `small`), its body in `dir`.
caf::expected<child_process> long_stream(const std::string& url, const tessera::test::temp_dir& dir) {
  json b = {{"model", "nano"}, {"prompt", prompt_ids(3, 30)}, {"max_tokens", 480},
            {"ignore_eos", true}, {"stream", true}};
  std::ofstream(dir.path() / "b") << b.dump();
  return child_process::spawn("/usr/bin/curl", {"-sN", "-H", "Content-Type: application/json",
                                                "--data-binary", "@" + (dir.path() / "b").string(),
                                                url + "/v1/completions"});
}

TEST_F(ServeTest, AClientThatGoesAwayFreesItsBlocks) {
  // The `small` shape (124M parameters): 480 tokens take one thread
  // seconds, and the disconnect after the first chunk reaches the worker
  // in milliseconds, so the request is surely still running when it does.
  auto node = start("agg", 1000, "small");
  ASSERT_TRUE(node);
  tessera::test::temp_dir dir;
  auto c = long_stream(node->url(), dir);
  ASSERT_TRUE(c);
  auto first = c->read_line(30s);
  ASSERT_TRUE(first) << "no first chunk";
  c->kill(SIGKILL);
  (void) c->wait(5s);
  const std::string worker = "{worker=\"worker-0\"}";
  bool freed = false;
  std::string m;
  for (int i = 0; i < 100 && !freed; ++i) {
    m = get(node->url() + "/metrics").body;
    freed = m.find("tessera_requests_cancelled_total 1") != std::string::npos &&
            m.find("tessera_requests_aborted_total" + worker + " 1") != std::string::npos &&
            m.find("tessera_kv_blocks_used" + worker + " 0\n") != std::string::npos &&
            m.find("tessera_requests_in_flight 0") != std::string::npos;
    if (!freed)
      std::this_thread::sleep_for(50ms); // polling the server's own metrics
  }
  EXPECT_TRUE(freed) << m;
}

TEST_F(ServeTest, ACrashedWorkersStreamGoesOnElsewhereTokenForTokenAndTheWorkerIsRestarted) {
  // `small` again, so the stream is surely running when the fault lands.
  auto node = start("disagg", 0, "small", true);
  ASSERT_TRUE(node);
  tessera::test::temp_dir dir;
  // Seeded sampling, so the continuation must draw exactly as the
  // uninterrupted run does at every position.
  const auto long_prompt = prompt_ids(3, 30);
  json b = {{"model", "nano"}, {"prompt", long_prompt}, {"max_tokens", 160}, {"temperature", 0.8},
            {"seed", 11},      {"ignore_eos", true},    {"logprobs", 0},       {"stream", true}};
  std::ofstream(dir.path() / "b") << b.dump();
  auto c = child_process::spawn("/usr/bin/curl", {"-sN", "-H", "Content-Type: application/json", "--data-binary",
                                                  "@" + (dir.path() / "b").string(), node->url() + "/v1/completions"});
  ASSERT_TRUE(c);
  auto first = c->read_line(30s);
  ASSERT_TRUE(first) << "no first chunk";
  auto crash = fault(node->url(), R"({"worker": "decode-0", "fault": "crash"})");
  ASSERT_EQ(crash.status, 200) << crash.body;
  // The stream goes on (on the restarted decode-0 or the prefill worker)
  // from the tokens already sent: one uninterrupted answer.
  std::string body = *first + "\n";
  for (;;) {
    auto line = c->read_line(60s);
    if (!line)
      break;
    body.append(*line).push_back('\n');
  }
  (void) c->wait(5s);
  bool ended = false;
  const auto got = tessera::test::from_completion_stream(body, ended);
  EXPECT_TRUE(ended) << body.substr(body.size() > 2000 ? body.size() - 2000 : 0);
  EXPECT_EQ(body.find("\"error\""), std::string::npos) << "no error event";
  const auto alone = tessera::test::run_alone("small", long_prompt, 160, 0.8f, 11);
  EXPECT_EQ(got.text, alone.text);
  EXPECT_EQ(got.finish, "length");
  ASSERT_EQ(got.logprobs.size(), alone.logprobs.size());
  for (size_t i = 0; i < got.logprobs.size(); ++i)
    EXPECT_NEAR(got.logprobs[i], alone.logprobs[i], 1e-3) << "token " << i;
  auto moved = get(node->url() + "/metrics").body;
  EXPECT_NE(moved.find("tessera_requests_migrated_total"), std::string::npos) << moved;
  EXPECT_EQ(moved.find("tessera_requests_migrated_total 0"), std::string::npos) << "the stream moved";

  // A new decode-0 takes the old one's place; requests succeed as before.
  auto prompt = prompt_ids(5, 12);
  auto want = tessera::test::run_alone("small", prompt, 12, 0, 7);
  http_result r;
  for (int i = 0; i < 200 && r.status != 200; ++i) {
    r = post(node->url() + "/v1/completions", completion_body(prompt, 0, false).dump());
    if (r.status != 200)
      std::this_thread::sleep_for(50ms);
  }
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(from_response(r), want);
  auto m = get(node->url() + "/metrics").body;
  EXPECT_NE(m.find("tessera_worker_restarts_total{worker=\"decode-0\"} 1"), std::string::npos) << m;
  auto health = get(node->url() + "/health");
  EXPECT_EQ(health.status, 200);
  EXPECT_NE(health.body.find("\"workers\":2"), std::string::npos) << "the old decode-0 is forgotten: "
                                                                   << health.body;

  auto unknown = fault(node->url(), R"({"worker": "decode-9", "fault": "crash"})");
  EXPECT_EQ(unknown.status, 404) << unknown.body;
  EXPECT_NE(unknown.body.find("no worker named 'decode-9'"), std::string::npos) << unknown.body;
  auto bad = fault(node->url(), R"({"worker": "decode-0", "fault": "melt"})");
  EXPECT_EQ(bad.status, 400) << bad.body;
}

TEST_F(ServeTest, FaultInjectionIsOffByDefault) {
  auto node = start("agg");
  ASSERT_TRUE(node);
  auto fault = post(node->url() + "/admin/fault", R"({"worker": "worker-0", "fault": "crash"})");
  EXPECT_NE(fault.status, 200) << fault.body;
  auto r = post(node->url() + "/v1/completions", completion_body(prompt_ids(1, 5), 0, false).dump());
  EXPECT_EQ(r.status, 200) << r.body;
}

TEST_F(ServeTest, BadInputGetsTheRightStatusAndTheServerKeepsServing) {
  auto node = start("agg");
  ASSERT_TRUE(node);
  const auto url = node->url() + "/v1/completions";
  struct bad_case {
    std::string body;
    int status;
    std::string says;
  };
  std::string huge(10 << 20, 'a');
  std::vector<bad_case> cases = {
    {"{\"model\": \"nano\", \"prompt\": ", 400, "not valid JSON"},
    {R"({"model": "nano", "prompt": "hi", "max_tokens": "ten"})", 400, "max_tokens"},
    {R"({"model": "nano"})", 400, "prompt"},
    {R"({"prompt": "hi"})", 400, "model"},
    {R"({"model": "nano", "prompt": "hi", "max_tokens": -3})", 400, "max_tokens must be an integer >= 1"},
    {R"({"model": "nano", "prompt": "hi", "max_tokens": 100000000})", 400, "max_tokens"},
    {R"({"model": "nano", "prompt": "hi", "max_tokens": 600})", 400, "context"},
    {"{\"model\": \"nano\", \"prompt\": \"\xff\xfe\"}", 400, "UTF-8"},
    {R"({"model": "gpt-9", "prompt": "hi"})", 404, "gpt-9"},
    {"{\"model\": \"nano\", \"prompt\": \"" + huge + "\"}", 413, "larger than"},
  };
  for (const auto& c : cases) {
    auto r = post(url, c.body);
    EXPECT_EQ(r.status, c.status) << c.body.substr(0, 80) << " -> " << r.body;
    EXPECT_NE(r.body.find(c.says), std::string::npos) << c.body.substr(0, 80) << " -> " << r.body;
    auto j = json::parse(r.body, nullptr, false);
    EXPECT_TRUE(j.is_object() && j.contains("error")) << r.body;
  }
  // Unknown fields are ignored; the server still serves.
  auto ok = post(url, R"({"model": "nano", "prompt": "hi", "max_tokens": 3, "frobnicate": true})");
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(get(node->url() + "/v1/nothing").status, 404);
  EXPECT_EQ(get(node->url() + "/health").status, 200);
}

// Issue 19's small things: an unknown path is 404 whatever the method (405
// only for a known path), GET /v1/models/{id}, vLLM's tokenize endpoints.
TEST_F(ServeTest, PathsModelsAndTokenizeAnswerAsOpenAIAndVllmClientsExpect) {
  auto node = start("agg");
  ASSERT_TRUE(node);
  const auto url = node->url();
  for (const char* path : {"/completions", "/v1/chat/completion", "/v1/embeddings", "/v1/responses", "/v1/completions/"}) {
    auto r = post(url + path, R"({"model": "nano", "prompt": "hi"})");
    EXPECT_EQ(r.status, 404) << path << " -> " << r.body;
    EXPECT_NE(r.body.find("not_found_error"), std::string::npos) << r.body;
  }
  EXPECT_EQ(post(url + "/v1/models", "{}").status, 405);
  EXPECT_EQ(get(url + "/v1/completions").status, 405);

  auto model = get(url + "/v1/models/nano");
  ASSERT_EQ(model.status, 200) << model.body;
  EXPECT_EQ(json::parse(model.body)["id"], "nano");
  auto other = get(url + "/v1/models/gpt-9");
  EXPECT_EQ(other.status, 404);
  EXPECT_NE(other.body.find("model_not_found"), std::string::npos) << other.body;

  const auto prompt = prompt_ids(3, 6);
  auto tok = post(url + "/v1/tokenize", json{{"model", "nano"}, {"prompt", prompt}}.dump());
  ASSERT_EQ(tok.status, 200) << tok.body;
  EXPECT_EQ(json::parse(tok.body)["tokens"].get<std::vector<int32_t>>(), prompt);
  EXPECT_EQ(json::parse(tok.body)["count"], prompt.size());
  auto detok = post(url + "/v1/detokenize", json{{"model", "nano"}, {"tokens", {1, 1 << 30}}}.dump());
  EXPECT_EQ(detok.status, 400) << detok.body;
  EXPECT_EQ(get(url + "/health").status, 200);
}

} // namespace
} // namespace tessera::actors
