#include "actors/frontend/api_prompt.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "actors/frontend/openai_response.hpp"
#include "common/error.hpp"
#include "engine/model_config.hpp"
#include "engine/tokenizer.hpp"
#include "engine/tokenizer_builder.hpp"
#include "tests/frontend/demo_tokenizer.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

using namespace tessera::actors::frontend;
using tessera::test::temp_dir;
using json = nlohmann::json;
namespace engine = tessera::engine;

constexpr int32_t bos = engine::demo_special_ids::begin_of_text;

class ApiPromptTest : public ::testing::Test {
protected:
  void SetUp() override {
    tok_ = tessera::test::load_demo_tokenizer(dir_.path());
    ASSERT_TRUE(tok_);
    auto t = detect_chat_template(tok_->settings().chat_template);
    ASSERT_TRUE(std::holds_alternative<chat_template>(t));
    tmpl_ = std::get<chat_template>(t);
  }

  api_request parse(api_kind kind, const json& body) {
    auto r = parse_request(kind, body.dump());
    EXPECT_TRUE(std::holds_alternative<api_request>(r))
      << std::get<api_error>(r).message;
    return std::holds_alternative<api_request>(r) ? std::get<api_request>(r) : api_request{};
  }

  api_result<std::vector<int32_t>> prepare(api_request& req, int32_t max_model_len = 256,
                                           bool with_template = true) {
    return prepare_prompt(req, *tok_, with_template ? &tmpl_ : nullptr, max_model_len);
  }

  static long bos_count(const std::vector<int32_t>& ids) {
    return std::count(ids.begin(), ids.end(), bos);
  }

  temp_dir dir_;
  std::unique_ptr<engine::tokenizer> tok_;
  chat_template tmpl_;
};

TEST_F(ApiPromptTest, CompletionTextGetsTheTokenizersBosOnce) {
  auto req = parse(api_kind::completion, {{"model", "m"}, {"prompt", "The cat sat"}});
  auto r = prepare(req);
  ASSERT_TRUE(std::holds_alternative<std::vector<int32_t>>(r)) << std::get<api_error>(r).message;
  const auto& ids = std::get<std::vector<int32_t>>(r);
  EXPECT_EQ(ids, tok_->encode("The cat sat", /*add_bos=*/true));
  EXPECT_EQ(bos_count(ids), 1);
  EXPECT_EQ(req.params.max_tokens, 16);
}

TEST_F(ApiPromptTest, CompletionTextWithItsOwnBosDoesNotGetASecond) {
  auto req = parse(api_kind::completion, {{"model", "m"}, {"prompt", "<|begin_of_text|>Hi"}});
  auto r = prepare(req);
  ASSERT_TRUE(std::holds_alternative<std::vector<int32_t>>(r));
  const auto& ids = std::get<std::vector<int32_t>>(r);
  EXPECT_EQ(ids.front(), bos);
  EXPECT_EQ(bos_count(ids), 1);
}

TEST_F(ApiPromptTest, TokenIdPromptIsUsedAsGiven) {
  auto req = parse(api_kind::completion, {{"model", "m"}, {"prompt", {300, 301, 302}}});
  auto r = prepare(req);
  ASSERT_TRUE(std::holds_alternative<std::vector<int32_t>>(r));
  EXPECT_EQ(std::get<std::vector<int32_t>>(r), (std::vector<int32_t>{300, 301, 302}));
}

TEST_F(ApiPromptTest, TokenIdOutsideTheVocabularyIsRejected) {
  auto req = parse(api_kind::completion, {{"model", "m"}, {"prompt", {1, 512}}});
  auto r = prepare(req);
  ASSERT_TRUE(std::holds_alternative<api_error>(r));
  const auto& e = std::get<api_error>(r);
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "prompt");
  EXPECT_NE(e.message.find("prompt token 1 is 512"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("vocabulary of 512"), std::string::npos) << e.message;
}

TEST_F(ApiPromptTest, ChatIsRenderedWithOneBosAndGetsTheRestOfTheContext) {
  json msgs = json::array({{{"role", "system"}, {"content", "Be brief."}},
                           {{"role", "user"}, {"content", "Hello there"}}});
  auto req = parse(api_kind::chat, {{"model", "m"}, {"messages", msgs}});
  auto r = prepare(req, 300);
  ASSERT_TRUE(std::holds_alternative<std::vector<int32_t>>(r)) << std::get<api_error>(r).message;
  const auto& ids = std::get<std::vector<int32_t>>(r);
  EXPECT_EQ(ids.front(), bos);
  EXPECT_EQ(bos_count(ids), 1);
  EXPECT_EQ(req.params.max_tokens, 300 - static_cast<int32_t>(ids.size()));
  EXPECT_EQ(tok_->decode(ids, false),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHello there<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST_F(ApiPromptTest, ChatWithoutATemplateIsA400) {
  auto req = parse(api_kind::chat,
                   {{"model", "m"}, {"messages", json::array({{{"role", "user"}, {"content", "x"}}})}});
  auto r = prepare(req, 256, /*with_template=*/false);
  ASSERT_TRUE(std::holds_alternative<api_error>(r));
  EXPECT_NE(std::get<api_error>(r).message.find("no chat template"), std::string::npos);
}

TEST_F(ApiPromptTest, PromptLongerThanTheContextIsA400) {
  auto req = parse(api_kind::completion,
                   {{"model", "m"}, {"prompt", std::string(2000, 'x')}, {"max_tokens", 10}});
  auto r = prepare(req, 64);
  ASSERT_TRUE(std::holds_alternative<api_error>(r));
  EXPECT_NE(std::get<api_error>(r).message.find("maximum context length is 64"),
            std::string::npos)
    << std::get<api_error>(r).message;
}

TEST_F(ApiPromptTest, ResponseOptionsTakeTokenTextFromTheTokenizer) {
  auto req = parse(api_kind::chat, {{"model", "m"},
                                    {"messages", json::array({{{"role", "user"}, {"content", "x"}}})},
                                    {"logprobs", true},
                                    {"stream", true},
                                    {"stream_options", {{"include_usage", true}}}});
  auto opts = options_for(req, *tok_);
  EXPECT_TRUE(opts.logprobs);
  EXPECT_TRUE(opts.include_usage);
  ASSERT_TRUE(opts.token_bytes);
  auto the = tok_->encode(" the");
  ASSERT_EQ(the.size(), 1u);
  EXPECT_EQ(opts.token_bytes(the[0]), " the");
  EXPECT_EQ(opts.token_bytes(engine::demo_special_ids::eot), "<|eot_id|>");
}

} // namespace
