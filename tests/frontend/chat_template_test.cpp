#include "actors/frontend/chat_template.hpp"

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "engine/model_config.hpp"
#include "engine/tokenizer.hpp"
#include "engine/tokenizer_builder.hpp"
#include "tests/frontend/demo_tokenizer.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

using namespace tessera::actors::frontend;
using tessera::test::temp_dir;
namespace engine = tessera::engine;

// The chat_template values of real tokenizer_config.json files, copied as
// the JSON text they are stored as (so escapes are exactly the file's).
std::string from_json(const char* json_text) {
  return nlohmann::json::parse(json_text)["chat_template"].get<std::string>();
}

// meta-llama/Meta-Llama-3-8B-Instruct
const std::string llama3_template = from_json(R"({"chat_template": "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"})");

// Qwen/Qwen2-7B-Instruct
const std::string qwen2_template = from_json(R"({"chat_template": "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"})");

// mistralai/Mistral-7B-Instruct-v0.2, the original template.
const std::string mistral_v02_template = from_json(R"({"chat_template": "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}"})");

// mistralai/Mistral-7B-Instruct-v0.2 (and v0.1, Mixtral-8x7B-Instruct),
// the template they carry since 2024, with a system message.
const std::string mistral_2024_template = from_json(R"({"chat_template": "{%- if messages[0]['role'] == 'system' %}\n    {%- set system_message = messages[0]['content'] %}\n    {%- set loop_messages = messages[1:] %}\n{%- else %}\n    {%- set loop_messages = messages %}\n{%- endif %}\n\n{{- bos_token }}\n{%- for message in loop_messages %}\n    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}\n        {{- raise_exception('After the optional system message, conversation roles must alternate user/assistant/user/assistant/...') }}\n    {%- endif %}\n    {%- if message['role'] == 'user' %}\n        {%- if loop.first and system_message is defined %}\n            {{- ' [INST] ' + system_message + '\\n\\n' + message['content'] + ' [/INST]' }}\n        {%- else %}\n            {{- ' [INST] ' + message['content'] + ' [/INST]' }}\n        {%- endif %}\n    {%- elif message['role'] == 'assistant' %}\n        {{- ' ' + message['content'] + eos_token}}\n    {%- else %}\n        {{- raise_exception('Only user and assistant roles are supported, with the exception of an initial optional system message!') }}\n    {%- endif %}\n{%- endfor %}\n"})");

// meta-llama/Llama-2-7b-chat-hf
const std::string llama2_template = from_json(R"({"chat_template": "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}"})");

// google/gemma-7b-it: a real template of a family Tessera does not render.
const std::string gemma_template = from_json(R"({"chat_template": "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}"})");

chat_template detected(const std::string& source) {
  auto r = detect_chat_template(source);
  if (auto* e = std::get_if<api_error>(&r)) {
    ADD_FAILURE() << e->message;
    return {};
  }
  return std::get<chat_template>(r);
}

api_error detect_error(const std::string& source) {
  auto r = detect_chat_template(source);
  if (auto* e = std::get_if<api_error>(&r))
    return *e;
  ADD_FAILURE() << "detected " << to_string(std::get<chat_template>(r).family) << " in "
                << source;
  return {};
}

/// System, user, assistant (with spaces around it), user.
const std::vector<chat_message> conversation = {
  {"system", "You are a helpful assistant."},
  {"user", "Hello"},
  {"assistant", "  Hi there  "},
  {"user", "Who are you?"},
};

const chat_special_tokens llama3_tokens{"<|begin_of_text|>", "<|eot_id|>", true};
const chat_special_tokens sp_tokens{"<s>", "</s>", true};

chat_prompt rendered(const chat_template& t, const std::vector<chat_message>& msgs,
                     const chat_special_tokens& tokens, bool add_generation_prompt = true) {
  auto r = render_chat(t, msgs, tokens, add_generation_prompt);
  if (auto* e = std::get_if<api_error>(&r)) {
    ADD_FAILURE() << e->message;
    return {};
  }
  return std::get<chat_prompt>(r);
}

