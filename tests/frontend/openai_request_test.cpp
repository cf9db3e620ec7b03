#include "actors/frontend/openai_request.hpp"

#include <random>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace {

using namespace tessera::actors::frontend;
using json = nlohmann::json;

api_request ok(api_kind kind, const std::string& body, const api_limits& limits = {}) {
  auto r = parse_request(kind, body, limits);
  if (auto* e = std::get_if<api_error>(&r)) {
    ADD_FAILURE() << "rejected (" << e->status << "): " << e->message << "\nbody: " << body;
    return {};
  }
  return std::get<api_request>(std::move(r));
}

api_error bad(api_kind kind, const std::string& body, const api_limits& limits = {}) {
  auto r = parse_request(kind, body, limits);
  if (auto* e = std::get_if<api_error>(&r))
    return *e;
  ADD_FAILURE() << "accepted: " << body.substr(0, 200);
  return {};
}

api_request completion(json extra = json::object()) {
  json body = {{"model", "m"}, {"prompt", "Hello"}};
  body.update(extra);
  return ok(api_kind::completion, body.dump());
}

api_request chat(json extra = json::object()) {
  json body = {{"model", "m"}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}}};
  body.update(extra);
  return ok(api_kind::chat, body.dump());
}

api_error completion_error(json extra) {
  json body = {{"model", "m"}, {"prompt", "Hello"}};
  body.update(extra);
  return bad(api_kind::completion, body.dump());
}

api_error chat_error(json extra) {
  json body = {{"model", "m"}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}}};
  body.update(extra);
  return bad(api_kind::chat, body.dump());
}

/// The error is a 400 about `param` whose message contains each of `words`.
void expect_400(const api_error& e, const std::string& param,
                std::initializer_list<std::string> words) {
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.type, "invalid_request_error");
  EXPECT_EQ(e.param, param) << e.message;
  for (const auto& w : words)
    EXPECT_NE(e.message.find(w), std::string::npos) << "'" << w << "' not in: " << e.message;
}

// ---- defaults ---------------------------------------------------------------

TEST(OpenaiRequestTest, CompletionDefaultsFollowOpenAI) {
  auto r = completion();
  EXPECT_EQ(r.kind, api_kind::completion);
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.prompt_text, "Hello");
  EXPECT_FALSE(r.prompt_tokens);
  EXPECT_EQ(r.max_tokens, 16);
  EXPECT_EQ(r.params.max_tokens, 16);
  EXPECT_EQ(r.n, 1);
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.include_usage);
  EXPECT_FALSE(r.logprobs);
  EXPECT_FALSE(r.params.logprobs);
  EXPECT_FLOAT_EQ(r.params.temperature, 1.0f);
  EXPECT_FLOAT_EQ(r.params.top_p, 1.0f);
  EXPECT_EQ(r.params.top_k, 0);
  EXPECT_FALSE(r.params.seed);
  EXPECT_TRUE(r.params.stop.empty());
  EXPECT_TRUE(r.user.empty());
  EXPECT_TRUE(r.session_id.empty());
}

TEST(OpenaiRequestTest, ChatWithoutMaxTokensLeavesItToTheContext) {
  auto r = chat();
  EXPECT_EQ(r.kind, api_kind::chat);
  EXPECT_FALSE(r.max_tokens);
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(r.messages[0].role, "user");
  EXPECT_EQ(r.messages[0].content, "Hi");
  EXPECT_TRUE(r.add_generation_prompt);
}

TEST(OpenaiRequestTest, NullMeansAbsent) {
  auto r = completion({{"max_tokens", nullptr}, {"temperature", nullptr}, {"stop", nullptr},
                       {"seed", nullptr}, {"logprobs", nullptr}, {"user", nullptr}});
  EXPECT_EQ(r.max_tokens, 16);
  EXPECT_FLOAT_EQ(r.params.temperature, 1.0f);
  EXPECT_FALSE(r.params.seed);
  EXPECT_FALSE(r.logprobs);
}

TEST(OpenaiRequestTest, UnknownFieldsAreIgnored) {
  auto r = completion({{"frobnicate", {1, 2, 3}}, {"metadata", {{"a", "b"}}},
                       {"store", true}, {"service_tier", "auto"}});
  EXPECT_EQ(r.prompt_text, "Hello");
  auto c = chat({{"parallel_tool_calls", false}, {"x_custom", nullptr}});
  EXPECT_EQ(c.messages.size(), 1u);
}

