// `--engine sim` through the tessera binary: a config-only llama3-8b folder
// from `model init`, generation from it, the cpu engine's refusal, and the
// engine benchmark's modelled table.
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
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

class SimCliTest : public testing::Test {
protected:
  static void SetUpTestSuite() {
    dir_ = new tessera::test::temp_dir{"tessera-sim-cli"};
    auto r = run("model init --shape llama3-8b --out " + model().string());
    ASSERT_EQ(r.exit_code, 0) << r.out;
    init_out_ = new std::string{r.out};
  }
  static void TearDownTestSuite() {
    delete dir_;
    delete init_out_;
  }
  static std::filesystem::path model() { return dir_->path() / "llama3-8b"; }
  static tessera::test::temp_dir* dir_;
  static std::string* init_out_;
};

tessera::test::temp_dir* SimCliTest::dir_ = nullptr;
std::string* SimCliTest::init_out_ = nullptr;

TEST_F(SimCliTest, ModelInitWritesLargeShapesConfigOnly) {
  EXPECT_NE(init_out_->find("config-only"), std::string::npos) << *init_out_;
  EXPECT_TRUE(std::filesystem::exists(model() / "config.json"));
  EXPECT_TRUE(std::filesystem::exists(model() / "tokenizer.json"));
  EXPECT_FALSE(std::filesystem::exists(model() / "model.safetensors"));
  // --no-weights for a small shape too.
  auto r = run("model init --shape nano --no-weights --out " + (dir_->path() / "nano").string());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_FALSE(std::filesystem::exists(dir_->path() / "nano" / "model.safetensors"));
}

TEST_F(SimCliTest, GenerateWithTheSimEngineIsDeterministic) {
  const std::string args = "generate --engine sim --sim-gpu h100 --sim-time-scale 0 --model " +
                           model().string() + " --prompt 'Hello world' --max-tokens 9 --json";
  auto r = run(args);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  ASSERT_EQ(j["token_ids"].size(), 9u);
  EXPECT_EQ(j["finish_reason"], "length");
  EXPECT_FALSE(j["text"].get<std::string>().empty());
  auto seeded = run(args + " --temperature 0.9 --seed 5");
  ASSERT_EQ(seeded.exit_code, 0) << seeded.out;
  EXPECT_EQ(nlohmann::json::parse(seeded.out.substr(seeded.out.find('{')))["token_ids"],
            j["token_ids"]);
}

TEST_F(SimCliTest, CpuEngineRefusesAConfigOnlyFolder) {
  auto r = run("generate --model " + model().string() + " --max-tokens 2");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("no weights"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("model.safetensors"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--engine sim"), std::string::npos) << r.out;
  auto bad = run("generate --engine gpu --model " + model().string());
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.out.find("--engine"), std::string::npos) << bad.out;
}

TEST_F(SimCliTest, BenchEngineReportsTheModelledGpu) {
  const auto json = dir_->path() / "bench.json";
  auto r = run("bench engine --engine sim --sim-gpu h100 --sim-payload-scale 1024 --model " +
               model().string() + " --prefill-tokens 2048 --decode-tokens 8 --concurrency 1,64 "
               "--json " + json.string());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("decode, 64 seq"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("compute"), std::string::npos) << r.out;
  auto j = nlohmann::json::parse(std::ifstream{json});
  EXPECT_EQ(j["gpu"], "h100");
  EXPECT_EQ(j["prefill"]["bound"], "compute");
  EXPECT_EQ(j["decode"]["1"]["bound"], "memory");
  EXPECT_GT(j["decode"]["64"]["tok_s"].get<double>(), 20 * j["decode"]["1"]["tok_s"].get<double>())
    << "decode batching is nearly free while memory-bound";
}

} // namespace
