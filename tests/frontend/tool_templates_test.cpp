// Tools through a real family's template: Qwen2.5's (copied from
// tokenizer_config.json, as chat_jinja_families_test has it) renders the
// request's tools, an earlier call and its result as transformers'
// apply_chat_template(messages, tools=...) does, and the call it writes
// parses back (parse_tool_reply) into the same call: a model trained on
// this template answers in the format auto reads.
#include "actors/frontend/chat_template.hpp"

#include <gtest/gtest.h>

#include "actors/frontend/openai_request.hpp"
#include "actors/frontend/tool_calls.hpp"

namespace {

using namespace tessera::actors::frontend;

// Qwen/Qwen2.5-7B-Instruct
const std::string qwen25_template = R"TPL({%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
    {%- else %}
        {{- '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\n<tool_call>\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- message.content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
)TPL";

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

} // namespace
