// The tessera binary end to end: model init, generate (text and JSON), and
// clear errors for bad input.
#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>

#include "tests/support/run_tessera.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

using tessera::test::run_result;

run_result run(const std::string& args) {
  return tessera::test::run_tessera(args);
}

class CliTest : public testing::Test {
protected:
  static void SetUpTestSuite() {
    dir_ = new tessera::test::temp_dir{"tessera-cli"};
    auto r = run("model init --shape nano --seed 3 --out " + model().string());
    ASSERT_EQ(r.exit_code, 0) << r.out;
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::filesystem::path model() { return dir_->path() / "nano"; }
  static tessera::test::temp_dir* dir_;
};

tessera::test::temp_dir* CliTest::dir_ = nullptr;

TEST_F(CliTest, ModelInitWritesAHuggingFaceFolder) {
  for (const char* f : {"config.json", "generation_config.json", "model.safetensors",
                        "tokenizer.json", "tokenizer_config.json"})
    EXPECT_TRUE(std::filesystem::exists(model() / f)) << f;
  auto cfg = nlohmann::json::parse(std::ifstream{model() / "config.json"});
  EXPECT_EQ(cfg["model_type"], "llama");
  EXPECT_EQ(cfg["hidden_size"], 64);
}

TEST_F(CliTest, GenerateJsonPrintsTokensLogprobsAndText) {
  auto r = run("generate --model " + model().string() +
               " --prompt 'Hello world' --max-tokens 7 --temperature 0 --ignore-eos --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  EXPECT_FALSE(j["prompt_token_ids"].empty());
  EXPECT_EQ(j["prompt_token_ids"][0], 0) << "BOS comes first";
  ASSERT_EQ(j["token_ids"].size(), 7u);
  ASSERT_EQ(j["logprobs"].size(), 7u);
  for (auto& lp : j["logprobs"])
    EXPECT_LE(lp.get<double>(), 0.0);
  EXPECT_TRUE(j["text"].is_string());
  EXPECT_EQ(j["finish_reason"], "length");
  // Greedy is deterministic: the same command prints the same tokens.
  auto again = run("generate --model " + model().string() +
                   " --prompt 'Hello world' --max-tokens 7 --temperature 0 --ignore-eos --json");
  auto j2 = nlohmann::json::parse(again.out.substr(again.out.find('{')));
  EXPECT_EQ(j["token_ids"], j2["token_ids"]);
}

TEST_F(CliTest, GenerateStreamsTextAndReportsSpeed) {
  auto r = run("generate --model " + model().string() + " --prompt 'Hi' --max-tokens 5 --ignore-eos");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("5 generated"), std::string::npos) << r.out;
}

TEST_F(CliTest, MissingModelFolderFailsWithAnErrorNamingIt) {
  auto r = run("generate --model /nonexistent/tessera-model --prompt x");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("/nonexistent/tessera-model"), std::string::npos) << r.out;
}

TEST_F(CliTest, ARouterIndexCapOutOfRangeIsRefusedBeforeServing) {
  for (const char* v : {"-3", "99999999999"}) {
    auto r = run(std::string{"serve --model "} + model().string() + " --router-index-max-entries " + v);
    EXPECT_NE(r.exit_code, 0) << v << "\n" << r.out;
    EXPECT_NE(r.out.find("--router-index-max-entries"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("not in range"), std::string::npos) << r.out;
  }
}

TEST_F(CliTest, CorruptWeightsFailWithAnErrorNamingTheFile) {
  auto bad = dir_->path() / "bad";
  std::filesystem::copy(model(), bad);
  std::filesystem::resize_file(bad / "model.safetensors", 1000);
  auto r = run("generate --model " + bad.string() + " --prompt x");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("model.safetensors"), std::string::npos) << r.out;
}

TEST_F(CliTest, UnknownShapeListsTheKnownOnes) {
  auto r = run("model init --shape huge --out " + (dir_->path() / "x").string());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("small"), std::string::npos) << r.out;
}

} // namespace
