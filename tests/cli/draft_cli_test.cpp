// `--speculative draft:K --draft-model DIR` on `tessera generate` and
// `tessera serve`: greedy output equals plain decoding (one engine, and a
// served prefill + decode pair where the decode worker drafts); a draft
// with another vocabulary is refused by name at load; the API answers 400
// naming the problem for a draft request without a draft model or with K
// out of range.
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/child_process.hpp"
#include "common/error.hpp"
#include "tests/support/curl.hpp"
#include "tests/support/run_tessera.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;

class DraftCliTest : public testing::Test {
protected:
  static void SetUpTestSuite() {
    dir_ = new tessera::test::temp_dir{"tessera-draft-cli"};
    for (const std::string& init : {"--shape nano --seed 3 --out " + model("nano"),
                                   "--shape nano-mha --seed 9 --out " + model("draft"),
                                   "--shape micro --seed 4 --out " + model("micro")}) {
      auto r = tessera::test::run_tessera("model init " + init);
      ASSERT_EQ(r.exit_code, 0) << r.out;
    }
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::string model(const std::string& name) { return (dir_->path() / name).string(); }
  static tessera::test::temp_dir* dir_;
};

tessera::test::temp_dir* DraftCliTest::dir_ = nullptr;

TEST_F(DraftCliTest, GenerateGreedyWithADraftModelEqualsPlain) {
  auto run = [&](const std::string& extra) {
    auto r = tessera::test::run_tessera("generate --model " + model("nano") +
                                        " --prompt 'the cat sat on the mat' --max-tokens 40 --ignore-eos"
                                        " --temperature 0 --json " + extra);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    return json::parse(r.out.substr(r.out.find('{')));
  };
  auto plain = run("");
  ASSERT_EQ(plain["token_ids"].size(), 40u);
  for (const std::string& draft : {model("draft"), model("nano")}) {
    auto spec = run("--speculative draft:4 --draft-model " + draft);
    EXPECT_EQ(spec["token_ids"], plain["token_ids"]) << draft;
    EXPECT_EQ(spec["logprobs"], plain["logprobs"]) << draft;
  }
  // Without --json it says how many drafts held: all of them when the draft
  // is the target itself.
  auto r = tessera::test::run_tessera("generate --model " + model("nano") +
                                      " --max-tokens 20 --ignore-eos --temperature 0 --speculative draft:3"
                                      " --draft-model " + model("nano"));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("(100.0%)"), std::string::npos) << r.out;
}

TEST_F(DraftCliTest, RefusesADraftWithAnotherVocabularyByName) {
  auto r = tessera::test::run_tessera("generate --model " + model("nano") +
                                      " --max-tokens 2 --speculative draft:4 --draft-model " + model("micro"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("draft model's tokenizer"), std::string::npos) << r.out;
  r = tessera::test::run_tessera("generate --model " + model("nano") + " --max-tokens 2 --draft-model " +
                                 model("nowhere"));
  EXPECT_NE(r.exit_code, 0);
  r = tessera::test::run_tessera("serve --model " + model("nano") + " --speculative draft:4 --port 1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("needs a draft model (--draft-model DIR)"), std::string::npos) << r.out;
}

/// A running `tessera serve` on the nano model (prefill + decode workers).
struct server {
  std::optional<tessera::child_process> proc;
  uint16_t port = 0;

  static server start(const std::vector<std::string>& extra) {
    server s;
    s.port = tessera::test::free_port();
    std::string cmd = "exec " + tessera::test::tessera_binary() + " serve --threads 1 --port " +
                      std::to_string(s.port);
    for (const auto& a : extra)
      cmd += " '" + a + "'";
    auto c = tessera::child_process::spawn("/bin/sh", {"-c", cmd + " 2>&1"}, {.capture_stdout = true});
    EXPECT_TRUE(c) << tessera::error_text(c.error());
    s.proc.emplace(std::move(*c));
    for (int i = 0; i < 200; ++i) {
      auto line = s.proc->read_line(60s);
      EXPECT_TRUE(line) << "the server did not start";
      if (!line || line->find("listening on") != std::string::npos)
        break;
    }
    return s;
  }

  tessera::test::http_reply complete(const json& speculative) const {
    json body = {{"model", "nano"},       {"prompt", "the cat sat on the mat"}, {"max_tokens", 32},
                 {"temperature", 0},      {"ignore_eos", true},                 {"logprobs", 0}};
    if (!speculative.is_null())
      body["speculative"] = speculative;
    return tessera::test::http_post_json("http://127.0.0.1:" + std::to_string(port) + "/v1/completions",
                                         body.dump());
  }
};

TEST_F(DraftCliTest, ServedDecodeWorkerDraftsAndBadRequestsGet400) {
  {
    // Disaggregated (the default): the prefill worker computes the prompt,
    // the decode worker drafts with its draft model.
    auto s = server::start({"--model", model("nano"), "--served-model-name", "nano", "--draft-model", model("draft")});
    auto plain = s.complete(nullptr);
    ASSERT_EQ(plain.status, 200) << plain.body;
    auto spec = s.complete({{"method", "draft"}, {"num_tokens", 4}});
    ASSERT_EQ(spec.status, 200) << spec.body;
    const auto a = json::parse(plain.body)["choices"][0];
    const auto b = json::parse(spec.body)["choices"][0];
    EXPECT_EQ(a["text"], b["text"]);
    EXPECT_EQ(a["logprobs"], b["logprobs"]);
    auto bad = s.complete({{"method", "draft"}, {"num_tokens", 17}});
    EXPECT_EQ(bad.status, 400) << bad.body;
    EXPECT_NE(bad.body.find("speculative"), std::string::npos) << bad.body;
  }
  {
    auto s = server::start({"--model", model("nano"), "--served-model-name", "nano", "--mode", "agg"});
    auto r = s.complete({{"method", "draft"}, {"num_tokens", 4}});
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_NE(r.body.find("draft model"), std::string::npos) << r.body;
    EXPECT_EQ(s.complete({{"method", "ngram"}, {"num_tokens", 4}}).status, 200);
  }
}

} // namespace