// ---- field mapping ----------------------------------------------------------

TEST(OpenaiRequestTest, SamplingFieldsMapOntoSamplingParams) {
  auto r = completion({{"max_tokens", 100}, {"temperature", 0.5}, {"top_p", 0.9},
                       {"top_k", 40}, {"min_p", 0.05}, {"seed", 1234},
                       {"presence_penalty", 0.5}, {"frequency_penalty", -0.5},
                       {"repetition_penalty", 1.1}, {"min_tokens", 3}, {"ignore_eos", true},
                       {"stop_token_ids", {7, 9}}});
  const auto& p = r.params;
  EXPECT_EQ(p.max_tokens, 100);
  EXPECT_EQ(r.max_tokens, 100);
  EXPECT_FLOAT_EQ(p.temperature, 0.5f);
  EXPECT_FLOAT_EQ(p.top_p, 0.9f);
  EXPECT_EQ(p.top_k, 40);
  EXPECT_FLOAT_EQ(p.min_p, 0.05f);
  EXPECT_EQ(p.seed, 1234u);
  EXPECT_FLOAT_EQ(p.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(p.frequency_penalty, -0.5f);
  EXPECT_FLOAT_EQ(p.repetition_penalty, 1.1f);
  EXPECT_EQ(p.min_tokens, 3);
  EXPECT_TRUE(p.ignore_eos);
  EXPECT_EQ(p.stop_token_ids, (std::vector<int32_t>{7, 9}));
}

TEST(OpenaiRequestTest, TopKMinusOneAndZeroBothMeanOff) {
  EXPECT_EQ(completion({{"top_k", -1}}).params.top_k, -1);
  EXPECT_EQ(completion({{"top_k", 0}}).params.top_k, 0);
}

TEST(OpenaiRequestTest, NegativeSeedWrapsToAnUnsignedSeed) {
  EXPECT_EQ(completion({{"seed", -1}}).params.seed, UINT64_MAX);
  EXPECT_EQ(completion({{"seed", 0}}).params.seed, 0u);
  EXPECT_EQ(completion({{"seed", UINT64_MAX}}).params.seed, UINT64_MAX);
}

TEST(OpenaiRequestTest, StopTakesAStringOrAnArray) {
  EXPECT_EQ(completion({{"stop", "\n"}}).params.stop, (std::vector<std::string>{"\n"}));
  EXPECT_EQ(completion({{"stop", {"a", "bc"}}}).params.stop,
            (std::vector<std::string>{"a", "bc"}));
  EXPECT_TRUE(completion({{"stop", json::array()}}).params.stop.empty());
  // More than OpenAI's 4, up to the engine's bound (as vLLM allows).
  json many = json::array();
  for (int i = 0; i < 16; ++i)
    many.push_back(std::string{"s"}.append(std::to_string(i)));
  EXPECT_EQ(completion({{"stop", many}}).params.stop.size(), 16u);
}

TEST(OpenaiRequestTest, IntegralFloatsCountAsIntegers) {
  EXPECT_EQ(completion({{"max_tokens", 32.0}}).params.max_tokens, 32);
  EXPECT_FLOAT_EQ(completion({{"temperature", 1}}).params.temperature, 1.0f);
}

TEST(OpenaiRequestTest, PromptTakesStringArrayOfOneStringOrTokenIds) {
  EXPECT_EQ(completion({{"prompt", {"one"}}}).prompt_text, "one");
  auto ids = completion({{"prompt", {1, 2, 3}}});
  ASSERT_TRUE(ids.prompt_tokens);
  EXPECT_EQ(*ids.prompt_tokens, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_TRUE(ids.prompt_text.empty());
  auto nested = completion({{"prompt", {{4, 5}}}});
  ASSERT_TRUE(nested.prompt_tokens);
  EXPECT_EQ(*nested.prompt_tokens, (std::vector<int32_t>{4, 5}));
  EXPECT_EQ(completion({{"prompt", ""}}).prompt_text, "");
}

TEST(OpenaiRequestTest, StreamAndIncludeUsage) {
  auto r = completion({{"stream", true}, {"stream_options", {{"include_usage", true}}}});
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  auto s = chat({{"stream", true}});
  EXPECT_TRUE(s.stream);
  EXPECT_FALSE(s.include_usage);
}

TEST(OpenaiRequestTest, CompletionLogprobsIsTheNumberOfAlternatives) {
  auto r = completion({{"logprobs", 5}});
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 5);
  EXPECT_EQ(r.params.logprobs, 5);
  auto zero = completion({{"logprobs", 0}});
  EXPECT_TRUE(zero.logprobs);
  EXPECT_EQ(zero.params.logprobs, 0);
}

TEST(OpenaiRequestTest, ChatLogprobsIsABooleanWithTopLogprobs) {
  auto r = chat({{"logprobs", true}, {"top_logprobs", 3}});
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 3);
  EXPECT_EQ(r.params.logprobs, 3);
  auto only = chat({{"logprobs", true}});
  EXPECT_EQ(only.params.logprobs, 0);
  auto off = chat({{"logprobs", false}});
  EXPECT_FALSE(off.params.logprobs);
}