api_error render_error(const chat_template& t, const std::vector<chat_message>& msgs) {
  auto r = render_chat(t, msgs, sp_tokens);
  if (auto* e = std::get_if<api_error>(&r))
    return *e;
  ADD_FAILURE() << "rendered: " << std::get<chat_prompt>(r).text;
  return {};
}

// ---- detection ----------------------------------------------------------------

TEST(ChatTemplateTest, DetectsLlama3) {
  EXPECT_EQ(detected(llama3_template).family, chat_template_family::llama3);
}

TEST(ChatTemplateTest, DetectsQwen2AsChatmlWithItsDefaultSystemMessage) {
  auto t = detected(qwen2_template);
  EXPECT_EQ(t.family, chat_template_family::chatml);
  EXPECT_EQ(t.default_system, "You are a helpful assistant.");
}

TEST(ChatTemplateTest, DetectsBothMistralV02TemplatesWithTheirSpacing) {
  auto original = detected(mistral_v02_template);
  EXPECT_EQ(original.family, chat_template_family::mistral);
  EXPECT_FALSE(original.mistral_spaced);
  auto newer = detected(mistral_2024_template);
  EXPECT_EQ(newer.family, chat_template_family::mistral);
  EXPECT_TRUE(newer.mistral_spaced);
}

TEST(ChatTemplateTest, DetectsLlama2ByItsSysMarker) {
  EXPECT_EQ(detected(llama2_template).family, chat_template_family::llama2);
}

TEST(ChatTemplateTest, ChatmlWithoutALiteralSystemMessageHasNoDefault) {
  // teknium/OpenHermes-2.5-Mistral-7B
  auto t = detected(from_json(R"({"chat_template": "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"})"));
  EXPECT_EQ(t.family, chat_template_family::chatml);
  EXPECT_EQ(t.default_system, "");
  // A system header followed by an expression is not a default message;
  // a later literal one is (the shape of Qwen2.5's template).
  auto q = detected("{{- '<|im_start|>system\\n' }}{{- messages[0]['content'] }}{%- else %}"
                    "{{- '<|im_start|>system\\nYou are Qwen.<|im_end|>\\n' }}<|im_end|>");
  EXPECT_EQ(q.default_system, "You are Qwen.");
}

