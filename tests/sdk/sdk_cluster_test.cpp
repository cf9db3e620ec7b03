// The native client SDK against a real `tessera node` (frontend, router and
// a CPU worker in one process, UCX over loopback tcp, a cluster secret and
// an API key file): the same request through the SDK and through HTTP gives
// the same tokens (greedy, and seeded at temperature 1), streams, cancels
// (the request leaves the frontend), refuses a wrong secret and a wrong key
// (with the HTTP API's exact message), serves many threads on one client,
// and answers models()/health().

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <fstream>
#include <limits>
#include <thread>

#include <nlohmann/json.hpp>
#include <tessera/sdk.hpp>

#include "common/child_process.hpp"
#include "common/error.hpp"
#include "tests/support/curl.hpp"
#include "tests/support/metrics_text.hpp"
#include "tests/support/run_tessera.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;
namespace fs = std::filesystem;
namespace sdk = tessera::sdk;

const std::string api_key = "sk-sdk-tenant-0123456789";

class SdkClusterTest : public testing::Test {
protected:
  static void SetUpTestSuite() {
    dir_ = new tessera::test::temp_dir{"tessera-sdk-cluster"};
    const auto d = dir_->path();
    auto r = tessera::test::run_tessera("model init --shape nano --out " + (d / "model").string());
    ASSERT_EQ(r.exit_code, 0) << r.out;
    auto private_file = [](const fs::path& p, const std::string& text) {
      std::ofstream(p) << text;
      fs::permissions(p, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::replace);
    };
    private_file(d / "cluster.secret", "test-cluster-secret-0123456789abcdef\n");
    private_file(d / "keys.toml", "[[key]]\nkey = \"" + api_key + "\"\ntenant = \"t\"\n");
    address_ = "127.0.0.1:" + std::to_string(tessera::test::free_port());
    http_ = "http://127.0.0.1:" + std::to_string(tessera::test::free_port());
    std::ofstream(d / "c.toml") << "model = \"" << (d / "model").string() << "\"\n"
                                << "served_model_name = \"nano\"\nthreads_per_worker = 1\nkv_cache_mb = 16\n"
                                << "ucx_tls = \"tcp\"\ncluster_secret_file = \"cluster.secret\"\n"
                                << "api_keys_file = \"keys.toml\"\n"
                                << "[[node]]\nid = \"front\"\naddress = \"" << address_ << "\"\n"
                                << "roles = [\"frontend\", \"router\", \"worker\"]\nhttp = \"" << http_.substr(7)
                                << "\"\n";
    const std::string cmd = "exec \"$0\" node --config " + (d / "c.toml").string() + " --node front 2>" +
                            (d / "front.log").string();
    auto n = tessera::child_process::spawn("/bin/sh", {"-c", cmd, tessera::test::tessera_binary()});
    ASSERT_TRUE(n) << tessera::error_text(n.error());
    node_ = new tessera::child_process(std::move(*n));
    auto line = node_->read_line(60s);
    ASSERT_TRUE(line) << tessera::error_text(line.error());
    bool ready = false;
    for (int i = 0; i < 300 && !ready; ++i) {
      ready = tessera::test::http_get(http_ + "/ready").status == 200;
      if (!ready)
        std::this_thread::sleep_for(50ms);
    }
    ASSERT_TRUE(ready) << "the node did not become ready";
  }

  static void TearDownTestSuite() {
    if (node_) {
      node_->kill(SIGTERM);
      (void)node_->wait(30s);
      delete node_;
    }
    delete dir_;
  }

  static sdk::options opts() {
    sdk::options o;
    o.cluster_secret_file = dir_->path() / "cluster.secret";
    o.timeout = 30s;
    return o;
  }

