#include "actors/frontend/openai_response.hpp"

#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace {

using namespace tessera::actors::frontend;
using tessera::engine::finish_reason;
using tessera::engine::request_output;
using tessera::engine::sampled_token;
using json = nlohmann::json;

/// Token bytes of a toy vocabulary: id 1 "Hel", 2 "lo", 3 " wor", 4 "ld",
/// 5 the first two bytes of "é" (a partial character), 6 its last byte.
std::string toy_bytes(int32_t id) {
  switch (id) {
    case 1: return "Hel";
    case 2: return "lo";
    case 3: return " wor";
    case 4: return "ld";
    case 5: return "\xc3";
    case 6: return "\xa9";
    default: return std::string{"<"}.append(std::to_string(id)).append(">");
  }
}

response_meta meta() { return {"cmpl-abc", 1700000000, "tessera-demo"}; }

request_output out(std::vector<int32_t> tokens, std::string text,
                   finish_reason finish = finish_reason::none, std::string stop = {},
                   std::vector<sampled_token> lps = {}) {
  request_output o;
  o.tokens = std::move(tokens);
  o.text = std::move(text);
  o.finish = finish;
  o.stop_reason = std::move(stop);
  o.logprobs = std::move(lps);
  return o;
}

sampled_token tok(int32_t id, float lp, std::vector<std::pair<int32_t, float>> top = {}) {
  sampled_token t;
  t.token = id;
  t.logprob = lp;
  for (auto [i, l] : top)
    t.top_logprobs.push_back({i, l});
  return t;
}

/// The JSON of one SSE frame "data: {...}\n\n".
json sse_json(const std::string& frame) {
  EXPECT_TRUE(frame.starts_with("data: ")) << frame;
  EXPECT_TRUE(frame.ends_with("\n\n")) << frame;
  auto body = frame.substr(6, frame.size() - 8);
  EXPECT_EQ(body.find('\n'), std::string::npos) << "a raw newline breaks SSE framing";
  return json::parse(body);
}

void expect_usage(const json& u, int prompt, int completion) {
  ASSERT_TRUE(u.is_object()) << u;
  EXPECT_EQ(u["prompt_tokens"], prompt);
  EXPECT_EQ(u["completion_tokens"], completion);
  EXPECT_EQ(u["total_tokens"], prompt + completion);
}

TEST(OpenaiResponseTest, ChoiceOutputAccumulatesEngineChunks) {
  choice_output c;
  c.index = 1;
  auto d1 = c.append(out({1, 2}, "Hello"));
  EXPECT_EQ(d1.index, 1);
  EXPECT_EQ(d1.text, "Hello");
  EXPECT_EQ(d1.text_offset, 0);
  auto d2 = c.append(out({3}, " w\xc3\xa9"));
  EXPECT_EQ(d2.text_offset, 5);
  auto d3 = c.append(out({4}, "", finish_reason::stop, "\n"));
  EXPECT_EQ(d3.text_offset, 8); // code points, not bytes
  EXPECT_EQ(d3.finish, finish_reason::stop);
  EXPECT_EQ(c.text, "Hello w\xc3\xa9");
  EXPECT_EQ(c.token_ids, (std::vector<int32_t>{1, 2, 3, 4}));
  EXPECT_EQ(c.finish, finish_reason::stop);
  EXPECT_EQ(c.stop_reason, "\n");
  std::vector<choice_output> all{c, c};
  auto u = make_usage(7, all);
  EXPECT_EQ(u.prompt_tokens, 7);
  EXPECT_EQ(u.completion_tokens, 8);
}

TEST(OpenaiResponseTest, CompletionResponseHasOpenAIShape) {
  choice_output c;
  c.append(out({1, 2, 3, 4}, "Hello world", finish_reason::length));
  std::vector<choice_output> choices{c};
  response_options opts;
  auto j = json::parse(completion_response(meta(), choices, make_usage(5, choices), opts));
  EXPECT_EQ(j["id"], "cmpl-abc");
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["created"], 1700000000);
  EXPECT_EQ(j["model"], "tessera-demo");
  ASSERT_TRUE(j["choices"].is_array());
  ASSERT_EQ(j["choices"].size(), 1u);
  const auto& ch = j["choices"][0];
  EXPECT_EQ(ch["index"], 0);
  EXPECT_EQ(ch["text"], "Hello world");
  EXPECT_TRUE(ch["logprobs"].is_null());
  EXPECT_EQ(ch["finish_reason"], "length");
  EXPECT_TRUE(ch["stop_reason"].is_null());
  expect_usage(j["usage"], 5, 4);
  EXPECT_FALSE(j["usage"].contains("prompt_tokens_details"));
}