TEST(OpenaiRequestTest, ChatMaxCompletionTokensWinsOverMaxTokens) {
  EXPECT_EQ(chat({{"max_tokens", 10}}).max_tokens, 10);
  EXPECT_EQ(chat({{"max_completion_tokens", 20}, {"max_tokens", 10}}).max_tokens, 20);
  EXPECT_EQ(chat({{"max_completion_tokens", 20}}).params.max_tokens, 20);
}

TEST(OpenaiRequestTest, NUserSessionAndGenerationPrompt) {
  auto r = chat({{"n", 3}, {"user", "alice"}, {"session_id", "conv-7"},
                 {"add_generation_prompt", false}});
  EXPECT_EQ(r.n, 3);
  EXPECT_EQ(r.user, "alice");
  EXPECT_EQ(r.session_id, "conv-7");
  EXPECT_FALSE(r.add_generation_prompt);
}

TEST(OpenaiRequestTest, ChatRolesAndTextParts) {
  json messages = {
    {{"role", "system"}, {"content", "Be brief."}},
    {{"role", "user"},
     {"content", {{{"type", "text"}, {"text", "part one"}}, {{"type", "text"}, {"text", "two"}}}}},
    {{"role", "assistant"}, {"content", nullptr}},
    {{"role", "tool"}, {"content", "42"}, {"tool_call_id", "x"}},
    {{"role", "developer"}, {"content", "dev"}},
  };
  auto r = chat({{"messages", messages}});
  ASSERT_EQ(r.messages.size(), 5u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[1].content, "part one\ntwo"); // joined as vLLM joins them
  EXPECT_EQ(r.messages[2].role, "assistant");
  EXPECT_EQ(r.messages[2].content, "");
  EXPECT_EQ(r.messages[3].role, "tool");
  EXPECT_EQ(r.messages[4].role, "system");
}

// ---- bad input --------------------------------------------------------------

TEST(OpenaiRequestTest, MalformedJsonIsA400SayingSo) {
  for (const char* body : {"{", "{\"model\": \"m\",}", "not json", "", "{\"a\": 01}"}) {
    auto e = bad(api_kind::completion, body);
    EXPECT_EQ(e.status, 400) << body;
    EXPECT_NE(e.message.find("not valid JSON"), std::string::npos) << e.message;
  }
}

TEST(OpenaiRequestTest, BodyThatIsNotAnObjectIsRejected) {
  auto e = bad(api_kind::chat, "[1, 2]");
  EXPECT_EQ(e.status, 400);
  EXPECT_NE(e.message.find("must be a JSON object, got an array"), std::string::npos) << e.message;
}