  static json post(const std::string& path, const json& body, const std::string& key = api_key) {
    auto r = tessera::test::curl({"-X", "POST", "-H", "Content-Type: application/json", "-H",
                                  "Authorization: Bearer " + key, "-d", body.dump()},
                                 http_ + path);
    auto j = json::parse(r.body, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r.body;
    return j;
  }

  static double metric(const std::string& name) {
    auto r = tessera::test::curl({"-H", "Authorization: Bearer " + api_key}, http_ + "/metrics");
    return tessera::test::metric_value(r.body, name);
  }

  static inline tessera::test::temp_dir* dir_ = nullptr;
  static inline tessera::child_process* node_ = nullptr;
  static inline std::string address_;
  static inline std::string http_;
};

sdk::request completion(const std::string& prompt, int max_tokens, float temperature,
                        std::optional<uint64_t> seed = std::nullopt) {
  sdk::request r;
  r.prompt = prompt;
  r.api_key = api_key;
  r.params.max_tokens = max_tokens;
  r.params.temperature = temperature;
  r.params.seed = seed;
  r.params.ignore_eos = true;
  return r;
}

/// An output that runs for a while: the model's whole context.
int long_output(sdk::client& c) {
  return c.health().max_model_len - 16;
}

TEST_F(SdkClusterTest, SameTokensAsHttpGreedyAndSeeded) {
  auto c = sdk::client::connect(address_, opts());
  struct run {
    float temperature;
    std::optional<uint64_t> seed;
  };
  for (const auto& [temperature, seed] : {run{0.0f, std::nullopt}, run{1.0f, 1234}, run{1.0f, 99}}) {
    SCOPED_TRACE("temperature " + std::to_string(temperature));
    auto res = c->submit(completion("The quick brown fox", 12, temperature, seed)).wait();
    json body = {{"model", "nano"}, {"prompt", "The quick brown fox"}, {"max_tokens", 12},
                 {"temperature", temperature}, {"ignore_eos", true}, {"logprobs", 0}};
    if (seed)
      body["seed"] = *seed;
    auto http = post("/v1/completions", body);
    ASSERT_TRUE(http.contains("choices")) << http.dump();
    EXPECT_EQ(res.text, http["choices"][0]["text"].get<std::string>());
    EXPECT_EQ(res.token_ids.size(), http["usage"]["completion_tokens"].get<size_t>());
    EXPECT_EQ(res.finish_reason, "length");
    // Token for token: each SDK token's text is the HTTP answer's token.
    const auto& lp_tokens = http["choices"][0]["logprobs"]["tokens"];
    ASSERT_EQ(lp_tokens.size(), res.token_ids.size());
    auto tok = post("/v1/tokenize", {{"model", "nano"}, {"prompt", "The quick brown fox"}});
    EXPECT_EQ(res.prompt_token_ids, tok["tokens"].get<std::vector<int32_t>>());
  }
  // A chat through the chat template, and token ids as the prompt.
  sdk::request chat;
  chat.messages = {{"user", "hello"}};
  chat.api_key = api_key;
  chat.params.max_tokens = 8;
  chat.params.temperature = 0;
  chat.params.ignore_eos = true;
  auto res = c->complete(chat).get();
  auto http = post("/v1/chat/completions", {{"model", "nano"},
                                            {"messages", {{{"role", "user"}, {"content", "hello"}}}},
                                            {"max_tokens", 8},
                                            {"temperature", 0},
                                            {"ignore_eos", true}});
  ASSERT_TRUE(http.contains("choices")) << http.dump();
  EXPECT_EQ(res.text, http["choices"][0]["message"]["content"].get<std::string>());
  sdk::request ids = completion("", 6, 0);
  ids.prompt_ids = {5, 6, 7, 8};
  auto by_ids = c->submit(ids).wait();
  auto http_ids = post("/v1/completions", {{"model", "nano"}, {"prompt", {5, 6, 7, 8}}, {"max_tokens", 6},
                                           {"temperature", 0}, {"ignore_eos", true}});
  EXPECT_EQ(by_ids.prompt_token_ids, (std::vector<int32_t>{5, 6, 7, 8}));
  EXPECT_EQ(by_ids.text, http_ids["choices"][0]["text"].get<std::string>());
}

/// A logprob as the HTTP API's JSON has it (-inf as -9999), back to the
/// float the engine computed: the JSON holds the float's shortest decimal.
float http_logprob(const json& v) {
  const double d = v.get<double>();
  return d == -9999.0 ? -std::numeric_limits<float>::infinity() : static_cast<float>(d);
}

TEST_F(SdkClusterTest, LogprobsAreTheHttpApisValues) {
  auto c = sdk::client::connect(address_, opts());
  constexpr int top = 4;
  struct run {
    float temperature;
    std::optional<uint64_t> seed;
  };
  for (const auto& [temperature, seed] : {run{0.0f, std::nullopt}, run{1.0f, 4321}}) {
    SCOPED_TRACE("temperature " + std::to_string(temperature));
    // A completion, read chunk by chunk: each chunk has one entry per token.
    auto r = completion("The quick brown fox", 10, temperature, seed);
    r.logprobs = true;
    r.top_logprobs = top;
    auto s = c->submit(r);
    std::vector<int32_t> tokens;
    std::vector<sdk::sampled_token> lps;
    while (auto ch = s.next()) {
      EXPECT_EQ(ch->logprobs.size(), ch->tokens.size());
      tokens.insert(tokens.end(), ch->tokens.begin(), ch->tokens.end());
      lps.insert(lps.end(), ch->logprobs.begin(), ch->logprobs.end());
    }
    json body = {{"model", "nano"}, {"prompt", "The quick brown fox"}, {"max_tokens", 10},
                 {"temperature", temperature}, {"ignore_eos", true}, {"logprobs", top}};
    if (seed)
      body["seed"] = *seed;
    auto http = post("/v1/completions", body);
    ASSERT_TRUE(http.contains("choices")) << http.dump();
    const auto& hl = http["choices"][0]["logprobs"];
    ASSERT_EQ(lps.size(), tokens.size());
    ASSERT_EQ(hl["token_logprobs"].size(), lps.size());
    for (size_t i = 0; i < lps.size(); ++i) {
      SCOPED_TRACE("token " + std::to_string(i));
      EXPECT_EQ(lps[i].token, tokens[i]);
      EXPECT_EQ(lps[i].logprob, http_logprob(hl["token_logprobs"][i]));
      ASSERT_EQ(lps[i].top_logprobs.size(), static_cast<size_t>(top));
      // Completions key the alternatives by their text (the chosen token
      // added): every value there is one of the SDK's, the best first.
      const auto& alts = hl["top_logprobs"][i];
      EXPECT_LE(alts.size(), static_cast<size_t>(top + 1));
      float best = -std::numeric_limits<float>::infinity();
      for (const auto& [text, v] : alts.items()) {
        const float f = http_logprob(v);
        best = std::max(best, f);
        bool found = f == lps[i].logprob;
        for (const auto& a : lps[i].top_logprobs)
          found = found || a.logprob == f;
        EXPECT_TRUE(found) << text << ": " << v;
      }
      EXPECT_EQ(best, lps[i].top_logprobs[0].logprob);
    }

    // A chat: its alternatives are a list, compared value for value.
    sdk::request chat;
    chat.messages = {{"user", "hello"}};
    chat.api_key = api_key;
    chat.params.max_tokens = 8;
    chat.params.temperature = temperature;
    chat.params.seed = seed;
    chat.params.ignore_eos = true;
    chat.logprobs = true;
    chat.top_logprobs = top;
    auto res = c->complete(chat).get();
    json cbody = {{"model", "nano"}, {"messages", {{{"role", "user"}, {"content", "hello"}}}},
                  {"max_tokens", 8}, {"temperature", temperature}, {"ignore_eos", true},
                  {"logprobs", true}, {"top_logprobs", top}};
    if (seed)
      cbody["seed"] = *seed;
    auto chttp = post("/v1/chat/completions", cbody);
    ASSERT_TRUE(chttp.contains("choices")) << chttp.dump();
    EXPECT_EQ(res.text, chttp["choices"][0]["message"]["content"].get<std::string>());
    const auto& content = chttp["choices"][0]["logprobs"]["content"];
    ASSERT_EQ(res.logprobs.size(), res.token_ids.size());
    ASSERT_EQ(content.size(), res.logprobs.size());
    for (size_t i = 0; i < res.logprobs.size(); ++i) {
      SCOPED_TRACE("chat token " + std::to_string(i));
      EXPECT_EQ(res.logprobs[i].token, res.token_ids[i]);
      EXPECT_EQ(res.logprobs[i].logprob, http_logprob(content[i]["logprob"]));
      const auto& alts = content[i]["top_logprobs"];
      ASSERT_EQ(alts.size(), res.logprobs[i].top_logprobs.size());
      for (size_t j = 0; j < alts.size(); ++j)
        EXPECT_EQ(res.logprobs[i].top_logprobs[j].logprob, http_logprob(alts[j]["logprob"]));
    }
  }
  // Without asking, none; logprobs alone: the chosen token's, no alternatives.
  auto plain = c->submit(completion("x", 3, 0)).wait();
  EXPECT_TRUE(plain.logprobs.empty());
  auto only = completion("x", 3, 0);
  only.logprobs = true;
  auto chosen = c->submit(only).wait();
  ASSERT_EQ(chosen.logprobs.size(), 3u);
  for (const auto& t : chosen.logprobs) {
    EXPECT_LE(t.logprob, 0.0f);
    EXPECT_TRUE(t.top_logprobs.empty());
  }
  // Refused before anything is sent, naming the field.
  auto orphan = completion("x", 3, 0);
  orphan.top_logprobs = 2;
  auto over = completion("x", 3, 0);
  over.logprobs = true;
  over.top_logprobs = 21;
  for (auto* bad : {&orphan, &over}) {
    try {
      (void)c->submit(*bad);
      FAIL() << "a bad top_logprobs was sent";
    } catch (const sdk::error& e) {
      EXPECT_EQ(e.code(), sdk::client_errc::bad_request);
      EXPECT_EQ(e.param(), "top_logprobs");
      EXPECT_NE(std::string{e.what()}.find("top_logprobs"), std::string::npos) << e.what();
    }
  }
}

TEST_F(SdkClusterTest, StreamsChunksCallbacksAndFutures) {
  auto c = sdk::client::connect(address_, opts());
  auto s = c->submit(completion("Once upon a time", 16, 0));
  std::vector<int32_t> tokens;
  std::string finish;
  int chunks = 0;
  while (auto ch = s.next()) {
    ++chunks;
    tokens.insert(tokens.end(), ch->tokens.begin(), ch->tokens.end());
    EXPECT_EQ(ch->output_tokens, static_cast<int32_t>(tokens.size()));
    if (!ch->finish_reason.empty())
      finish = ch->finish_reason;
  }
  EXPECT_EQ(tokens.size(), 16u);
  EXPECT_GE(chunks, 2);
  EXPECT_EQ(finish, "length");
  std::vector<int32_t> by_callback;
  auto cb = c->submit(completion("Once upon a time", 16, 0), [&](const sdk::chunk& ch) {
    by_callback.insert(by_callback.end(), ch.tokens.begin(), ch.tokens.end());
  });
  auto whole = cb.wait();
  EXPECT_EQ(by_callback, tokens);
  EXPECT_EQ(whole.token_ids, tokens);
  EXPECT_EQ(c->complete(completion("Once upon a time", 16, 0)).get().token_ids, tokens);
}

TEST_F(SdkClusterTest, CancelFreesTheRequest) {
  auto c = sdk::client::connect(address_, opts());
  // The request runs for the model's whole context, but a slow client (a
  // sanitizer build, a loaded machine) may cancel after the server already
  // finished it: then nothing was there to cancel, and the test tries again
  // (at most three times) rather than pass or fail on that race.
  bool freed = false;
  for (int attempt = 0; attempt < 3 && !freed; ++attempt) {
    const double cancelled = metric("tessera_requests_cancelled_total");
    auto s = c->submit(completion("A long story", long_output(*c), 0));
    auto first = s.next();
    ASSERT_TRUE(first);
    s.cancel();
    try {
      while (s.next()) {
      }
      FAIL() << "a cancelled stream ended normally";
    } catch (const sdk::error& e) {
      EXPECT_EQ(e.code(), sdk::client_errc::cancelled);
    }
    bool idle = false;
    for (int i = 0; i < 100 && !idle; ++i) {
      idle = metric("tessera_requests_in_flight") == 0;
      if (!idle)
        std::this_thread::sleep_for(50ms);
    }
    ASSERT_TRUE(idle) << "the frontend still holds the cancelled request";
    freed = metric("tessera_requests_cancelled_total") > cancelled;
  }
  EXPECT_TRUE(freed) << "no cancel reached the frontend while its request ran, in three tries";
  // The client goes on: the next request is served.
  EXPECT_EQ(c->submit(completion("x", 3, 0)).wait().token_ids.size(), 3u);
}

TEST_F(SdkClusterTest, ClientThatDisconnectsFreesItsRequests) {
  {
    auto c = sdk::client::connect(address_, opts());
    auto s = c->submit(completion("A long story", long_output(*c), 0));
    ASSERT_TRUE(s.next());
  } // the client closes its connection with the request running
  bool freed = false;
  for (int i = 0; i < 200 && !freed; ++i) {
    freed = metric("tessera_requests_in_flight") == 0;
    if (!freed)
      std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(freed) << "the frontend still holds the request of a client that left";
}

TEST_F(SdkClusterTest, WrongSecretIsRefused) {
  auto o = opts();
  o.cluster_secret_file.clear();
  o.cluster_secret = "not-the-cluster-secret-0123456789";
  o.connect_timeout = 5s;
  try {
    auto c = sdk::client::connect(address_, o);
    (void)c->health();
    FAIL() << "a client with the wrong secret was served";
  } catch (const sdk::error& e) {
    EXPECT_EQ(e.code(), sdk::client_errc::unauthorized) << e.what();
    EXPECT_EQ(e.http_status(), 401);
    EXPECT_NE(std::string{e.what()}.find("cluster secret"), std::string::npos) << e.what();
  }
  // A secret file readable by others is refused before anything is sent.
  const auto loose = dir_->path() / "loose.secret";
  std::ofstream(loose) << "test-cluster-secret-0123456789abcdef\n";
  fs::permissions(loose, fs::perms::owner_read | fs::perms::owner_write | fs::perms::others_read,
                  fs::perm_options::replace);
  auto o2 = opts();
  o2.cluster_secret_file = loose;
  try {
    (void)sdk::client::connect(address_, o2);
    FAIL() << "a world-readable secret file was used";
  } catch (const sdk::error& e) {
    EXPECT_EQ(e.code(), sdk::client_errc::bad_request);
    EXPECT_NE(std::string{e.what()}.find("chmod 600"), std::string::npos) << e.what();
  }
}

TEST_F(SdkClusterTest, BadApiKeyIsUnauthorizedWithTheHttpMessage) {
  auto c = sdk::client::connect(address_, opts());
  auto r = completion("hi", 4, 0);
  r.api_key = "sk-wrong-key-0000000000";
  auto http = post("/v1/completions", {{"model", "nano"}, {"prompt", "hi"}, {"max_tokens", 4}}, r.api_key);
  try {
    (void)c->submit(r).wait();
    FAIL() << "a wrong key was served";
  } catch (const sdk::error& e) {
    EXPECT_EQ(e.code(), sdk::client_errc::unauthorized);
    EXPECT_EQ(e.http_status(), 401);
    EXPECT_EQ(e.type(), http["error"]["type"].get<std::string>());
    EXPECT_EQ(std::string{e.what()}, http["error"]["message"].get<std::string>());
  }
  // A bad field: the same 400 as HTTP, naming it.
  auto bad = completion("hi", 4, 0);
  bad.model = "no-such-model";
  auto http_bad = post("/v1/completions", {{"model", "no-such-model"}, {"prompt", "hi"}, {"max_tokens", 4}});
  try {
    (void)c->submit(bad).wait();
    FAIL() << "an unknown model was served";
  } catch (const sdk::error& e) {
    EXPECT_EQ(e.code(), sdk::client_errc::not_found);
    EXPECT_EQ(std::string{e.what()}, http_bad["error"]["message"].get<std::string>());
  }
  // Two prompts at once: refused before it is sent, naming both.
  auto both = completion("text", 4, 0);
  both.messages = {{"user", "and chat"}};
  try {
    (void)c->submit(both);
    FAIL() << "a request with two prompts was sent";
  } catch (const sdk::error& e) {
    EXPECT_EQ(e.code(), sdk::client_errc::bad_request);
    EXPECT_NE(std::string{e.what()}.find("only messages may be set"), std::string::npos) << e.what();
  }
}

TEST_F(SdkClusterTest, ManyThreadsShareOneClient) {
  auto c = sdk::client::connect(address_, opts());
  const auto expected = c->submit(completion("Shared prompt", 8, 0)).wait().token_ids;
  std::atomic<int> same{0}, failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 4; ++i) {
        try {
          if (c->submit(completion("Shared prompt", 8, 0)).wait().token_ids == expected)
            ++same;
        } catch (const sdk::error&) {
          ++failed;
        }
      }
    });
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(same.load(), 32);
}