TEST(ChatTemplateTest, GarbageTemplateIsAnErrorShowingWhatWasFound) {
  auto e = detect_error("{% for m in messages %}{{ m.content }}{% endfor %}");
  EXPECT_EQ(e.status, 400);
  EXPECT_NE(e.message.find("unknown chat template"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("{% for m in messages %}"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("--chat-template"), std::string::npos) << e.message;

  auto g = detect_error(gemma_template);
  EXPECT_NE(g.message.find("unknown chat template"), std::string::npos) << g.message;
  EXPECT_NE(g.message.find("..."), std::string::npos) << "long templates are cut";

  auto bin = detect_error(std::string("\x01\xff\xfe garbage \n\t"));
  EXPECT_NO_THROW((void)nlohmann::json(bin.message).dump());
}

TEST(ChatTemplateTest, EmptyTemplateIsAnErrorSayingThereIsNone) {
  for (const char* empty : {"", "  \n "}) {
    auto e = detect_error(empty);
    EXPECT_EQ(e.status, 400);
    EXPECT_NE(e.message.find("has no chat template"), std::string::npos) << e.message;
  }
}

TEST(ChatTemplateTest, MarkersOfTwoFamiliesAreAmbiguous) {
  auto e = detect_error("<|im_start|><|im_end|>[INST][/INST]");
  EXPECT_NE(e.message.find("ambiguous"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("chatml"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("mistral"), std::string::npos) << e.message;
}

TEST(ChatTemplateTest, NewerMistralFormatsAreRefusedNotMisrendered) {
  auto e = detect_error("{{ bos_token }}[SYSTEM_PROMPT]{{ s }}[/SYSTEM_PROMPT][INST]{{ u }}[/INST]");
  EXPECT_NE(e.message.find("[SYSTEM_PROMPT]"), std::string::npos) << e.message;
  EXPECT_NE(detect_error("[AVAILABLE_TOOLS] [INST] x [/INST]").message.find("newer Mistral"),
            std::string::npos);
}

TEST(ChatTemplateTest, FamilyNamesRoundTrip) {
  for (auto f : {chat_template_family::llama3, chat_template_family::chatml,
                 chat_template_family::mistral, chat_template_family::llama2})
    EXPECT_EQ(family_from_name(to_string(f)), f);
  EXPECT_FALSE(family_from_name("jinja"));
}

// ---- override ---------------------------------------------------------------------

TEST(ChatTemplateTest, OverrideByFamilyNameReplacesDetection) {
  auto r = resolve_chat_template("", "llama2");
  ASSERT_TRUE(std::holds_alternative<chat_template>(r));
  EXPECT_EQ(std::get<chat_template>(r).family, chat_template_family::llama2);
  auto m = resolve_chat_template(gemma_template, "mistral");
  ASSERT_TRUE(std::holds_alternative<chat_template>(m));
  EXPECT_EQ(std::get<chat_template>(m).family, chat_template_family::mistral);
  EXPECT_TRUE(std::get<chat_template>(m).mistral_spaced);
  // Same family as the model's own template: its details are kept.
  auto q = resolve_chat_template(qwen2_template, "chatml");
  ASSERT_TRUE(std::holds_alternative<chat_template>(q));
  EXPECT_EQ(std::get<chat_template>(q).default_system, "You are a helpful assistant.");
}

TEST(ChatTemplateTest, OverrideByFileIsCompiledLikeATokenizerTemplate) {
  temp_dir dir;
  auto file = dir.path() / "llama2.jinja";
  std::ofstream(file) << llama2_template;
  auto r = resolve_chat_template(qwen2_template, file.string());
  ASSERT_TRUE(std::holds_alternative<chat_template>(r));
  EXPECT_EQ(std::get<chat_template>(r).family, chat_template_family::llama2);

  auto garbage = dir.path() / "garbage.jinja";
  std::ofstream(garbage) << "{{ messages | frobnicate }}";
  auto g = resolve_chat_template("", garbage.string());
  ASSERT_TRUE(std::holds_alternative<api_error>(g));
  EXPECT_NE(std::get<api_error>(g).message.find(garbage.string()), std::string::npos);
  EXPECT_NE(std::get<api_error>(g).message.find("unsupported filter 'frobnicate'"),
            std::string::npos)
    << std::get<api_error>(g).message;
}

TEST(ChatTemplateTest, OverrideThatIsNeitherNameNorFileIsNamed) {
  auto r = resolve_chat_template(llama3_template, "/no/such/template.jinja");
  ASSERT_TRUE(std::holds_alternative<api_error>(r));
  const auto& msg = std::get<api_error>(r).message;
  EXPECT_NE(msg.find("/no/such/template.jinja"), std::string::npos) << msg;
  EXPECT_NE(msg.find("neither a family name"), std::string::npos) << msg;
}

TEST(ChatTemplateTest, InlineTemplateOverrideIsDetected) {
  auto r = resolve_chat_template("", qwen2_template);
  ASSERT_TRUE(std::holds_alternative<chat_template>(r));
  EXPECT_EQ(std::get<chat_template>(r).family, chat_template_family::chatml);
}

TEST(ChatTemplateTest, NoOverrideDetectsTheTokenizersTemplate) {
  auto r = resolve_chat_template(llama3_template, "");
  ASSERT_TRUE(std::holds_alternative<chat_template>(r));
  EXPECT_EQ(std::get<chat_template>(r).family, chat_template_family::llama3);
}

// ---- rendering --------------------------------------------------------------------

TEST(ChatTemplateTest, RendersLlama3Exactly) {
  auto p = rendered(detected(llama3_template), conversation, llama3_tokens);
  EXPECT_EQ(p.text,
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
            "You are a helpful assistant.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHi there<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nWho are you?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_FALSE(p.add_bos) << "the template wrote BOS; the tokenizer must not add another";
}

TEST(ChatTemplateTest, Llama3WithoutGenerationPromptEndsAfterTheLastTurn) {
  auto p = rendered(detected(llama3_template), {{"user", " \tHi\n"}}, llama3_tokens, false);
  EXPECT_EQ(p.text, "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>");
}

TEST(ChatTemplateTest, Llama3TrimsAsPythonStripDoes) {
  // U+00A0 and U+3000 are whitespace to Python; U+200B is not.
  auto p = rendered(detected(llama3_template),
                    {{"user", "\xc2\xa0\xe3\x80\x80x\xe2\x80\x8b \xc2\xa0"}}, llama3_tokens, false);
  EXPECT_EQ(p.text, "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n"
                    "x\xe2\x80\x8b<|eot_id|>");
}

TEST(ChatTemplateTest, RendersQwen2Exactly) {
  chat_special_tokens qwen{"", "<|im_end|>", false};
  auto t = detected(qwen2_template);
  auto p = rendered(t, conversation, qwen);
  EXPECT_EQ(p.text,
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nHello<|im_end|>\n"
            "<|im_start|>assistant\n  Hi there  <|im_end|>\n"
            "<|im_start|>user\nWho are you?<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_FALSE(p.add_bos);
}

TEST(ChatTemplateTest, Qwen2AddsItsDefaultSystemMessageWhenThereIsNone) {
  auto p = rendered(detected(qwen2_template), {{"user", "Hello"}}, {"", "", false});
  EXPECT_EQ(p.text,
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplateTest, ChatmlLeavesBosToATokenizerThatAddsOne) {
  auto t = detected(qwen2_template);
  EXPECT_TRUE(rendered(t, {{"user", "x"}}, {"<s>", "</s>", true}).add_bos);
  EXPECT_FALSE(rendered(t, {{"user", "x"}}, {"<s>", "</s>", false}).add_bos);
  EXPECT_FALSE(rendered(t, {{"user", "x"}}, {"", "</s>", true}).add_bos);
}

TEST(ChatTemplateTest, RendersMistralV02OriginalExactly) {
  auto p = rendered(detected(mistral_v02_template), conversation, sp_tokens);
  EXPECT_EQ(p.text,
            "<s>[INST] You are a helpful assistant.\n\nHello [/INST]  Hi there  </s>"
            "[INST] Who are you? [/INST]");
  EXPECT_FALSE(p.add_bos);
}

TEST(ChatTemplateTest, RendersMistral2024TemplateExactly) {
  auto p = rendered(detected(mistral_2024_template), conversation, sp_tokens);
  EXPECT_EQ(p.text,
            "<s> [INST] You are a helpful assistant.\n\nHello [/INST]   Hi there  </s>"
            " [INST] Who are you? [/INST]");
  EXPECT_FALSE(p.add_bos);
}

TEST(ChatTemplateTest, RendersLlama2Exactly) {
  auto p = rendered(detected(llama2_template), conversation, sp_tokens);
  EXPECT_EQ(p.text,
            "<s>[INST] <<SYS>>\nYou are a helpful assistant.\n<</SYS>>\n\nHello [/INST]"
            " Hi there </s><s>[INST] Who are you? [/INST]");
  EXPECT_FALSE(p.add_bos);
  auto no_sys = rendered(detected(llama2_template), {{"user", " Hi "}}, sp_tokens);
  EXPECT_EQ(no_sys.text, "<s>[INST] Hi [/INST]");
}

TEST(ChatTemplateTest, MatchesJinjaOnAConversationWithoutSystemMessage) {
  // Expected: each real template above rendered by jinja2 3.1 with the
  // settings transformers uses (trim_blocks, lstrip_blocks), for
  // user/assistant/user with add_generation_prompt.
  const std::vector<chat_message> conv(conversation.begin() + 1, conversation.end());
  struct parity_case {
    const std::string* source;
    chat_special_tokens tokens;
    std::string expected;
  };
  const std::vector<parity_case> cases = {
    {&llama3_template, llama3_tokens,
     "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
     "<|start_header_id|>assistant<|end_header_id|>\n\nHi there<|eot_id|>"
     "<|start_header_id|>user<|end_header_id|>\n\nWho are you?<|eot_id|>"
     "<|start_header_id|>assistant<|end_header_id|>\n\n"},
    {&qwen2_template, {"", "<|im_end|>", false},
     "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
     "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n  Hi there  <|im_end|>\n"
     "<|im_start|>user\nWho are you?<|im_end|>\n<|im_start|>assistant\n"},
    {&mistral_v02_template, sp_tokens,
     "<s>[INST] Hello [/INST]  Hi there  </s>[INST] Who are you? [/INST]"},
    {&mistral_2024_template, sp_tokens,
     "<s> [INST] Hello [/INST]   Hi there  </s> [INST] Who are you? [/INST]"},
    {&llama2_template, sp_tokens,
     "<s>[INST] Hello [/INST] Hi there </s><s>[INST] Who are you? [/INST]"},
  };
  for (const auto& c : cases)
    EXPECT_EQ(rendered(detected(*c.source), conv, c.tokens).text, c.expected)
      << to_string(detected(*c.source).family);
}

TEST(ChatTemplateTest, AlternatingFormatsRejectWhatTheirTemplatesReject) {
  for (const auto& source : {mistral_v02_template, llama2_template}) {
    auto t = detected(source);
    auto two_users = render_error(t, {{"user", "a"}, {"user", "b"}});
    EXPECT_EQ(two_users.status, 400);
    EXPECT_NE(two_users.message.find("messages[1]"), std::string::npos) << two_users.message;
    EXPECT_NE(two_users.message.find("alternate"), std::string::npos) << two_users.message;
    auto starts_with_assistant = render_error(t, {{"assistant", "a"}, {"user", "b"}});
    EXPECT_NE(starts_with_assistant.message.find("messages[0]"), std::string::npos);
    auto late_system = render_error(t, {{"user", "a"}, {"system", "b"}});
    EXPECT_NE(late_system.message.find("only as the first message"), std::string::npos)
      << late_system.message;
    auto tool = render_error(t, {{"user", "a"}, {"tool", "b"}});
    EXPECT_NE(tool.message.find("no tool messages"), std::string::npos) << tool.message;
    auto only_system = render_error(t, {{"system", "a"}});
    EXPECT_NE(only_system.message.find("needs a user message"), std::string::npos)
      << only_system.message;
  }
}

// ---- the demo model ----------------------------------------------------------------

class ChatTemplateDemoTest : public ::testing::Test {
protected:
  void SetUp() override {
    tok_ = tessera::test::load_demo_tokenizer(dir_.path());
    ASSERT_TRUE(tok_);
  }
  temp_dir dir_;
  std::unique_ptr<engine::tokenizer> tok_;
};

TEST_F(ChatTemplateDemoTest, TemplateIsDetectedAsLlama3) {
  EXPECT_EQ(detected(tok_->settings().chat_template).family, chat_template_family::llama3);
}

TEST_F(ChatTemplateDemoTest, RenderedConversationEncodesWithExactlyOneBos) {
  auto t = detected(tok_->settings().chat_template);
  auto tokens = special_tokens_of(*tok_);
  EXPECT_EQ(tokens.bos, "<|begin_of_text|>");
  EXPECT_TRUE(tokens.tokenizer_adds_bos);
  auto p = rendered(t, conversation, tokens);
  EXPECT_FALSE(p.add_bos);
  auto ids = encode_chat_prompt(*tok_, p);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.front(), engine::demo_special_ids::begin_of_text);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), engine::demo_special_ids::begin_of_text), 1);
  // Every marker became its special token: 4 turns + the generation prompt.
  EXPECT_EQ(std::count(ids.begin(), ids.end(), engine::demo_special_ids::start_header), 5);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), engine::demo_special_ids::end_header), 5);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), engine::demo_special_ids::eot), 4);
  // The text round-trips through the tokenizer.
  EXPECT_EQ(tok_->decode(ids, /*skip_special=*/false), p.text);
}

} // namespace