TEST(OpenaiRequestTest, MissingRequiredFieldsAreNamed) {
  expect_400(bad(api_kind::completion, R"({"prompt": "x"})"), "model", {"model is required"});
  expect_400(bad(api_kind::completion, R"({"model": "m"})"), "prompt", {"prompt is required"});
  expect_400(bad(api_kind::chat, R"({"model": "m"})"), "messages", {"messages is required"});
  expect_400(bad(api_kind::chat, R"({"model": "m", "messages": []})"), "messages",
             {"must not be empty"});
  expect_400(bad(api_kind::completion, R"({"model": null, "prompt": "x"})"), "model",
             {"model is required"});
  expect_400(bad(api_kind::chat, R"({"model": "m", "messages": [{"role": "user"}]})"),
             "messages[0].content", {"messages[0].content is required"});
  expect_400(bad(api_kind::chat, R"({"model": "m", "messages": [{"content": "x"}]})"),
             "messages[0].role", {"messages[0].role is required"});
}

TEST(OpenaiRequestTest, WrongTypesNameTheFieldAndWhatCame) {
  expect_400(completion_error({{"max_tokens", "16"}}), "max_tokens",
             {"max_tokens must be an integer", "got \"16\""});
  expect_400(completion_error({{"max_tokens", 5.5}}), "max_tokens",
             {"max_tokens must be an integer", "got 5.5"});
  expect_400(completion_error({{"max_tokens", true}}), "max_tokens", {"got true"});
  expect_400(completion_error({{"temperature", "hot"}}), "temperature",
             {"temperature must be a number in [0, 2]", "got \"hot\""});
  expect_400(completion_error({{"stream", "yes"}}), "stream", {"stream must be a boolean"});
  expect_400(completion_error({{"model", 7}}), "model", {"model must be a string", "got 7"});
  expect_400(completion_error({{"prompt", {{"x", 1}}}}), "prompt", {"prompt must be a string"});
  expect_400(completion_error({{"prompt", 42}}), "prompt", {"prompt must be a string", "got 42"});
  expect_400(completion_error({{"stop", 3}}), "stop", {"stop must be a string or an array"});
  expect_400(completion_error({{"stop", {"a", 1}}}), "stop[1]", {"stop[1] must be a string"});
  expect_400(completion_error({{"logprobs", true}}), "logprobs",
             {"logprobs must be an integer"});
  expect_400(chat_error({{"logprobs", 2}}), "logprobs", {"logprobs must be a boolean"});
  expect_400(chat_error({{"messages", "hi"}}), "messages", {"messages must be an array"});
  expect_400(chat_error({{"messages", {"hi"}}}), "messages[0]",
             {"messages[0] must be an object"});
  expect_400(chat_error({{"messages", {{{"role", "user"}, {"content", 5}}}}}),
             "messages[0].content", {"must be a string or an array of text parts"});
  expect_400(completion_error({{"stream", true}, {"stream_options", 1}}), "stream_options",
             {"must be an object"});
  expect_400(completion_error({{"user", 12}}), "user", {"user must be a string"});
}

TEST(OpenaiRequestTest, NegativeOrHugeMaxTokensIsRejected) {
  expect_400(completion_error({{"max_tokens", -5}}), "max_tokens",
             {"max_tokens must be an integer >= 1, got -5"});
  expect_400(completion_error({{"max_tokens", 0}}), "max_tokens", {">= 1", "got 0"});
  expect_400(completion_error({{"max_tokens", 1LL << 40}}), "max_tokens",
             {"max_tokens must be an integer <= 1048576", "got 1099511627776"});
  expect_400(completion_error({{"max_tokens", 1e300}}), "max_tokens", {"max_tokens"});
  expect_400(chat_error({{"max_completion_tokens", -1}}), "max_completion_tokens",
             {"max_completion_tokens must be an integer >= 1"});
  api_limits small;
  small.max_tokens_limit = 100;
  auto e = bad(api_kind::completion, R"({"model":"m","prompt":"x","max_tokens":101})", small);
  expect_400(e, "max_tokens", {"<= 100", "got 101"});
}

