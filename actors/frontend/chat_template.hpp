#pragma once
/// @file
/// Chat templates. The model's tokenizer_config.json `chat_template` (or a
/// --chat-template file or inline source) is Jinja, interpreted by
/// tessera::jinja (engine/jinja/) as transformers' apply_chat_template
/// renders it: variables messages, add_generation_prompt, bos_token,
/// eos_token, tools when given. A template that does not parse, uses a
/// construct the interpreter lacks, or fails on a one-message conversation
/// is refused at start naming the construct.
///
/// `--chat-template NAME` picks a built-in format instead, rendered by
/// hand-written code (the family names below), for models whose template
/// is missing or wrong:
///
///   family   markers in the template           rendered (S system, U user, A assistant)
///   llama3   <|start_header_id|> <|end_header_id|> <|eot_id|>
///            <|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|>
///            ...<|start_header_id|>assistant<|end_header_id|>\n\n   (contents trimmed)
///   chatml   <|im_start|> <|im_end|>  (Qwen2 and others)
///            <|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n
///            ...<|im_start|>assistant\n
///   mistral  [INST] [/INST], no <<SYS>>  (Mistral-7B-Instruct v0.1/v0.2)
///            <s>[INST] S\n\nU [/INST]A</s>[INST] U [/INST]       (original template)
///            <s> [INST] S\n\nU [/INST] A</s> [INST] U [/INST]    (2024 template)
///   llama2   [INST] and <<SYS>>  (Llama-2-chat)
///            <s>[INST] <<SYS>>\nS\n<</SYS>>\n\nU [/INST] A </s><s>[INST] U [/INST]
///
/// BOS: when the rendered text starts with the BOS token's text the
/// template wrote it, and the prompt is encoded with add_bos = false;
/// otherwise the tokenizer adds BOS if the model has one and wants it
/// (tokenizer_settings::add_bos). chat_prompt::add_bos says which: the
/// prompt starts with exactly one BOS either way.
///
/// Injection: a rendered prompt is a list of runs, each marked as the
/// template's own text or as data (message contents, roles, tool
/// definitions). encode_chat_prompt turns special-token text into special
/// ids only inside template runs; the same text inside a message is
/// encoded as plain text, so a user cannot forge a turn (unlike Hugging
/// Face and vLLM, which parse special tokens in the whole rendered text).

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "actors/frontend/api_error.hpp"
#include "actors/frontend/openai_request.hpp"

#include <nlohmann/json_fwd.hpp>

namespace tessera::engine {
class tokenizer;
}

namespace tessera::jinja {
class compiled_template;
}