TEST(OpenaiResponseTest, CompletionLogprobsHaveTokensOffsetsAndAlternatives) {
  choice_output c;
  c.append(out({1, 2}, "Hello", finish_reason::none, {},
               {tok(1, -0.5f, {{1, -0.5f}, {7, -1.25f}}), tok(2, -0.1f, {{9, -0.05f}})}));
  c.append(out({5, 6}, "\xc3\xa9", finish_reason::stop, {},
               {tok(5, -2.0f), tok(6, -0.25f)}));
  std::vector<choice_output> choices{c};
  response_options opts;
  opts.logprobs = true;
  opts.token_bytes = toy_bytes;
  auto j = json::parse(completion_response(meta(), choices, make_usage(3, choices), opts));
  const auto& lp = j["choices"][0]["logprobs"];
  ASSERT_TRUE(lp.is_object()) << lp;
  EXPECT_EQ(lp["tokens"], json({"Hel", "lo", "\xef\xbf\xbd", "\xef\xbf\xbd"}));
  EXPECT_EQ(lp["token_logprobs"], json({-0.5, -0.1, -2.0, -0.25}));
  ASSERT_EQ(lp["top_logprobs"].size(), 4u);
  EXPECT_EQ(lp["top_logprobs"][0], json({{"Hel", -0.5}, {"<7>", -1.25}}));
  // The chosen token is there even when it is not among the top ones.
  EXPECT_EQ(lp["top_logprobs"][1], json({{"<9>", -0.05}, {"lo", -0.1}}));
  EXPECT_EQ(lp["top_logprobs"][2], json({{"\xef\xbf\xbd", -2.0}}));
  EXPECT_EQ(lp["text_offset"], json({0, 3, 5, 6}));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
}

TEST(OpenaiResponseTest, ChatResponseHasOpenAIShape) {
  choice_output a;
  a.append(out({1, 2}, "Hello", finish_reason::stop, "</s>"));
  choice_output b;
  b.index = 1;
  b.append(out({3}, " wor", finish_reason::length));
  std::vector<choice_output> choices{a, b};
  auto usage = make_usage(9, choices);
  usage.cached_tokens = 8;
  auto j = json::parse(chat_response({"chatcmpl-1", 42, "m"}, choices, usage, {}));
  EXPECT_EQ(j["id"], "chatcmpl-1");
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["created"], 42);
  EXPECT_EQ(j["model"], "m");
  ASSERT_EQ(j["choices"].size(), 2u);
  const auto& c0 = j["choices"][0];
  EXPECT_EQ(c0["index"], 0);
  EXPECT_EQ(c0["message"]["role"], "assistant");
  EXPECT_EQ(c0["message"]["content"], "Hello");
  EXPECT_TRUE(c0["logprobs"].is_null());
  EXPECT_EQ(c0["finish_reason"], "stop");
  EXPECT_EQ(c0["stop_reason"], "</s>");
  EXPECT_EQ(j["choices"][1]["index"], 1);
  EXPECT_EQ(j["choices"][1]["finish_reason"], "length");
  expect_usage(j["usage"], 9, 3);
  EXPECT_EQ(j["usage"]["prompt_tokens_details"]["cached_tokens"], 8);
}