TEST(OpenaiRequestTest, OutOfRangeSamplingValuesAreRejected) {
  expect_400(completion_error({{"temperature", 2.5}}), "temperature", {"got 2.5"});
  expect_400(completion_error({{"temperature", -0.1}}), "temperature", {"[0, 2]"});
  expect_400(completion_error({{"top_p", 0}}), "top_p", {"top_p must be a number in (0, 1]"});
  expect_400(completion_error({{"top_p", 1.5}}), "top_p", {"(0, 1]"});
  expect_400(completion_error({{"top_k", -2}}), "top_k", {"top_k must be an integer >= -1"});
  expect_400(completion_error({{"min_p", 2}}), "min_p", {"[0, 1]"});
  expect_400(completion_error({{"presence_penalty", 3}}), "presence_penalty", {"[-2, 2]"});
  expect_400(completion_error({{"frequency_penalty", -3}}), "frequency_penalty", {"[-2, 2]"});
  expect_400(completion_error({{"repetition_penalty", 0}}), "repetition_penalty", {"(0, 100]"});
  expect_400(completion_error({{"n", 0}}), "n", {"n must be an integer >= 1"});
  expect_400(completion_error({{"n", 17}}), "n", {"n must be an integer <= 16"});
  expect_400(completion_error({{"logprobs", 21}}), "logprobs", {"<= 20"});
  expect_400(chat_error({{"logprobs", true}, {"top_logprobs", 21}}), "top_logprobs", {"<= 20"});
  expect_400(completion_error({{"min_tokens", 20}, {"max_tokens", 10}}), "min_tokens",
             {"min_tokens must be <= max_tokens (10), got 20"});
  expect_400(completion_error({{"min_tokens", -1}}), "min_tokens", {">= 0"});
  expect_400(completion_error({{"seed", 1.5}}), "seed", {"seed must be an integer"});
  expect_400(completion_error({{"stop_token_ids", {-1}}}), "stop_token_ids[0]", {">= 0"});
}

TEST(OpenaiRequestTest, StopStringsAreBounded) {
  json many = json::array();
  for (int i = 0; i < 17; ++i)
    many.push_back("s");
  expect_400(completion_error({{"stop", many}}), "stop", {"at most 16 strings, got 17"});
  expect_400(completion_error({{"stop", {""}}}), "stop", {"stop[0] must not be empty"});
  expect_400(completion_error({{"stop", std::string(257, 'x')}}), "stop",
             {"257 bytes", "limit of 256"});
}

TEST(OpenaiRequestTest, TopLogprobsWithoutLogprobsIsRejected) {
  expect_400(chat_error({{"top_logprobs", 2}}), "top_logprobs",
             {"top_logprobs requires logprobs to be true"});
}

TEST(OpenaiRequestTest, StreamOptionsWithoutStreamIsRejected) {
  expect_400(completion_error({{"stream_options", {{"include_usage", true}}}}), "stream_options",
             {"only allowed when stream is true"});
  expect_400(completion_error({{"stream", true}, {"stream_options", {{"include_usage", 1}}}}),
             "stream_options.include_usage", {"must be a boolean"});
}

TEST(OpenaiRequestTest, BadRolesAndPartsAreNamed) {
  expect_400(chat_error({{"messages", {{{"role", "wizard"}, {"content", "x"}}}}}),
             "messages[0].role", {"one of system, user, assistant, tool", "\"wizard\""});
  json image = {{{"role", "user"},
                 {"content", {{{"type", "image_url"}, {"image_url", {{"url", "http://x"}}}}}}}};
  expect_400(chat_error({{"messages", image}}), "messages[0].content[0].type",
             {"\"image_url\" is not supported", "only \"text\" parts"});
  json no_text = {{{"role", "user"}, {"content", {{{"type", "text"}}}}}};
  expect_400(chat_error({{"messages", no_text}}), "messages[0].content[0].text",
             {"is required"});
  json tool_calls = {{{"role", "user"}, {"content", "x"}},
                     {{"role", "assistant"}, {"tool_calls", {{{"id", "1"}}}}}};
  expect_400(chat_error({{"messages", tool_calls}}), "messages[1].tool_calls[0].function",
             {"must be an object"});
}

TEST(OpenaiRequestTest, BatchPromptsAndEmptyTokenArraysAreRejected) {
  expect_400(completion_error({{"prompt", {"a", "b"}}}), "prompt", {"batch of 2 prompts"});
  expect_400(completion_error({{"prompt", {{1}, {2}}}}), "prompt", {"batch of 2"});
  expect_400(completion_error({{"prompt", json::array()}}), "prompt", {"must not be an empty"});
  expect_400(completion_error({{"prompt", {1, -3}}}), "prompt[1]", {">= 0", "got -3"});
  expect_400(completion_error({{"prompt", {1, 1LL << 33}}}), "prompt[1]", {"<= 2147483647"});
}

