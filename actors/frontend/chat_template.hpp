#pragma once
/// @file
/// Chat templates without a Jinja engine. A model's tokenizer_config.json
/// `chat_template` (Jinja source) is recognised by the markers of its
/// family, and conversations are rendered by hand-written code that
/// produces exactly what the family's Hugging Face template produces:
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
/// BOS: llama3, mistral and llama2 templates write `{{ bos_token }}`
/// themselves, so the rendered text starts with the BOS token's text and
/// must be encoded with add_bos = false; chatml templates do not, so the
/// tokenizer adds BOS if the model has one and wants it
/// (tokenizer_settings::add_bos). chat_prompt::add_bos says which: the
/// prompt starts with exactly one BOS either way. (Llama 2's format puts
/// another <s> before every later user turn; that is its format.)
///
/// Encode chat_prompt::text with parse_special = true, so the markers
/// become their special-token ids. As with Hugging Face and vLLM, marker
/// text inside a message's content becomes a special token too.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "actors/frontend/api_error.hpp"
#include "actors/frontend/openai_request.hpp"

namespace tessera::engine {
class tokenizer;
}

namespace tessera::actors::frontend {

/// The chat formats Tessera renders.
enum class chat_template_family : uint8_t { llama3, chatml, mistral, llama2 };

/// "llama3", "chatml", "mistral", "llama2".
[[nodiscard]] std::string_view to_string(chat_template_family f);

/// The family named `name` (as to_string writes it), if any.
[[nodiscard]] std::optional<chat_template_family> family_from_name(std::string_view name);

/// A recognised chat template: the family and the details of it that
/// change the output.
struct chat_template {
  /// The format.
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
/// chat_template) by its family's markers. Errors (400): empty source
/// ("the model has no chat template"), no family's markers (naming the
/// start of what was found), markers of several families, a newer Mistral
/// format this code does not render ([SYSTEM_PROMPT], [AVAILABLE_TOOLS]).
/// The override --chat-template accepts a family name where detection
/// fails.
[[nodiscard]] api_result<chat_template> detect_chat_template(std::string_view source);

/// The template to use: `override_value` when not empty (a family name, or
/// the path of a file whose contents are detected like a tokenizer's
/// template; a family name gives that family's defaults, mistral the 2024
/// spacing), else detect_chat_template(tokenizer_template). Errors: as
/// detect_chat_template, or an override that is neither a family name nor
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

/// A rendered conversation.
struct chat_prompt {
  /// The prompt text, special tokens written as text.
  std::string text;
  /// Pass as encode's add_bos: true only when the template wrote no BOS and
  /// the tokenizer adds one.
  bool add_bos = false;
};

/// Renders `messages` in `tmpl`'s format; `add_generation_prompt` ends it
/// with the assistant's header (llama3, chatml; mistral and llama2 prompts
/// always end ready for the reply). Errors (400, naming the message): a
/// role the format cannot express (mistral, llama2: a system message that
/// is not the first, a tool message, user and assistant not alternating
/// starting with user, no user message).
[[nodiscard]] api_result<chat_prompt> render_chat(const chat_template& tmpl,
                                                  std::span<const chat_message> messages,
                                                  const chat_special_tokens& tokens,
                                                  bool add_generation_prompt = true);

/// Encodes a rendered prompt with `tok`: parse_special true, add_bos as
/// the prompt says.
[[nodiscard]] std::vector<int32_t> encode_chat_prompt(const engine::tokenizer& tok,
                                                      const chat_prompt& prompt);

} // namespace tessera::actors::frontend
