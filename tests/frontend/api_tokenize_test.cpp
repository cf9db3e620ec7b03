#include "actors/frontend/api_tokenize.hpp"

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "actors/frontend/api_prompt.hpp"
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

class ApiTokenizeTest : public ::testing::Test {
protected:
  void SetUp() override {
    tok_ = tessera::test::load_demo_tokenizer(dir_.path());
    ASSERT_TRUE(tok_);
    auto t = resolve_chat_template(tok_->settings().chat_template, "");
    ASSERT_TRUE(std::holds_alternative<chat_template>(t)) << std::get<api_error>(t).message;
    tmpl_ = std::get<chat_template>(t);
  }

  tokenize_context ctx() { return {*tok_, &tmpl_, "m", 256, {}}; }

  json tokenize(const json& body) {
    auto r = tokenize_response(body.dump(), ctx());
    if (auto* e = std::get_if<api_error>(&r)) {
      ADD_FAILURE() << e->message;
      return {};
    }
    return json::parse(std::get<std::string>(r));
  }

  api_error tokenize_error(std::string_view body) {
    auto r = tokenize_response(body, ctx());
    EXPECT_TRUE(std::holds_alternative<api_error>(r)) << body;
    return std::holds_alternative<api_error>(r) ? std::get<api_error>(r) : api_error{};
  }

  /// The ids a request with `body` would send to the engine.
  std::vector<int32_t> request_ids(api_kind kind, const json& body) {
    auto parsed = parse_request(kind, body.dump());
    auto& req = std::get<api_request>(parsed);
    return std::get<std::vector<int32_t>>(prepare_prompt(req, *tok_, &tmpl_, 256));
  }

  temp_dir dir_;
  std::unique_ptr<engine::tokenizer> tok_;
  chat_template tmpl_;
};

TEST_F(ApiTokenizeTest, PromptGivesTheIdsACompletionWouldSend) {
  auto j = tokenize({{"model", "m"}, {"prompt", "The cat sat"}});
  const auto want = request_ids(api_kind::completion, {{"model", "m"}, {"prompt", "The cat sat"}});
  EXPECT_EQ(j["tokens"].get<std::vector<int32_t>>(), want);
  EXPECT_EQ(j["count"], want.size());
  EXPECT_EQ(j["max_model_len"], 256);
  EXPECT_FALSE(j.contains("token_strs"));
}

TEST_F(ApiTokenizeTest, MessagesGiveTheIdsAChatWouldSend) {
  json messages = json::array({{{"role", "user"}, {"content", "Hello there"}}});
  auto j = tokenize({{"model", "m"}, {"messages", messages}});
  EXPECT_EQ(j["tokens"].get<std::vector<int32_t>>(),
            request_ids(api_kind::chat, {{"model", "m"}, {"messages", messages}}));
}

TEST_F(ApiTokenizeTest, TokenStringsOnRequestAndModelMayBeLeftOut) {
  auto j = tokenize({{"prompt", "cat"}, {"return_token_strs", true}});
  ASSERT_TRUE(j["token_strs"].is_array());
  ASSERT_EQ(j["token_strs"].size(), j["tokens"].size());
  for (size_t i = 0; i < j["tokens"].size(); ++i)
    EXPECT_EQ(j["token_strs"][i], tok_->id_to_token(j["tokens"][i].get<int32_t>()));
}

TEST_F(ApiTokenizeTest, BadBodiesNameTheProblem) {
  EXPECT_EQ(tokenize_error(R"({"model":"other","prompt":"x"})").status, 404);
  EXPECT_EQ(tokenize_error(R"({"model":"m"})").param, "prompt");
  EXPECT_EQ(tokenize_error(R"({"prompt":"x","messages":[]})").param, "messages");
  EXPECT_EQ(tokenize_error(R"({"prompt":"x","return_token_strs":"yes"})").param, "return_token_strs");
  EXPECT_EQ(tokenize_error(R"({"prompt":[1,2,99999]})").param, "prompt");
  EXPECT_EQ(tokenize_error("[1]").status, 400);
  EXPECT_EQ(tokenize_error("{").status, 400);
  EXPECT_EQ(tokenize_error(std::string(300, '[')).status, 400);
  EXPECT_EQ(tokenize_error(std::string(5 << 20, ' ')).status, 413);
}

TEST_F(ApiTokenizeTest, DetokenizeRoundTripsAndKeepsSpecialTokens) {
  auto ids = request_ids(api_kind::completion, {{"model", "m"}, {"prompt", "The cat sat"}});
  auto r = detokenize_response(json{{"model", "m"}, {"tokens", ids}}.dump(), ctx());
  ASSERT_TRUE(std::holds_alternative<std::string>(r)) << std::get<api_error>(r).message;
  EXPECT_EQ(json::parse(std::get<std::string>(r))["prompt"], tok_->decode(ids, /*skip_special=*/false));
}

TEST_F(ApiTokenizeTest, DetokenizeRefusesIdsOutsideTheVocabulary) {
  for (const char* body : {R"({"tokens":[1,-1]})", R"({"tokens":[1,512000]})", R"({"tokens":[1.5]})",
                           R"({"tokens":"1 2"})", R"({"model":"x","tokens":[1]})"}) {
    auto r = detokenize_response(body, ctx());
    ASSERT_TRUE(std::holds_alternative<api_error>(r)) << body;
  }
  auto r = detokenize_response(R"({"tokens":[1,512000]})", ctx());
  EXPECT_EQ(std::get<api_error>(r).param, "tokens");
  EXPECT_NE(std::get<api_error>(r).message.find("tokens[1]"), std::string::npos);
}

} // namespace
