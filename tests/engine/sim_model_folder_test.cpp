// A model folder written config-only (llama3-8b: config.json, the demo
// tokenizer, no weights) loads and generates with the sim backend; the cpu
// backend refuses it with an error naming the missing weight files.
#include <filesystem>

#include <gtest/gtest.h>

#include "common/error.hpp"
#include "engine/engine.hpp"
#include "engine/factory/backend_factory.hpp"
#include "engine/tokenizer.hpp"
#include "engine/tokenizer_builder.hpp"
#include "engine/weights.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

using namespace tessera;
using namespace tessera::engine;

class SimModelFolderTest : public testing::Test {
protected:
  static void SetUpTestSuite() {
    dir_ = new test::temp_dir{"tessera-sim-model"};
    auto cfg = model_shape("llama3-8b");
    ASSERT_TRUE(cfg);
    ASSERT_FALSE(write_model_config(path(), *cfg));
    ASSERT_FALSE(write_demo_tokenizer(path(), cfg->vocab_size));
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::filesystem::path path() { return dir_->path() / "llama3-8b"; }
  static test::temp_dir* dir_;
};

test::temp_dir* SimModelFolderTest::dir_ = nullptr;

TEST_F(SimModelFolderTest, HoldsConfigAndTokenizerButNoWeights) {
  for (const char* f : {"config.json", "generation_config.json", "tokenizer.json",
                        "tokenizer_config.json"})
    EXPECT_TRUE(std::filesystem::exists(path() / f)) << f;
  EXPECT_FALSE(std::filesystem::exists(path() / "model.safetensors"));
  auto cfg = load_model_config(path());
  ASSERT_TRUE(cfg) << error_text(cfg.error());
  EXPECT_EQ(cfg->hidden_size, 4096);
  EXPECT_EQ(cfg->num_hidden_layers, 32);
  EXPECT_EQ(cfg->num_attention_heads, 32);
  EXPECT_EQ(cfg->num_key_value_heads, 8);
  EXPECT_EQ(cfg->intermediate_size, 14336);
  EXPECT_EQ(cfg->vocab_size, 128256);
  EXPECT_EQ(cfg->max_position_embeddings, 131072);
  EXPECT_FLOAT_EQ(cfg->rope_theta, 500000.0f);
  EXPECT_EQ(cfg->rope_scaling.type, "llama3");
  EXPECT_NEAR(static_cast<double>(cfg->parameter_count()), 8.03e9, 0.01e9);
}

TEST_F(SimModelFolderTest, LoadsAndGeneratesTextWithTheSimEngine) {
  auto files = load_model_files(path(), backend_kind::sim);
  ASSERT_TRUE(files) << error_text(files.error());
  EXPECT_EQ(files->weights, nullptr);
  EXPECT_EQ(files->tokenizer->vocab_size(), 128256);
  backend_options bo;
  bo.choice.kind = backend_kind::sim;
  bo.choice.sim.time_scale = 0;
  bo.choice.sim.payload_scale = 1024;
  auto be = make_backend(*files, bo); // KV capacity: what an H100 leaves
  ASSERT_TRUE(be) << error_text(be.error());
  EXPECT_GT((*be)->num_blocks(), 20000);
  engine::engine eng{std::move(*be), {}, files->tokenizer};
  request r;
  r.id = 1;
  r.prompt = files->tokenizer->encode("The quick brown fox", true);
  r.params.max_tokens = 16;
  r.params.temperature = 0;
  ASSERT_FALSE(eng.add_request(r));
  std::string text;
  int tokens = 0;
  while (eng.has_unfinished())
    for (const auto& o : eng.step()) {
      text += o.text;
      tokens += static_cast<int>(o.tokens.size());
    }
  EXPECT_EQ(tokens, 16);
  EXPECT_FALSE(text.empty());
  for (char c : text)
    EXPECT_TRUE(c >= 0x20 && c <= 0x7e) << "readable ids only: " << text;
}

TEST_F(SimModelFolderTest, CpuEngineRefusesItNamingTheMissingFiles) {
  auto files = load_model_files(path(), backend_kind::cpu);
  ASSERT_FALSE(files);
  const auto msg = error_text(files.error());
  EXPECT_NE(msg.find("model.safetensors"), std::string::npos) << msg;
  EXPECT_NE(msg.find("model.safetensors.index.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--engine sim"), std::string::npos) << msg;
  EXPECT_NE(msg.find(path().string()), std::string::npos) << msg;
}

TEST_F(SimModelFolderTest, WritingConfigOnlyRemovesStaleWeights) {
  test::temp_dir dir{"tessera-sim-stale"};
  auto nano = model_shape("nano");
  random_model_options two_shards;
  two_shards.shards = 2;
  ASSERT_FALSE(write_random_model(dir.path(), *nano, two_shards));
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "model.safetensors.index.json"));
  ASSERT_FALSE(write_model_config(dir.path(), *model_shape("llama3-8b")));
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    EXPECT_EQ(e.path().string().find("safetensors"), std::string::npos) << e.path();
}

} // namespace
