#include "engine/model_config.hpp"

#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "engine/engine_errc.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

using namespace tessera::engine;
using tessera::error_message;

constexpr const char* llama32_1b = R"({
  "architectures": ["LlamaForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 128000,
  "eos_token_id": [128001, 128008, 128009],
  "head_dim": 64,
  "hidden_act": "silu",
  "hidden_size": 2048,
  "initializer_range": 0.02,
  "intermediate_size": 8192,
  "max_position_embeddings": 131072,
  "mlp_bias": false,
  "model_type": "llama",
  "num_attention_heads": 32,
  "num_hidden_layers": 16,
  "num_key_value_heads": 8,
  "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": {
    "factor": 32.0,
    "high_freq_factor": 4.0,
    "low_freq_factor": 1.0,
    "original_max_position_embeddings": 8192,
    "rope_type": "llama3"
  },
  "rope_theta": 500000.0,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.45.0.dev0",
  "use_cache": true,
  "vocab_size": 128256
})";

constexpr const char* mistral_7b = R"({
  "architectures": ["MistralForCausalLM"],
  "attention_dropout": 0.0,
  "bos_token_id": 1,
  "eos_token_id": 2,
  "head_dim": null,
  "hidden_act": "silu",
  "hidden_size": 4096,
  "initializer_range": 0.02,
  "intermediate_size": 14336,
  "max_position_embeddings": 32768,
  "model_type": "mistral",
  "num_attention_heads": 32,
  "num_hidden_layers": 32,
  "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05,
  "rope_theta": 1000000.0,
  "sliding_window": null,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.42.0.dev0",
  "use_cache": true,
  "vocab_size": 32768
})";

constexpr const char* qwen2_05b = R"({
  "architectures": ["Qwen2ForCausalLM"],
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "eos_token_id": 151645,
  "hidden_act": "silu",
  "hidden_size": 896,
  "initializer_range": 0.02,
  "intermediate_size": 4864,
  "max_position_embeddings": 32768,
  "max_window_layers": 24,
  "model_type": "qwen2",
  "num_attention_heads": 14,
  "num_hidden_layers": 24,
  "num_key_value_heads": 2,
  "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0,
  "sliding_window": 32768,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.40.1",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 151936
})";

/// A minimal valid llama config with `key` replaced by `value` (or removed
/// when `value` is discarded).
std::string minimal_with(const std::string& key, const nlohmann::json& value) {
  nlohmann::json j = {{"model_type", "llama"},       {"vocab_size", 1000},
                      {"hidden_size", 256},          {"intermediate_size", 512},
                      {"num_hidden_layers", 2},      {"num_attention_heads", 8},
                      {"num_key_value_heads", 4}};
  if (value.is_discarded())
    j.erase(key);
  else
    j[key] = value;
  return j.dump();
}

const nlohmann::json removed = nlohmann::json(nlohmann::json::value_t::discarded);

/// Parses `text` expecting failure with `code`; returns the message.
std::string parse_error(const std::string& text, engine_errc code) {
  auto cfg = parse_model_config(text, "/models/x/config.json");
  EXPECT_FALSE(static_cast<bool>(cfg));
  if (cfg)
    return {};
  EXPECT_TRUE(cfg.error() == code) << tessera::error_text(cfg.error());
  return error_message(cfg.error());
}

