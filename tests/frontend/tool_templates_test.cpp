// Tools through a real family's template: Qwen2.5's (copied from
// tokenizer_config.json, in family_templates.hpp, shared with chat_jinja_families_test) renders the
// request's tools, an earlier call and its result as transformers'
// apply_chat_template(messages, tools=...) does, and the call it writes
// parses back (parse_tool_reply) into the same call: a model trained on
// this template answers in the format auto reads.
#include "actors/frontend/chat_template.hpp"

#include <gtest/gtest.h>

#include "actors/frontend/openai_request.hpp"
#include "actors/frontend/tool_calls.hpp"
#include "tests/frontend/family_templates.hpp"

namespace {

using namespace tessera::actors::frontend;
using tessera::test::llama31_template;
using tessera::test::qwen25_template;

TEST(ToolTemplatesTest, Qwen25RendersToolsCallsAndResults) {
  auto t = compile_chat_template(qwen25_template, "qwen2.5");
  ASSERT_TRUE(std::holds_alternative<chat_template>(t)) << std::get<api_error>(t).message;
  auto r = parse_request(api_kind::chat, R"({"model":"m","tools":[{"type":"function","function":
    {"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],
    "messages":[{"role":"user","content":"w?"},
    {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":
      {"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}]},
    {"role":"tool","tool_call_id":"c1","content":"cold"}]})");
  ASSERT_TRUE(std::holds_alternative<api_request>(r)) << std::get<api_error>(r).message;
  const auto& req = std::get<api_request>(r);
  auto p = render_chat_request(std::get<chat_template>(t), req, chat_special_tokens{});
  ASSERT_TRUE(std::holds_alternative<chat_prompt>(p)) << std::get<api_error>(p).message;
  const std::string call =
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>";
  EXPECT_EQ(std::get<chat_prompt>(p).text,
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.\n\n"
            "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
            "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
            "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": "
            "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}}}}\n</tools>\n\n"
            "For each function call, return a json object with function name and arguments within "
            "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, "
            "\"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n"
            "<|im_start|>user\nw?<|im_end|>\n"
            "<|im_start|>assistant\n" + call + "<|im_end|>\n"
            "<|im_start|>user\n<tool_response>\ncold\n</tool_response><|im_end|>\n"
            "<|im_start|>assistant\n");
  // What the template taught the model to write is what auto parses.
  auto back = parse_tool_reply(*req.tools, call);
  ASSERT_EQ(back.calls.size(), 1u);
  EXPECT_EQ(back.calls[0].name, "get_weather");
  EXPECT_EQ(back.calls[0].arguments, R"({"city":"Oslo"})");
  EXPECT_TRUE(back.content.empty());
}

TEST(ToolTemplatesTest, Llama31RendersToolsCallsAndResults) {
  auto t = compile_chat_template(llama31_template, "llama3.1");
  ASSERT_TRUE(std::holds_alternative<chat_template>(t)) << std::get<api_error>(t).message;
  auto r = parse_request(api_kind::chat, R"({"model":"m","tools":[{"type":"function","function":
    {"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],
    "messages":[{"role":"user","content":"w?"},
    {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":
      {"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}]},
    {"role":"tool","tool_call_id":"c1","content":"cold"}]})");
  ASSERT_TRUE(std::holds_alternative<api_request>(r)) << std::get<api_error>(r).message;
  const auto& req = std::get<api_request>(r);
  auto p = render_chat_request(std::get<chat_template>(t), req,
                               chat_special_tokens{"<|begin_of_text|>", "<|eot_id|>", false});
  ASSERT_TRUE(std::holds_alternative<chat_prompt>(p)) << std::get<api_error>(p).message;
  const auto& text = std::get<chat_prompt>(p).text;
  // Meta's format: the tools in the first user turn (indented JSON), the
  // call as {"name", "parameters"}, the result in an ipython turn.
  EXPECT_NE(text.find("Given the following functions"), std::string::npos) << text;
  EXPECT_NE(text.find("\"name\": \"get_weather\""), std::string::npos) << text;
  const std::string call = R"({"name": "get_weather", "parameters": {"city": "Oslo"}})";
  EXPECT_NE(text.find("<|start_header_id|>assistant<|end_header_id|>\n\n" + call + "<|eot_id|>"),
            std::string::npos)
    << text;
  EXPECT_NE(text.find("<|start_header_id|>ipython<|end_header_id|>\n\n"), std::string::npos) << text;
  auto back = parse_tool_reply(*req.tools, call);
  ASSERT_EQ(back.calls.size(), 1u);
  EXPECT_EQ(back.calls[0].arguments, R"({"city":"Oslo"})");
}

} // namespace