TEST(OpenaiRequestTest, UnsupportedFeaturesAreRejectedNotIgnored) {
  expect_400(completion_error({{"echo", true}}), "echo", {"echo is not supported"});
  EXPECT_FALSE(completion({{"echo", false}}).stream);
  expect_400(completion_error({{"suffix", "end"}}), "suffix", {"not supported"});
  expect_400(completion_error({{"best_of", 3}}), "best_of", {"best_of"});
  EXPECT_EQ(completion({{"best_of", 2}, {"n", 2}}).n, 2);
  expect_400(completion_error({{"logit_bias", {{"50256", -100}}}}), "logit_bias",
             {"not supported"});
  // tools are served (tool_calls_test); a malformed one names its field.
  expect_400(chat_error({{"tools", {{{"type", "function"}}}}}), "tools[0].function",
             {"must be an object"});
  // response_format is served (constrained decoding); a schema keyword the
  // compiler does not take is a 400 naming it.
  EXPECT_EQ(chat({{"response_format", {{"type", "json_object"}}}}).params.structured_output.kind,
            tessera::engine::structured_output_params::kind_type::json_object);
  expect_400(chat_error({{"response_format",
                          {{"type", "json_schema"},
                           {"json_schema",
                            {{"name", "n"}, {"schema", {{"type", "integer"}, {"minimum", 3}}}}}}}}),
             "response_format.json_schema.schema", {"minimum"});
  EXPECT_EQ(chat({{"response_format", {{"type", "text"}}}, {"tools", json::array()}}).n, 1);
}

TEST(OpenaiRequestTest, OverLongPromptIsRejected) {
  api_limits lim;
  lim.max_prompt_bytes = 1000;
  json body = {{"model", "m"}, {"prompt", std::string(1001, 'a')}};
  auto e = bad(api_kind::completion, body.dump(), lim);
  expect_400(e, "prompt", {"1001 bytes", "limit of 1000"});

  json msgs = json::array();
  for (int i = 0; i < 3; ++i)
    msgs.push_back({{"role", "user"}, {"content", std::string(400, 'b')}});
  json chat_body = {{"model", "m"}, {"messages", msgs}};
  expect_400(bad(api_kind::chat, chat_body.dump(), lim), "messages",
             {"more than 1000 bytes"});

  lim.max_prompt_token_ids = 3;
  json ids = {{"model", "m"}, {"prompt", {1, 2, 3, 4}}};
  expect_400(bad(api_kind::completion, ids.dump(), lim), "prompt", {"4 token ids", "limit of 3"});

  lim.max_messages = 2;
  expect_400(bad(api_kind::chat, chat_body.dump(), lim), "messages", {"3 entries", "limit of 2"});
}