TEST(ModelConfigTest, ParsesLlama32StyleConfigWithLlama3RopeAndTiedEmbeddings) {
  auto cfg = parse_model_config(llama32_1b, "config.json");
  ASSERT_TRUE(cfg) << tessera::error_text(cfg.error());
  EXPECT_EQ(cfg->model_type, "llama");
  EXPECT_EQ(cfg->vocab_size, 128256);
  EXPECT_EQ(cfg->hidden_size, 2048);
  EXPECT_EQ(cfg->intermediate_size, 8192);
  EXPECT_EQ(cfg->num_hidden_layers, 16);
  EXPECT_EQ(cfg->num_attention_heads, 32);
  EXPECT_EQ(cfg->num_key_value_heads, 8);
  EXPECT_EQ(cfg->head_dim, 64);
  EXPECT_EQ(cfg->max_position_embeddings, 131072);
  EXPECT_FLOAT_EQ(cfg->rms_norm_eps, 1e-5f);
  EXPECT_FLOAT_EQ(cfg->rope_theta, 500000.0f);
  EXPECT_EQ(cfg->rope_scaling.type, "llama3");
  EXPECT_FLOAT_EQ(cfg->rope_scaling.factor, 32.0f);
  EXPECT_FLOAT_EQ(cfg->rope_scaling.low_freq_factor, 1.0f);
  EXPECT_FLOAT_EQ(cfg->rope_scaling.high_freq_factor, 4.0f);
  EXPECT_EQ(cfg->rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_TRUE(cfg->tie_word_embeddings);
  EXPECT_FALSE(cfg->attention_bias);
  EXPECT_EQ(cfg->torch_dtype, dtype::bf16);
  EXPECT_EQ(cfg->bos_token_id, 128000);
  EXPECT_EQ(cfg->eos_token_ids, (std::vector<int32_t>{128001, 128008, 128009}));
  // Llama 3.2 1B has 1.24B parameters with the embedding counted once.
  EXPECT_NEAR(static_cast<double>(cfg->parameter_count()), 1.2358e9, 0.001e9);
}

TEST(ModelConfigTest, ParsesMistralStyleConfigWithNullHeadDimAndSingleEos) {
  auto cfg = parse_model_config(mistral_7b, "config.json");
  ASSERT_TRUE(cfg) << tessera::error_text(cfg.error());
  EXPECT_EQ(cfg->model_type, "mistral");
  EXPECT_EQ(cfg->head_dim, 128);
  EXPECT_EQ(cfg->num_key_value_heads, 8);
  EXPECT_EQ(cfg->intermediate_size, 14336);
  EXPECT_FLOAT_EQ(cfg->rope_theta, 1e6f);
  EXPECT_TRUE(cfg->rope_scaling.type.empty());
  EXPECT_FALSE(cfg->tie_word_embeddings);
  EXPECT_EQ(cfg->bos_token_id, 1);
  EXPECT_EQ(cfg->eos_token_ids, (std::vector<int32_t>{2}));
  EXPECT_NEAR(static_cast<double>(cfg->parameter_count()), 7.248e9, 0.001e9);
}

TEST(ModelConfigTest, ParsesQwen2StyleConfigAndImpliesAttentionBias) {
  auto cfg = parse_model_config(qwen2_05b, "config.json");
  ASSERT_TRUE(cfg) << tessera::error_text(cfg.error());
  EXPECT_EQ(cfg->model_type, "qwen2");
  EXPECT_TRUE(cfg->attention_bias);
  EXPECT_EQ(cfg->head_dim, 64);
  EXPECT_EQ(cfg->num_key_value_heads, 2);
  EXPECT_FLOAT_EQ(cfg->rms_norm_eps, 1e-6f);
  EXPECT_TRUE(cfg->tie_word_embeddings);
  EXPECT_EQ(cfg->eos_token_ids, (std::vector<int32_t>{151645}));
  EXPECT_NEAR(static_cast<double>(cfg->parameter_count()), 0.494e9, 0.001e9);
}

TEST(ModelConfigTest, DefaultsKvHeadsToHeadsAndHeadDimToHiddenOverHeads) {
  auto cfg = parse_model_config(minimal_with("num_key_value_heads", removed), "c.json");
  ASSERT_TRUE(cfg) << tessera::error_text(cfg.error());
  EXPECT_EQ(cfg->num_key_value_heads, 8);
  EXPECT_EQ(cfg->head_dim, 32);
  EXPECT_EQ(cfg->max_position_embeddings, 2048);
  EXPECT_FALSE(cfg->bos_token_id.has_value());
  EXPECT_TRUE(cfg->eos_token_ids.empty());
  EXPECT_FALSE(cfg->tie_word_embeddings);
  EXPECT_EQ(cfg->torch_dtype, dtype::bf16);
}

TEST(ModelConfigTest, AcceptsExplicitHeadDimThatDiffersFromHiddenOverHeads) {
  auto cfg = parse_model_config(minimal_with("head_dim", 64), "c.json");
  ASSERT_TRUE(cfg) << tessera::error_text(cfg.error());
  EXPECT_EQ(cfg->head_dim, 64);
}

TEST(ModelConfigTest, ReadsEosAsIntOrListOrNull) {
  auto one = parse_model_config(minimal_with("eos_token_id", 7), "c.json");
  ASSERT_TRUE(one);
  EXPECT_EQ(one->eos_token_ids, (std::vector<int32_t>{7}));
  auto list = parse_model_config(minimal_with("eos_token_id", {7, 9}), "c.json");
  ASSERT_TRUE(list);
  EXPECT_EQ(list->eos_token_ids, (std::vector<int32_t>{7, 9}));
  auto none = parse_model_config(minimal_with("eos_token_id", nullptr), "c.json");
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->eos_token_ids.empty());
}

TEST(ModelConfigTest, RejectsMissingHiddenSizeNamingFieldAndFile) {
  auto msg = parse_error(minimal_with("hidden_size", removed), engine_errc::bad_config);
  EXPECT_EQ(msg, "/models/x/config.json: missing field 'hidden_size'");
}