// vLLM's stop_reason: the stop string, the stop token id as a number, null
// for EOS and length (so a stop string "1" and token 1 differ).
TEST(OpenaiResponseTest, StopReasonIsStringTokenIdOrNull) {
  auto reason_of = [](request_output o) {
    choice_output c;
    c.append(o);
    std::vector<choice_output> choices{c};
    auto j = json::parse(chat_response(meta(), choices, make_usage(3, choices), {}));
    return j["choices"][0]["stop_reason"];
  };
  EXPECT_EQ(reason_of(out({1}, "a", finish_reason::stop, "1")), "1");
  auto by_token = out({1}, "a", finish_reason::stop);
  by_token.stop_token = 1;
  EXPECT_EQ(reason_of(by_token), 1);
  EXPECT_TRUE(reason_of(out({2}, "a", finish_reason::stop)).is_null()); // EOS
  EXPECT_TRUE(reason_of(out({2}, "a", finish_reason::length)).is_null());
}

TEST(OpenaiResponseTest, ChatLogprobsListTokensWithBytesAndAlternatives) {
  choice_output c;
  c.append(out({1, 5}, "Hel", finish_reason::stop, {},
               {tok(1, -0.5f, {{1, -0.5f}, {2, -1.5f}}), tok(5, -0.75f)}));
  std::vector<choice_output> choices{c};
  response_options opts;
  opts.logprobs = true;
  opts.token_bytes = toy_bytes;
  auto j = json::parse(chat_response(meta(), choices, make_usage(1, choices), opts));
  const auto& content = j["choices"][0]["logprobs"]["content"];
  ASSERT_TRUE(content.is_array());
  ASSERT_EQ(content.size(), 2u);
  EXPECT_EQ(content[0]["token"], "Hel");
  EXPECT_EQ(content[0]["logprob"], -0.5);
  EXPECT_EQ(content[0]["bytes"], json({72, 101, 108}));
  ASSERT_EQ(content[0]["top_logprobs"].size(), 2u);
  EXPECT_EQ(content[0]["top_logprobs"][1]["token"], "lo");
  EXPECT_EQ(content[0]["top_logprobs"][1]["logprob"], -1.5);
  EXPECT_EQ(content[0]["top_logprobs"][1]["bytes"], json({108, 111}));
  // A partial character: replacement character as text, the real byte in bytes.
  EXPECT_EQ(content[1]["token"], "\xef\xbf\xbd");
  EXPECT_EQ(content[1]["bytes"], json({0xc3}));
  EXPECT_TRUE(content[1]["top_logprobs"].is_array());
  EXPECT_TRUE(content[1]["top_logprobs"].empty());
}

TEST(OpenaiResponseTest, LogprobsAreShortestDecimalsAndNeverInfinite) {
  choice_output c;
  c.append(out({1, 2}, "Hello", finish_reason::stop, {},
               {tok(1, -0.1f), tok(2, -std::numeric_limits<float>::infinity())}));
  std::vector<choice_output> choices{c};
  response_options opts;
  opts.logprobs = true;
  opts.token_bytes = toy_bytes;
  auto text = chat_response(meta(), choices, make_usage(1, choices), opts);
  EXPECT_NE(text.find("\"logprob\":-0.1,"), std::string::npos) << text;
  auto j = json::parse(text);
  EXPECT_EQ(j["choices"][0]["logprobs"]["content"][1]["logprob"], -9999.0);
}