TEST(OpenaiRequestTest, InvalidUtf8IsRejectedWithItsOffset) {
  std::string body = "{\"model\": \"m\", \"prompt\": \"ab\xff\xfe\"}";
  auto e = bad(api_kind::completion, body);
  EXPECT_EQ(e.status, 400);
  EXPECT_NE(e.message.find("not valid UTF-8"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("0xFF at offset 28"), std::string::npos) << e.message;
  // An encoded surrogate (CESU-8) and an overlong encoding are not UTF-8.
  EXPECT_EQ(bad(api_kind::completion, "{\"model\": \"\xed\xa0\x80\", \"prompt\": \"x\"}").status, 400);
  EXPECT_EQ(bad(api_kind::completion, "{\"model\": \"m\", \"prompt\": \"\xc0\xaf\"}").status, 400);
  // A lone surrogate escape decodes to no valid UTF-8 either.
  auto esc = bad(api_kind::completion, R"({"model": "m", "prompt": "\ud800"})");
  EXPECT_EQ(esc.status, 400);
  EXPECT_NE(esc.message.find("surrogate"), std::string::npos) << esc.message;
  // Valid multi-byte text and escapes pass.
  EXPECT_EQ(completion({{"prompt", "caf\xc3\xa9 \xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\x98\x80"}}).prompt_text,
            "caf\xc3\xa9 \xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\x98\x80");
  EXPECT_EQ(ok(api_kind::completion, R"({"model": "m", "prompt": "\ud83d\ude00"})").prompt_text,
            "\xf0\x9f\x98\x80");
}

TEST(OpenaiRequestTest, TenMegabyteBodyIsRejectedBeforeParsing) {
  // Not even JSON: the size check comes first, so the parser never runs.
  std::string body(10u << 20, '[');
  auto e = bad(api_kind::completion, body);
  EXPECT_EQ(e.status, 413);
  EXPECT_EQ(e.code, "body_too_large");
  EXPECT_NE(e.message.find("10485760 bytes"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("limit of 4194304"), std::string::npos) << e.message;
}

TEST(OpenaiRequestTest, DeeplyNestedJsonIsRejected) {
  std::string body = R"({"model": "m", "prompt": "x", "extra": )" + std::string(100, '[')
                     + std::string(100, ']') + "}";
  auto e = bad(api_kind::completion, body);
  EXPECT_EQ(e.status, 400);
  EXPECT_NE(e.message.find("deeper than 64"), std::string::npos) << e.message;
  // Brackets inside strings do not count.
  json ok_body = {{"model", "m"}, {"prompt", std::string(100, '[')}};
  EXPECT_EQ(ok(api_kind::completion, ok_body.dump()).prompt_text, std::string(100, '['));
}

TEST(OpenaiRequestTest, ErrorMessagesAreValidUtf8EvenForOddValues) {
  json body = {{"model", "m"}, {"prompt", "x"}, {"max_tokens", std::string(200, 'z') + "\xc3\xa9"}};
  auto e = bad(api_kind::completion, body.dump());
  EXPECT_EQ(e.param, "max_tokens");
  EXPECT_LT(e.message.size(), 200u); // the value is cut
  EXPECT_NO_THROW((void)json(e.message).dump());
}

TEST(OpenaiRequestTest, MutatedBodiesGiveAnAnswerNeverAnException) {
  const std::string seed_body =
    R"({"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":)"
    R"([{"type":"text","text":"hi"}]}],"max_tokens":8,"temperature":0.5,"stop":["a","b"],)"
    R"("logprobs":true,"top_logprobs":2,"stream":true,"stream_options":{"include_usage":true},)"
    R"("seed":-3,"n":2,"prompt":[1,2,[3]]})";
  std::mt19937 rng(7);
  const std::string alphabet = "{}[]\",:0123456789-.eE truefalsn\\u\x80\xff";
  int accepted = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string body = seed_body;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < edits; ++k) {
      size_t at = rng() % body.size();
      switch (rng() % 3) {
        case 0: body[at] = alphabet[rng() % alphabet.size()]; break;
        case 1: body.erase(at, 1 + rng() % 8); break;
        default: body.insert(at, 1, alphabet[rng() % alphabet.size()]); break;
      }
      if (body.empty())
        body.push_back('{');
    }
    for (auto kind : {api_kind::chat, api_kind::completion}) {
      api_result<api_request> r;
      ASSERT_NO_THROW(r = parse_request(kind, body)) << body;
      if (std::holds_alternative<api_request>(r))
        ++accepted;
      else
        EXPECT_FALSE(std::get<api_error>(r).message.empty()) << body;
    }
  }
  EXPECT_GT(accepted, 0) << "some mutations (inside strings) must still parse";
}

// ---- apply_context_limit ------------------------------------------------------

TEST(OpenaiRequestTest, ChatWithoutMaxTokensGetsTheRestOfTheContext) {
  auto r = chat();
  EXPECT_FALSE(apply_context_limit(r, 100, 4096));
  EXPECT_EQ(r.params.max_tokens, 3996);
}

TEST(OpenaiRequestTest, PromptFillingTheContextIsRejected) {
  auto r = chat();
  auto e = apply_context_limit(r, 4096, 4096);
  ASSERT_TRUE(e);
  expect_400(*e, "messages", {"maximum context length is 4096 tokens", "4096 tokens"});
}