TEST(ModelConfigTest, RejectsHeadsNotDivisibleByKvHeads) {
  auto msg = parse_error(minimal_with("num_key_value_heads", 3), engine_errc::bad_config);
  EXPECT_NE(msg.find("/models/x/config.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("num_attention_heads (8) is not a multiple of num_key_value_heads (3)"),
            std::string::npos)
    << msg;
}

TEST(ModelConfigTest, RejectsNegativeSize) {
  auto msg = parse_error(minimal_with("intermediate_size", -5), engine_errc::bad_config);
  EXPECT_EQ(msg, "/models/x/config.json: field 'intermediate_size' is -5, must be between 1 "
                 "and 1048576");
}

TEST(ModelConfigTest, RejectsAbsurdSizesBeforeAnyoneAllocates) {
  auto msg = parse_error(minimal_with("vocab_size", int64_t{1} << 40), engine_errc::bad_config);
  EXPECT_NE(msg.find("field 'vocab_size'"), std::string::npos) << msg;
  msg = parse_error(minimal_with("num_hidden_layers", 5000), engine_errc::bad_config);
  EXPECT_NE(msg.find("field 'num_hidden_layers' is 5000"), std::string::npos) << msg;
}

TEST(ModelConfigTest, RejectsStringWhereNumberExpected) {
  auto msg = parse_error(minimal_with("hidden_size", "256"), engine_errc::bad_config);
  EXPECT_EQ(msg,
            "/models/x/config.json: field 'hidden_size' must be an integer, got a string");
  msg = parse_error(minimal_with("rms_norm_eps", "1e-5"), engine_errc::bad_config);
  EXPECT_NE(msg.find("field 'rms_norm_eps' must be a number"), std::string::npos) << msg;
  msg = parse_error(minimal_with("hidden_size", 256.5), engine_errc::bad_config);
  EXPECT_NE(msg.find("got a non-integer number"), std::string::npos) << msg;
}

TEST(ModelConfigTest, RejectsOddHeadDim) {
  auto msg = parse_error(minimal_with("head_dim", 7), engine_errc::bad_config);
  EXPECT_NE(msg.find("head_dim (7) must be even"), std::string::npos) << msg;
}

TEST(ModelConfigTest, RejectsEosOutsideVocabulary) {
  auto msg = parse_error(minimal_with("eos_token_id", {1, 5000}), engine_errc::bad_config);
  EXPECT_NE(msg.find("'eos_token_id' holds token id 5000"), std::string::npos) << msg;
}

TEST(ModelConfigTest, RejectsUnknownModelTypeAsUnsupported) {
  auto msg = parse_error(minimal_with("model_type", "gpt2"), engine_errc::unsupported);
  EXPECT_EQ(msg, "/models/x/config.json: unsupported model_type 'gpt2' (supported: llama, "
                 "mistral, qwen2)");
}

TEST(ModelConfigTest, RejectsUnknownRopeTypeAsUnsupported) {
  auto msg = parse_error(minimal_with("rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}}),
                         engine_errc::unsupported);
  EXPECT_NE(msg.find("/models/x/config.json: unsupported rope_scaling type 'yarn'"),
            std::string::npos)
    << msg;
  msg = parse_error(minimal_with("rope_scaling", {{"type", "dynamic"}, {"factor", 2.0}}),
                    engine_errc::unsupported);
  EXPECT_NE(msg.find("'dynamic'"), std::string::npos) << msg;
}

TEST(ModelConfigTest, AcceptsLinearAndDefaultRopeScalingUnderEitherKey) {
  auto lin = parse_model_config(
    minimal_with("rope_scaling", {{"type", "linear"}, {"factor", 2.0}}), "c.json");
  ASSERT_TRUE(lin) << tessera::error_text(lin.error());
  EXPECT_EQ(lin->rope_scaling.type, "linear");
  EXPECT_FLOAT_EQ(lin->rope_scaling.factor, 2.0f);
  auto def = parse_model_config(minimal_with("rope_scaling", {{"rope_type", "default"}}), "c");
  ASSERT_TRUE(def) << tessera::error_text(def.error());
  EXPECT_TRUE(def->rope_scaling.type.empty());
}

TEST(ModelConfigTest, RejectsLlama3RopeScalingWithoutItsFields) {
  auto msg = parse_error(minimal_with("rope_scaling", {{"rope_type", "llama3"}, {"factor", 8}}),
                         engine_errc::bad_config);
  EXPECT_NE(msg.find("missing field 'rope_scaling.low_freq_factor'"), std::string::npos) << msg;
}

TEST(ModelConfigTest, RejectsMalformedJsonWithParserPosition) {
  auto msg = parse_error("{\n  \"hidden_size\": 12,\n  oops\n}", engine_errc::bad_config);
  EXPECT_NE(msg.find("/models/x/config.json: malformed JSON"), std::string::npos) << msg;
  EXPECT_NE(msg.find("line 3"), std::string::npos) << msg;
}

TEST(ModelConfigTest, RejectsJsonThatIsNotAnObject) {
  auto msg = parse_error("[1, 2]", engine_errc::bad_config);
  EXPECT_NE(msg.find("expected a JSON object, got an array"), std::string::npos) << msg;
}

TEST(ModelConfigTest, RejectsMlpBiasAndOtherActivations) {
  parse_error(minimal_with("mlp_bias", true), engine_errc::unsupported);
  auto msg = parse_error(minimal_with("hidden_act", "gelu"), engine_errc::unsupported);
  EXPECT_NE(msg.find("unsupported hidden_act 'gelu'"), std::string::npos) << msg;
}

TEST(ModelConfigTest, RoundTripsEveryShapeThroughToJson) {
  auto names = model_shape_names();
  ASSERT_GE(names.size(), 8u);
  for (const auto& name : names) {
    auto shape = model_shape(name);
    ASSERT_TRUE(shape) << name;
    auto text = to_json(*shape).dump(2);
    auto back = parse_model_config(text, name);
    ASSERT_TRUE(back) << name << ": " << tessera::error_text(back.error());
    EXPECT_TRUE(*back == *shape) << name << "\n" << text;
  }
}

TEST(ModelConfigTest, RoundTripsParsedRealConfigs) {
  for (const char* text : {llama32_1b, mistral_7b, qwen2_05b}) {
    auto cfg = parse_model_config(text, "config.json");
    ASSERT_TRUE(cfg);
    auto back = parse_model_config(to_json(*cfg).dump(), "config.json");
    ASSERT_TRUE(back) << tessera::error_text(back.error());
    EXPECT_TRUE(*back == *cfg);
  }
}

TEST(ModelConfigTest, ToJsonWritesHuggingFaceFieldNames) {
  auto j = to_json(*model_shape("nano-qwen2"));
  EXPECT_EQ(j["architectures"], nlohmann::json::array({"Qwen2ForCausalLM"}));
  EXPECT_EQ(j["model_type"], "qwen2");
  EXPECT_EQ(j["torch_dtype"], "bfloat16");
  EXPECT_EQ(j["eos_token_id"], nlohmann::json({1, 4}));
  EXPECT_EQ(j["rms_norm_eps"].dump(), "1e-05");
  EXPECT_EQ(to_json(*model_shape("nano"))["architectures"][0], "LlamaForCausalLM");
  auto l3 = to_json(*model_shape("nano-llama3"));
  EXPECT_EQ(l3["rope_scaling"]["rope_type"], "llama3");
  EXPECT_EQ(l3["rope_scaling"]["original_max_position_embeddings"], 128);
}

TEST(ModelConfigTest, ShapesMatchTheirSpecification) {
  auto small = model_shape("small");
  ASSERT_TRUE(small);
  EXPECT_GT(small->parameter_count(), 124'600'000);
  EXPECT_LT(small->parameter_count(), 124'800'000);
  auto tiny = model_shape("tiny");
  ASSERT_TRUE(tiny);
  EXPECT_EQ(tiny->head_dim, 48);
  EXPECT_EQ(tiny->num_key_value_heads, 6);
  auto tied = model_shape("nano-tied");
  ASSERT_TRUE(tied);
  EXPECT_TRUE(tied->tie_word_embeddings);
  EXPECT_EQ(model_shape("nano-mha")->num_key_value_heads, 4);
  EXPECT_EQ(model_shape("micro")->vocab_size, 2048);
  EXPECT_EQ(model_shape("nano")->eos_token_ids, (std::vector<int32_t>{1, 4}));
  EXPECT_EQ(model_shape("nano")->bos_token_id, 0);
  EXPECT_FALSE(model_shape("huge").has_value());
}

TEST(ModelConfigTest, LoadsConfigFromFolderAndNamesMissingFile) {
  tessera::test::temp_dir dir;
  auto missing = load_model_config(dir.path());
  ASSERT_FALSE(missing);
  EXPECT_TRUE(missing.error() == engine_errc::io_error);
  EXPECT_NE(error_message(missing.error()).find((dir.path() / "config.json").string()),
            std::string::npos);
  std::ofstream{dir.path() / "config.json"} << qwen2_05b;
  auto cfg = load_model_config(dir.path());
  ASSERT_TRUE(cfg) << tessera::error_text(cfg.error());
  EXPECT_EQ(cfg->model_type, "qwen2");
}

} // namespace