// `tessera bench serve --api-key` against a node with keys: its HTTP side
// (the model lookup and every completion) and its SDK side send the key.
TEST_F(SdkClusterTest, BenchServeSendsTheApiKeyOverHttpAndSdk) {
  const auto out = dir_->path() / "bench.json";
  auto r = tessera::test::run_tessera("bench serve --url " + http_ + " --sdk " + address_ +
                                      " --cluster-secret-file " + (dir_->path() / "cluster.secret").string() +
                                      " --api-key " + api_key + " --quick --json " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const json j = json::parse(std::ifstream(out));
  for (const auto& level : j.at("levels")) {
    EXPECT_EQ(level.at("errors").get<int>(), 0);
    EXPECT_EQ(level.at("sdk").at("errors").get<int>(), 0);
    EXPECT_GT(level.at("output_tokens").get<int64_t>(), 0);
  }
  auto bad = tessera::test::run_tessera("bench serve --url " + http_ + " --api-key sk-not-a-key --quick");
  EXPECT_NE(bad.exit_code, 0) << "a wrong key must not bench: " << bad.out;
}

TEST_F(SdkClusterTest, HealthAndModels) {
  auto c = sdk::client::connect(address_, opts());
  EXPECT_EQ(c->models(), (std::vector<std::string>{"nano"}));
  auto h = c->health();
  EXPECT_TRUE(h.ready);
  EXPECT_EQ(h.workers, 1);
  EXPECT_EQ(h.healthy_workers, 1);
  EXPECT_GT(h.max_model_len, 0);
  EXPECT_FALSE(h.draining);
  EXPECT_EQ(c->node_id().rfind("sdk-", 0), 0u);
}

} // namespace