TEST(OpenaiResponseTest, CompletionStreamChunksAreSseFrames) {
  response_options opts;
  choice_output c;
  auto f1 = completion_chunk(meta(), c.append(out({1, 2}, "Hello")), opts);
  auto j1 = sse_json(f1);
  EXPECT_EQ(j1["object"], "text_completion");
  EXPECT_EQ(j1["id"], "cmpl-abc");
  EXPECT_EQ(j1["choices"][0]["text"], "Hello");
  EXPECT_TRUE(j1["choices"][0]["finish_reason"].is_null());
  EXPECT_FALSE(j1.contains("usage"));
  auto j2 = sse_json(completion_chunk(meta(), c.append(out({3}, " wor", finish_reason::length)), opts));
  EXPECT_EQ(j2["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(done_event(), "data: [DONE]\n\n");
}

TEST(OpenaiResponseTest, StreamedCompletionLogprobOffsetsContinueAcrossChunks) {
  response_options opts;
  opts.logprobs = true;
  opts.token_bytes = toy_bytes;
  choice_output c;
  (void)c.append(out({1, 2}, "Hello", finish_reason::none, {}, {tok(1, -1), tok(2, -1)}));
  auto j = sse_json(completion_chunk(
    meta(), c.append(out({3, 4}, " world", finish_reason::none, {}, {tok(3, -1), tok(4, -1)})),
    opts));
  EXPECT_EQ(j["choices"][0]["logprobs"]["text_offset"], json({5, 9}));
  EXPECT_EQ(j["choices"][0]["logprobs"]["tokens"], json({" wor", "ld"}));
}

TEST(OpenaiResponseTest, ChatStreamStartsWithRoleThenContentThenFinish) {
  response_options opts;
  auto role = sse_json(chat_role_chunk(meta(), 0, opts));
  EXPECT_EQ(role["object"], "chat.completion.chunk");
  EXPECT_EQ(role["choices"][0]["index"], 0);
  EXPECT_EQ(role["choices"][0]["delta"], json({{"role", "assistant"}, {"content", ""}}));
  EXPECT_TRUE(role["choices"][0]["finish_reason"].is_null());

  choice_output c;
  auto mid = sse_json(chat_chunk(meta(), c.append(out({1, 2}, "Hello")), opts));
  EXPECT_EQ(mid["choices"][0]["delta"], json({{"content", "Hello"}}));
  EXPECT_TRUE(mid["choices"][0]["finish_reason"].is_null());
  EXPECT_TRUE(mid["choices"][0]["logprobs"].is_null());

  auto last = sse_json(chat_chunk(meta(), c.append(out({4}, "", finish_reason::stop)), opts));
  EXPECT_TRUE(last["choices"][0]["delta"].is_object());
  EXPECT_TRUE(last["choices"][0]["delta"].empty());
  EXPECT_EQ(last["choices"][0]["finish_reason"], "stop");

  auto with_text =
    sse_json(chat_chunk(meta(), choice_output{}.append(out({4}, "!", finish_reason::length)), opts));
  EXPECT_EQ(with_text["choices"][0]["delta"], json({{"content", "!"}}));
  EXPECT_EQ(with_text["choices"][0]["finish_reason"], "length");
}

TEST(OpenaiResponseTest, StreamedChatLogprobsCoverTheChunksTokens) {
  response_options opts;
  opts.logprobs = true;
  opts.token_bytes = toy_bytes;
  choice_output c;
  auto j = sse_json(chat_chunk(meta(), c.append(out({2}, "lo", finish_reason::none, {},
                                                    {tok(2, -0.5f, {{2, -0.5f}})})),
                               opts));
  const auto& content = j["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 1u);
  EXPECT_EQ(content[0]["token"], "lo");
  EXPECT_EQ(content[0]["top_logprobs"][0]["token"], "lo");
}

TEST(OpenaiResponseTest, IncludeUsageAddsNullUsageToChunksAndAFinalUsageChunk) {
  response_options opts;
  opts.include_usage = true;
  choice_output c;
  auto j = sse_json(chat_chunk(meta(), c.append(out({1}, "Hel")), opts));
  ASSERT_TRUE(j.contains("usage"));
  EXPECT_TRUE(j["usage"].is_null());
  EXPECT_TRUE(sse_json(chat_role_chunk(meta(), 0, opts))["usage"].is_null());
  EXPECT_TRUE(sse_json(completion_chunk(meta(), c.append(out({2}, "lo")), opts))["usage"].is_null());

  std::vector<choice_output> choices{c};
  auto u = sse_json(usage_chunk(meta(), api_kind::chat, make_usage(4, choices)));
  EXPECT_EQ(u["object"], "chat.completion.chunk");
  EXPECT_TRUE(u["choices"].is_array());
  EXPECT_TRUE(u["choices"].empty());
  expect_usage(u["usage"], 4, 2);
  EXPECT_EQ(sse_json(usage_chunk(meta(), api_kind::completion, {}))["object"], "text_completion");
}

TEST(OpenaiResponseTest, TextWithControlCharactersAndBadBytesStaysOneSseLine) {
  choice_output c;
  auto frame = chat_chunk(meta(), c.append(out({1}, "line1\nline2\r\n\"q\" \xff")), {});
  auto j = sse_json(frame);
  EXPECT_EQ(j["choices"][0]["delta"]["content"], "line1\nline2\r\n\"q\" \xef\xbf\xbd");
}

TEST(OpenaiResponseTest, OneModelIsAnEntryOfTheList) {
  model_card card{"llama", 1700000000, "tessera", 8192};
  auto one = json::parse(model_response(card));
  EXPECT_EQ(one, json::parse(models_response(std::span{&card, 1}))["data"][0]);
  EXPECT_EQ(one["id"], "llama");
  EXPECT_EQ(one["object"], "model");
}

TEST(OpenaiResponseTest, ModelsListHasOpenAIShape) {
  std::vector<model_card> models{{"llama", 1700000000, "tessera", 8192}, {"demo", 5}};
  auto j = json::parse(models_response(models));
  EXPECT_EQ(j["object"], "list");
  ASSERT_EQ(j["data"].size(), 2u);
  EXPECT_EQ(j["data"][0]["id"], "llama");
  EXPECT_EQ(j["data"][0]["object"], "model");
  EXPECT_EQ(j["data"][0]["created"], 1700000000);
  EXPECT_EQ(j["data"][0]["owned_by"], "tessera");
  EXPECT_EQ(j["data"][0]["max_model_len"], 8192);
  EXPECT_EQ(j["data"][1]["owned_by"], "tessera");
  EXPECT_FALSE(j["data"][1].contains("max_model_len"));
  EXPECT_EQ(json::parse(models_response({}))["data"], json::array());
}

TEST(OpenaiResponseTest, ErrorBodyHasOpenAIShape) {
  auto e = bad_request("max_tokens must be an integer >= 1, got -5", "max_tokens");
  auto j = json::parse(error_body(e));
  ASSERT_TRUE(j["error"].is_object());
  EXPECT_EQ(j["error"]["message"], "max_tokens must be an integer >= 1, got -5");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "max_tokens");
  EXPECT_TRUE(j["error"]["code"].is_null());
  auto none = json::parse(error_body(bad_request("x")));
  EXPECT_TRUE(none["error"]["param"].is_null());
  auto ev = sse_json(error_event(e));
  EXPECT_EQ(ev["error"]["param"], "max_tokens");
}

TEST(OpenaiResponseTest, ErrorHelpersCarryTheirStatus) {
  auto nf = unknown_model("gpt-9");
  EXPECT_EQ(nf.status, 404);
  EXPECT_EQ(nf.code, "model_not_found");
  EXPECT_NE(nf.message.find("gpt-9"), std::string::npos);
  auto j = json::parse(error_body(nf));
  EXPECT_EQ(j["error"]["code"], "model_not_found");
  EXPECT_EQ(j["error"]["param"], "model");

  auto q = queue_full("1000 requests waiting");
  EXPECT_EQ(q.status, 429);
  EXPECT_EQ(q.code, "queue_full");
  EXPECT_NE(q.message.find("1000 requests waiting"), std::string::npos);

  auto w = no_worker();
  EXPECT_EQ(w.status, 503);
  EXPECT_EQ(w.code, "no_worker");

  EXPECT_EQ(body_too_large(11, 10).status, 413);
  EXPECT_EQ(internal_error("boom").status, 500);
}

TEST(OpenaiResponseTest, ErrorBodyWithInvalidUtf8IsStillJson) {
  auto j = json::parse(error_body(bad_request("bad \xff byte")));
  EXPECT_EQ(j["error"]["message"], "bad \xef\xbf\xbd byte");
}

TEST(OpenaiResponseTest, ResponseIdsHaveTheirPrefixAndDifferPerInput) {
  auto a = make_response_id(api_kind::completion, 1);
  auto b = make_response_id(api_kind::completion, 2);
  auto c = make_response_id(api_kind::chat, 1);
  EXPECT_TRUE(a.starts_with("cmpl-")) << a;
  EXPECT_TRUE(c.starts_with("chatcmpl-")) << c;
  EXPECT_EQ(a.size(), 5u + 24u);
  EXPECT_NE(a, b);
  EXPECT_EQ(a, make_response_id(api_kind::completion, 1));
}

} // namespace