TEST(OpenaiRequestTest, PromptPlusMaxTokensOverTheContextIsRejected) {
  auto r = completion({{"max_tokens", 100}});
  auto e = apply_context_limit(r, 4000, 4096);
  ASSERT_TRUE(e);
  expect_400(*e, "prompt", {"maximum context length is 4096", "you requested 4100 tokens",
                            "4000 in the prompt", "100 in the completion"});
  auto fits = completion({{"max_tokens", 96}});
  EXPECT_FALSE(apply_context_limit(fits, 4000, 4096));
  EXPECT_EQ(fits.params.max_tokens, 96);
}

TEST(OpenaiRequestTest, MinTokensBeyondTheRoomLeftIsRejected) {
  auto r = chat({{"min_tokens", 50}});
  auto e = apply_context_limit(r, 4060, 4096);
  ASSERT_TRUE(e);
  expect_400(*e, "min_tokens", {"min_tokens (50)", "36 tokens left"});
}

TEST(OpenaiRequestTest, EmptyPromptIsRejected) {
  auto r = completion();
  auto e = apply_context_limit(r, 0, 4096);
  ASSERT_TRUE(e);
  expect_400(*e, "prompt", {"must not be empty"});
}

// ---- bounded, faithful error texts (issue 20) --------------------------------

TEST(OpenaiRequestTest, NumbersInErrorsAreQuotedAsTheClientWroteThem) {
  auto raw = [](const std::string& field, const std::string& text) {
    return bad(api_kind::completion, R"({"model":"m","prompt":"x",")" + field + "\":" + text + "}");
  };
  // 1e-300 is in (0, 1] as a double but 0 as the engine's float.
  expect_400(raw("top_p", "1e-300"), "top_p", {"got 1e-300", "(0 as a 32-bit float)"});
  expect_400(raw("temperature", "2.50"), "temperature", {"got 2.50"});
  expect_400(raw("temperature", "1E1"), "temperature", {"got 1E1"});
  expect_400(raw("max_tokens", "99999999999999999999999"), "max_tokens", {"got 99999999999999999999999"});
  expect_400(raw("max_tokens", "1.5"), "max_tokens", {"got 1.5"});
  expect_400(bad(api_kind::completion, R"({"model":"m","prompt":"x","stop_token_ids":[1, 2, 3.25]})"),
             "stop_token_ids[2]", {"got 3.25"});
  expect_400(raw("user", "0.10"), "user", {"got 0.10"});
}

TEST(OpenaiRequestTest, ErrorsQuoteAtMostTwoHundredBytesOfTheInput) {
  // A 3 MB number: nlohmann's overflow error quotes the whole token.
  const std::string digits(3 << 20, '7');
  auto e = bad(api_kind::completion, R"({"model":"m","prompt":"x","max_tokens":)" + digits + "}");
  EXPECT_EQ(e.status, 400);
  EXPECT_LT(e.message.size(), 400u) << e.message.substr(0, 400);
  EXPECT_NE(e.message.find("not valid JSON"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("bytes)"), std::string::npos) << e.message;
  // A 3 MB number that parses (1.5 and 3 M zeros), where an integer goes.
  const std::string long_half = "1.5" + std::string(3 << 20, '0');
  e = bad(api_kind::completion, R"({"model":"m","prompt":"x","n":)" + long_half + "}");
  EXPECT_EQ(e.param, "n");
  EXPECT_LT(e.message.size(), 400u) << e.message.substr(0, 400);
  EXPECT_NE(e.message.find("got 1.5000"), std::string::npos) << e.message;
  // A 3 MB malformed literal.
  e = bad(api_kind::completion, R"({"model":"m","prompt":"x","n":)" + std::string(3 << 20, 't') + "}");
  EXPECT_LT(e.message.size(), 400u) << e.message.substr(0, 400);
  // Cutting never splits a UTF-8 character.
  const std::string euros = [] {
    std::string s;
    for (int i = 0; i < 100; ++i)
      s += "\xe2\x82\xac"; // U+20AC, 3 bytes
    return s;
  }();
  const auto q = quote_input(euros);
  EXPECT_LE(q.size(), max_quoted_bytes + 20);
  EXPECT_EQ(q.substr(0, 198), euros.substr(0, 198)) << "66 whole characters";
  EXPECT_EQ(q.substr(198), "... (300 bytes)");
  EXPECT_EQ(quote_input("short"), "short");
  EXPECT_LT(unknown_model(std::string(1 << 20, 'm')).message.size(), 300u);
}

} // namespace