namespace tessera::actors::frontend {

/// The chat formats Tessera renders.
enum class chat_template_family : uint8_t { llama3, chatml, mistral, llama2 };

/// "llama3", "chatml", "mistral", "llama2".
[[nodiscard]] std::string_view to_string(chat_template_family f);

/// The family named `name` (as to_string writes it), if any.
[[nodiscard]] std::optional<chat_template_family> family_from_name(std::string_view name);

/// A chat template: a compiled Jinja template, or a built-in family.
struct chat_template {
  /// The Jinja template that renders conversations (the model's own, or a
  /// --chat-template file or source). Null: the hand-written renderer of
  /// `family`.
  std::shared_ptr<const jinja::compiled_template> jinja;
  /// The format: what renders when `jinja` is null; with a Jinja template,
  /// the family its markers show (informational; llama3 if none).
  chat_template_family family = chat_template_family::llama3;
  /// chatml: the system message the template adds when the conversation
  /// has none (Qwen2: "You are a helpful assistant."), or empty.
  std::string default_system;
  /// mistral: the 2024 template's spacing (" [INST] ", a space before the
  /// reply) rather than the original v0.2 template's ("[INST] ", the reply
  /// right after "[/INST]"). Default: false.
  bool mistral_spaced = false;
};

/// Recognises the Jinja source `source` (tokenizer_config.json's
/// chat_template) by its family's markers, for the hand-written renderers
/// (no Jinja: jinja stays null). Errors (400): empty source
/// ("the model has no chat template"), no family's markers (naming the
/// start of what was found), markers of several families, a newer Mistral
/// format this code does not render ([SYSTEM_PROMPT], [AVAILABLE_TOOLS]).
/// The override --chat-template accepts a family name where detection
/// fails.
[[nodiscard]] api_result<chat_template> detect_chat_template(std::string_view source);

/// Compiles Jinja source `source` (where it came from in `origin`, for
/// errors) and renders it once with a one-message conversation, so a
/// template that cannot render fails here, at start, not on every request.
/// Errors (400): empty source, a syntax error or unsupported construct
/// (named, with line and column), a render failure.
[[nodiscard]] api_result<chat_template> compile_chat_template(std::string_view source,
                                                              std::string_view origin);

/// The template to use: `override_value` when not empty (a family name:
/// the hand-written renderer with that family's defaults, mistral the 2024
/// spacing; else Jinja source, or the path of a file of it), else the
/// tokenizer's template compiled as compile_chat_template does. Errors: as
/// compile_chat_template, or an override that is neither a family name nor
/// a readable file (naming it).
[[nodiscard]] api_result<chat_template> resolve_chat_template(std::string_view tokenizer_template,
                                                              std::string_view override_value);

/// The special-token texts a template writes.
struct chat_special_tokens {
  /// The BOS token's text ("<|begin_of_text|>", "<s>"), or empty if the
  /// model has none.
  std::string bos;
  /// The EOS token's text ("</s>") that ends assistant turns in the mistral
  /// and llama2 formats, or empty.
  std::string eos;
  /// The tokenizer adds BOS to a plain encode (tokenizer_settings::add_bos
  /// and a BOS id). Default: false.
  bool tokenizer_adds_bos = false;
};

/// The special tokens of `tok`: BOS from its bos_id, EOS from its first
/// eos id, tokenizer_adds_bos from its settings.
[[nodiscard]] chat_special_tokens special_tokens_of(const engine::tokenizer& tok);

/// A piece of a rendered prompt and where it came from.
struct prompt_run {
  std::string text;
  /// From data (message contents, roles, tools): special-token text in it
  /// is encoded as plain text.
  bool from_data = false;
};

/// A rendered conversation.
struct chat_prompt {
  /// The prompt text, special tokens written as text.
  std::string text;
  /// `text` cut into runs of template text and data (their texts
  /// concatenate to `text`).
  std::vector<prompt_run> runs;
  /// Pass as encode's add_bos: true only when the template wrote no BOS and
  /// the tokenizer adds one.
  bool add_bos = false;
};

/// Renders `messages` in `tmpl`'s format; `add_generation_prompt` ends it
/// with the assistant's header (llama3, chatml; mistral and llama2 prompts
/// always end ready for the reply). Roles must be system, user, assistant
/// or tool (checked again here: they are data the template compares).
/// Errors (400): a role outside that set; for Jinja templates, the
/// template's raise_exception message or its render error; for the
/// hand-written ones (naming the message) a role the format cannot express
/// (mistral, llama2: a system message that is not the first, a tool
/// message, user and assistant not alternating starting with user, no user
/// message).
[[nodiscard]] api_result<chat_prompt> render_chat(const chat_template& tmpl,
                                                  std::span<const chat_message> messages,
                                                  const chat_special_tokens& tokens,
                                                  bool add_generation_prompt = true);

/// As render_chat, with the messages as JSON (objects with role, content
/// and whatever else the template reads: tool_calls, name...) and `tools`
/// (an array, or null for none) for a Jinja template. The hand-written
/// renderers take role and content (a string) only.
[[nodiscard]] api_result<chat_prompt> render_chat_json(const chat_template& tmpl,
                                                       const nlohmann::ordered_json& messages,
                                                       const nlohmann::ordered_json& tools,
                                                       const chat_special_tokens& tokens,
                                                       bool add_generation_prompt = true);

/// Renders a chat request: its messages (assistant tool_calls, with their
/// arguments parsed into objects as vLLM hands them to templates, and
/// tool_call_id) and, unless tool_choice is "none", its tools, as
/// transformers' apply_chat_template(messages, tools=...) does. A template
/// that does not render tools (its output is the same without them), and
/// the built-in formats, get the tools described in the system message
/// (tools_preamble), earlier calls as `<tool_call>` text in the assistant
/// turn and tool results as user turns wrapped in `<tool_response>`.
/// Errors: as render_chat_json.
[[nodiscard]] api_result<chat_prompt> render_chat_request(const chat_template& tmpl,
                                                          const api_request& req,
                                                          const chat_special_tokens& tokens);

/// Encodes a rendered prompt with `tok`, add_bos as the prompt says:
/// special-token text becomes special ids only inside template runs; the
/// text between those ids (template and data together) is encoded with
/// special-token parsing off, so a benign prompt gets exactly the ids a
/// whole-text encode with parse_special = true gives.
[[nodiscard]] std::vector<int32_t> encode_chat_prompt(const engine::tokenizer& tok,
                                                      const chat_prompt& prompt);

} // namespace tessera::actors::frontend
