#include "actors/frontend/chat_template.hpp"

#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/frontend/family_templates.hpp"

// The chat templates of the common model families, as their
// tokenizer_config.json files hold them, rendered by the Jinja interpreter.
// Each expected prompt is written from the family's documented prompt
// format (model cards, Meta's and Mistral's format docs), not produced by
// running the renderer.

namespace {

using namespace tessera::actors::frontend;
using json = nlohmann::ordered_json;
using tessera::test::llama31_template;
using tessera::test::qwen25_template;

chat_template compiled(const std::string& source) {
  auto r = compile_chat_template(source, "test template");
  if (auto* e = std::get_if<api_error>(&r)) {
    ADD_FAILURE() << e->message;
    return {};
  }
  return std::get<chat_template>(r);
}

std::string render(const std::string& source, const json& messages, const json& tools,
                   const chat_special_tokens& tokens, bool add_generation_prompt = true) {
  auto t = compiled(source);
  if (!t.jinja)
    return {};
  auto r = render_chat_json(t, messages, tools, tokens, add_generation_prompt);
  if (auto* e = std::get_if<api_error>(&r)) {
    ADD_FAILURE() << e->message;
    return {};
  }
  return std::get<chat_prompt>(r).text;
}

const json get_weather_tool = json::parse(R"({"type": "function", "function": {
  "name": "get_weather", "description": "Get the weather",
  "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                 "required": ["city"]}}})");

// mistralai/Mistral-7B-Instruct-v0.3
const std::string mistral_v03_template = R"TPL({%- if messages[0]["role"] == "system" %}
    {%- set system_message = messages[0]["content"] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}
{%- set user_messages = loop_messages | selectattr("role", "equalto", "user") | list %}

{#- This block checks for alternating user/assistant messages, skipping tool calling messages #}
{%- set ns = namespace() %}
{%- set ns.index = 0 %}
{%- for message in loop_messages %}
    {%- if not (message.role == "tool" or message.role == "tool_results" or (message.tool_calls is defined and message.tool_calls is not none)) %}
        {%- if (message["role"] == "user") != (ns.index % 2 == 0) %}
            {{- raise_exception("After the optional system message, conversation roles must alternate user/assistant/user/assistant/...") }}
        {%- endif %}
        {%- set ns.index = ns.index + 1 %}
    {%- endif %}
{%- endfor %}

{{- bos_token }}
{%- for message in loop_messages %}
    {%- if message["role"] == "user" %}
        {%- if tools is not none and (message == user_messages[-1]) %}
            {{- "[AVAILABLE_TOOLS] [" }}
            {%- for tool in tools %}
                {%- set tool = tool.function %}
                {{- '{"type": "function", "function": {' }}
                {%- for key, val in tool.items() if key != "return" %}
                    {%- if val is string %}
                        {{- '"' + key + '": "' + val + '"' }}
                    {%- else %}
                        {{- '"' + key + '": ' + val|tojson }}
                    {%- endif %}
                    {%- if not loop.last %}
                        {{- ", " }}
                    {%- endif %}
                {%- endfor %}
                {{- "}}" }}
                {%- if not loop.last %}
                    {{- ", " }}
                {%- else %}
                    {{- "]" }}
                {%- endif %}
            {%- endfor %}
            {{- "[/AVAILABLE_TOOLS]" }}
            {%- endif %}
        {%- if loop.last and system_message is defined %}
            {{- "[INST] " + system_message + "\n\n" + message["content"] + "[/INST]" }}
        {%- else %}
            {{- "[INST] " + message["content"] + "[/INST]" }}
        {%- endif %}
    {%- elif message.tool_calls is defined and message.tool_calls is not none %}
        {{- "[TOOL_CALLS] [" }}
        {%- for tool_call in message.tool_calls %}
            {%- set out = tool_call.function|tojson %}
            {{- out[:-1] }}
            {%- if not tool_call.id is defined or tool_call.id|length != 9 %}
                {{- raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}
            {%- endif %}
            {{- ', "id": "' + tool_call.id + '"}' }}
            {%- if not loop.last %}
                {{- ", " }}
            {%- else %}
                {{- "]" + eos_token }}
            {%- endif %}
        {%- endfor %}
    {%- elif message["role"] == "assistant" %}
        {{- " " + message["content"]|trim + eos_token}}
    {%- elif message["role"] == "tool_results" or message["role"] == "tool" %}
        {%- if message.content is defined and message.content.content is defined %}
            {%- set content = message.content.content %}
        {%- else %}
            {%- set content = message.content %}
        {%- endif %}
        {{- '[TOOL_RESULTS] {"content": ' + content|string + ", " }}
        {%- if not message.tool_call_id is defined or message.tool_call_id|length != 9 %}
            {{- raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}
        {%- endif %}
        {{- '"call_id": "' + message.tool_call_id + '"}[/TOOL_RESULTS]' }}
    {%- else %}
        {{- raise_exception("Only user and assistant roles are supported, with the exception of an initial optional system message!") }}
    {%- endif %}
{%- endfor %}
)TPL";

// google/gemma-2-9b-it
const std::string gemma_template = "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}";

// microsoft/Phi-3.5-mini-instruct
const std::string phi3_template = "{% for message in messages %}{% if message['role'] == 'system' and message['content'] %}{{'<|system|>\n' + message['content'] + '<|end|>\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\n' + message['content'] + '<|end|>\n'}}{% elif message['role'] == 'assistant' %}{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}";

// deepseek-ai/DeepSeek-V3 (the R1 template's shape: </think> split off
// earlier assistant turns)
const std::string deepseek_v3_template = R"TPL({% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}{% set ns = namespace(is_first=false, is_tool=false, is_output_first=true, system_prompt='', is_first_sp=true) %}{%- for message in messages %}{%- if message['role'] == 'system' %}{%- if ns.is_first_sp %}{% set ns.system_prompt = ns.system_prompt + message['content'] %}{% set ns.is_first_sp = false %}{%- else %}{% set ns.system_prompt = ns.system_prompt + '\n\n' + message['content'] %}{%- endif %}{%- endif %}{%- endfor %}{{ bos_token }}{{ ns.system_prompt }}{%- for message in messages %}{%- if message['role'] == 'user' %}{%- set ns.is_tool = false -%}{{'<｜User｜>' + message['content']}}{%- endif %}{%- if message['role'] == 'assistant' and 'tool_calls' in message %}{%- set ns.is_tool = false -%}{%- for tool in message['tool_calls'] %}{%- if not ns.is_first %}{%- if message['content'] is none %}{{'<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>' + tool['function']['name'] + '\n' + '```json' + '\n' + tool['function']['arguments'] + '\n' + '```' + '<｜tool▁call▁end｜>'}}{%- else %}{{'<｜Assistant｜>' + message['content'] + '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>' + tool['function']['name'] + '\n' + '```json' + '\n' + tool['function']['arguments'] + '\n' + '```' + '<｜tool▁call▁end｜>'}}{%- endif %}{%- set ns.is_first = true -%}{%- else %}{{'\n' + '<｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>' + tool['function']['name'] + '\n' + '```json' + '\n' + tool['function']['arguments'] + '\n' + '```' + '<｜tool▁call▁end｜>'}}{%- endif %}{%- endfor %}{{'<｜tool▁calls▁end｜><｜end▁of▁sentence｜>'}}{%- endif %}{%- if message['role'] == 'assistant' and 'tool_calls' not in message %}{%- if ns.is_tool %}{{'<｜tool▁outputs▁end｜>' + message['content'] + '<｜end▁of▁sentence｜>'}}{%- set ns.is_tool = false -%}{%- else %}{% set content = message['content'] %}{% if '</think>' in content %}{% set content = content.split('</think>')[-1] %}{% endif %}{{'<｜Assistant｜>' + content + '<｜end▁of▁sentence｜>'}}{%- endif %}{%- endif %}{%- if message['role'] == 'tool' %}{%- set ns.is_tool = true -%}{%- if ns.is_output_first %}{{'<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>' + message['content'] + '<｜tool▁output▁end｜>'}}{%- set ns.is_output_first = false %}{%- else %}{{'\n<｜tool▁output▁begin｜>' + message['content'] + '<｜tool▁output▁end｜>'}}{%- endif %}{%- endif %}{%- endfor -%}{% if ns.is_tool %}{{'<｜tool▁outputs▁end｜>'}}{% endif %}{% if add_generation_prompt and not ns.is_tool %}{{'<｜Assistant｜>'}}{% endif %})TPL";

const chat_special_tokens llama3_tokens{"<|begin_of_text|>", "<|eot_id|>", true};

TEST(ChatJinjaFamiliesTest, Llama31PlainConversation) {
  json msgs = json::parse(R"([{"role": "system", "content": " You are a bot. "},
                              {"role": "user", "content": "Hi"},
                              {"role": "assistant", "content": "Hello!"},
                              {"role": "user", "content": "Bye"}])");
  EXPECT_EQ(render(llama31_template, msgs, nullptr, llama3_tokens),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
            "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n"
            "You are a bot.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatJinjaFamiliesTest, Llama31WithToolsPutsThemInTheFirstUserMessage) {
  json msgs = json::parse(R"([
    {"role": "system", "content": "You are a bot."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": null, "tool_calls": [
      {"id": "call_1", "type": "function",
       "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "content": "20C"}])");
  EXPECT_EQ(render(llama31_template, msgs, json::array({get_weather_tool}), llama3_tokens),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
            "Environment: ipython\n"
            "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n"
            "You are a bot.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\n"
            "Given the following functions, please respond with a JSON for a function call "
            "with its proper arguments that best answers the given prompt.\n\n"
            "Respond in the format {\"name\": function name, \"parameters\": dictionary of "
            "argument name and its value}.Do not use variables.\n\n"
            "{\n"
            "    \"type\": \"function\",\n"
            "    \"function\": {\n"
            "        \"name\": \"get_weather\",\n"
            "        \"description\": \"Get the weather\",\n"
            "        \"parameters\": {\n"
            "            \"type\": \"object\",\n"
            "            \"properties\": {\n"
            "                \"city\": {\n"
            "                    \"type\": \"string\"\n"
            "                }\n"
            "            },\n"
            "            \"required\": [\n"
            "                \"city\"\n"
            "            ]\n"
            "        }\n"
            "    }\n"
            "}\n\n"
            "Weather in Paris?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n"
            "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}<|eot_id|>"
            // A string is iterable to Jinja, so the tool result is JSON-quoted.
            "<|start_header_id|>ipython<|end_header_id|>\n\n\"20C\"<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatJinjaFamiliesTest, Qwen25WithoutToolsAddsItsDefaultSystemMessage) {
  json msgs = json::parse(R"([{"role": "user", "content": "Hi"},
                              {"role": "assistant", "content": "Hello!"},
                              {"role": "user", "content": "Bye"}])");
  EXPECT_EQ(render(qwen25_template, msgs, nullptr, {"", "<|im_end|>", false}),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
            "assistant.<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello!<|im_end|>\n"
            "<|im_start|>user\nBye<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatJinjaFamiliesTest, Qwen25WithToolsToolCallsAndResults) {
  json msgs = json::parse(R"([
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": null, "tool_calls": [
      {"id": "call_1", "type": "function",
       "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "content": "20C"}])");
  EXPECT_EQ(render(qwen25_template, msgs, json::array({get_weather_tool}), {"", "<|im_end|>", false}),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
            "assistant.\n\n# Tools\n\nYou may call one or more functions to assist with the "
            "user query.\n\nYou are provided with function signatures within <tools></tools> "
            "XML tags:\n<tools>\n"
            "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": "
            "\"Get the weather\", \"parameters\": {\"type\": \"object\", \"properties\": "
            "{\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}\n"
            "</tools>\n\nFor each function call, return a json object with function name and "
            "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
            "{\"name\": <function-name>, \"arguments\": <args-json-object>}\n"
            "</tool_call><|im_end|>\n"
            "<|im_start|>user\nWeather in Paris?<|im_end|>\n"
            "<|im_start|>assistant\n<tool_call>\n"
            "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
            "</tool_call><|im_end|>\n"
            "<|im_start|>user\n<tool_response>\n20C\n</tool_response><|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatJinjaFamiliesTest, MistralV03WithToolsBeforeTheLastUserMessage) {
  json msgs = json::parse(R"([
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": null, "tool_calls": [
      {"id": "abc123def", "type": "function",
       "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "tool_call_id": "abc123def", "content": "20C"},
    {"role": "assistant", "content": "It is 20C."},
    {"role": "user", "content": "Thanks!"}])");
  EXPECT_EQ(render(mistral_v03_template, msgs, json::array({get_weather_tool}), {"<s>", "</s>", true}),
            "<s>[INST] Weather in Paris?[/INST]"
            "[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, "
            "\"id\": \"abc123def\"}]</s>"
            "[TOOL_RESULTS] {\"content\": 20C, \"call_id\": \"abc123def\"}[/TOOL_RESULTS]"
            " It is 20C.</s>"
            "[AVAILABLE_TOOLS] [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", "
            "\"description\": \"Get the weather\", \"parameters\": {\"type\": \"object\", "
            "\"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}]"
            "[/AVAILABLE_TOOLS]"
            "[INST] Be brief.\n\nThanks![/INST]");
}

TEST(ChatJinjaFamiliesTest, MistralV03RefusesWhatItsTemplateRefuses) {
  auto t = compiled(mistral_v03_template);
  json two_users = json::parse(R"([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])");
  auto r = render_chat_json(t, two_users, nullptr, {"<s>", "</s>", true});
  ASSERT_TRUE(std::holds_alternative<api_error>(r));
  EXPECT_EQ(std::get<api_error>(r).status, 400);
  EXPECT_NE(std::get<api_error>(r).message.find("must alternate user/assistant"), std::string::npos)
    << std::get<api_error>(r).message;
}

TEST(ChatJinjaFamiliesTest, GemmaRenamesTheAssistantModelAndRefusesSystem) {
  json msgs = json::parse(R"([{"role": "user", "content": "Hi "},
                              {"role": "assistant", "content": " Hello!"},
                              {"role": "user", "content": "Bye"}])");
  EXPECT_EQ(render(gemma_template, msgs, nullptr, {"<bos>", "<eos>", true}),
            "<bos><start_of_turn>user\nHi<end_of_turn>\n"
            "<start_of_turn>model\nHello!<end_of_turn>\n"
            "<start_of_turn>user\nBye<end_of_turn>\n"
            "<start_of_turn>model\n");
  auto t = compiled(gemma_template);
  auto r = render_chat_json(t, json::parse(R"([{"role": "system", "content": "x"}])"), nullptr,
                            {"<bos>", "<eos>", true});
  ASSERT_TRUE(std::holds_alternative<api_error>(r));
  EXPECT_NE(std::get<api_error>(r).message.find("System role not supported"), std::string::npos);
}

TEST(ChatJinjaFamiliesTest, Phi3) {
  json msgs = json::parse(R"([{"role": "system", "content": "Be kind."},
                              {"role": "user", "content": "Hi"},
                              {"role": "assistant", "content": "Hello!"},
                              {"role": "user", "content": "Bye"}])");
  EXPECT_EQ(render(phi3_template, msgs, nullptr, {"<s>", "<|endoftext|>", false}),
            "<|system|>\nBe kind.<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\nHello!<|end|>\n"
            "<|user|>\nBye<|end|>\n<|assistant|>\n");
  EXPECT_EQ(render(phi3_template, json::parse(R"([{"role": "user", "content": "Hi"}])"), nullptr,
                   {"<s>", "<|endoftext|>", false}, false),
            "<|user|>\nHi<|end|>\n<|endoftext|>");
}

TEST(ChatJinjaFamiliesTest, DeepSeekV3Conversation) {
  const chat_special_tokens ds{"<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", false};
  json msgs = json::parse(R"([{"role": "system", "content": "You are helpful."},
                              {"role": "user", "content": "Hi"},
                              {"role": "assistant", "content": "<think>hmm</think>Hello!"},
                              {"role": "user", "content": "2+2?"}])");
  EXPECT_EQ(render(deepseek_v3_template, msgs, nullptr, ds),
            "<｜begin▁of▁sentence｜>You are helpful.<｜User｜>Hi<｜Assistant｜>Hello!"
            "<｜end▁of▁sentence｜><｜User｜>2+2?<｜Assistant｜>");
}

TEST(ChatJinjaFamiliesTest, DeepSeekV3ToolCallAndOutput) {
  const chat_special_tokens ds{"<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", false};
  json msgs = json::parse(R"([
    {"role": "user", "content": "Weather?"},
    {"role": "assistant", "content": null, "tool_calls": [
      {"type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
    {"role": "tool", "content": "20C"}])");
  EXPECT_EQ(render(deepseek_v3_template, msgs, nullptr, ds),
            "<｜begin▁of▁sentence｜><｜User｜>Weather?"
            "<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>"
            "get_weather\n```json\n{\"city\": \"Paris\"}\n```<｜tool▁call▁end｜>"
            "<｜tool▁calls▁end｜><｜end▁of▁sentence｜>"
            "<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>20C<｜tool▁output▁end｜>"
            "<｜tool▁outputs▁end｜>");
}

TEST(ChatJinjaFamiliesTest, EveryFamilyCompilesAndPassesTheStartProbe) {
  for (const auto* src : {&llama31_template, &qwen25_template, &mistral_v03_template,
                          &gemma_template, &phi3_template, &deepseek_v3_template}) {
    auto r = resolve_chat_template(*src, "");
    EXPECT_TRUE(std::holds_alternative<chat_template>(r))
      << std::get<api_error>(r).message << "\n" << src->substr(0, 80);
  }
}

} // namespace
