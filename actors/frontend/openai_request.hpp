#pragma once
/// @file
/// Parses and validates the JSON bodies of `POST /v1/completions` and
/// `POST /v1/chat/completions` into an api_request. Pure functions over
/// strings: no actors, no HTTP, no exceptions (nlohmann's are caught and
/// become api_errors). Every rejection is an api_error whose message names
/// the field and the problem, e.g. "max_tokens must be an integer >= 1,
/// got -5".
///
/// Conventions, as OpenAI and vLLM accept requests:
///  - unknown fields are ignored (clients send extras);
///  - `null` is the same as an absent field;
///  - integers may be written as integral floats (`16.0`), never as
///    booleans or strings; floats may be written as integers;
///  - fields that would change the output in a way Tessera does not
///    implement are rejected rather than silently ignored: `echo: true`,
///    a non-empty `suffix`, `best_of` > n, a non-empty `logit_bias`.
///  - `tools`, `tool_choice` and `parallel_tool_calls` (chat only) are read
///    by parse_tools (tool_calls.hpp); a required or named tool_choice
///    constrains the output with the call's JSON Schema.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "actors/frontend/api_error.hpp"
#include "actors/frontend/tool_calls.hpp"
#include "engine/sampling_params.hpp"

namespace tessera::actors::frontend {

/// Which endpoint a body was sent to.
enum class api_kind : uint8_t {
  /// POST /v1/completions.
  completion,
  /// POST /v1/chat/completions.
  chat,
};

/// One message of a chat conversation.
struct chat_message {
  /// "system", "user", "assistant" or "tool" ("developer" arrives as
  /// "system").
  std::string role;
  /// The text. An array of text parts arrives joined with "\n" (as vLLM
  /// joins them). Valid UTF-8.
  std::string content;
  /// assistant: the `tool_calls` array as JSON text, checked to be
  /// [{id, type "function", function {name, arguments (a string)}}];
  /// empty when the turn made no calls.
  std::string tool_calls;
  /// tool: the `tool_call_id` this message answers, or empty.
  std::string tool_call_id;
};

/// Bounds on what a request may ask for. Every size in a request is
/// bounded (DESIGN.md, Security).
struct api_limits {
  /// Largest request body, checked before parsing (413 beyond it).
  /// Default: 4 MiB.
  size_t max_body_bytes = size_t{4} << 20;
  /// Largest prompt text, in bytes of UTF-8: a completion's prompt string,
  /// or the sum of a chat's message contents. Default: 1 MiB.
  size_t max_prompt_bytes = size_t{1} << 20;
  /// Most token ids in a completion's token-id prompt. Default: 262144.
  size_t max_prompt_token_ids = size_t{1} << 18;
  /// Most messages in a chat. Default: 4096.
  size_t max_messages = 4096;
  /// Largest max_tokens (and max_completion_tokens) accepted; at most the
  /// engine's bound (2^24). The caller also checks prompt + max_tokens
  /// against the model's context (apply_context_limit). Default: 1048576.
  int32_t max_tokens_limit = 1 << 20;
  /// Largest n (choices per request). Default: 16.
  int max_n = 16;
  /// Most stop strings; at most the engine's bound (16). Default: 16.
  size_t max_stop_strings = 16;
  /// Longest stop string in bytes; at most the engine's bound (256).
  /// Default: 256.
  size_t max_stop_bytes = 256;
  /// Most stop_token_ids; at most the engine's bound (64). Default: 64.
  size_t max_stop_token_ids = 64;
  /// Longest `user` and `session_id` strings, in bytes. Default: 256.
  size_t max_id_bytes = 256;
  /// Deepest nesting of JSON arrays and objects. Default: 64.
  int max_json_depth = 64;
};

/// A validated request, ready for tokenization and the engine.
struct api_request {
  /// The endpoint.
  api_kind kind = api_kind::completion;
  /// The model the client asked for (not empty). The caller checks that it
  /// is served (unknown_model otherwise).
  std::string model;
  /// Completions: the prompt text (a string, or an array of one string).
  /// Empty when prompt_tokens is set or for chat.
  std::string prompt_text;
  /// Completions: the prompt as token ids (an array of integers, or an
  /// array of one such array), each in [0, 2^31); the caller checks them
  /// against the vocabulary. Not empty when set.
  std::optional<std::vector<int32_t>> prompt_tokens;
  /// Chat: the conversation, not empty.
  std::vector<chat_message> messages;
  /// Sampling and stopping, mapped from the request fields: temperature,
  /// top_p, top_k, min_p, seed, stop, stop_token_ids, presence_penalty,
  /// frequency_penalty, repetition_penalty, min_tokens, ignore_eos,
  /// logprobs / top_logprobs, max_tokens. params.max_tokens is final for
  /// completions; for chat without max_tokens it is a placeholder until
  /// apply_context_limit fills it in.
  engine::sampling_params params;
  /// max_tokens as the client set it (chat: max_completion_tokens, else
  /// max_tokens). Completions default to 16 (OpenAI's default); chat
  /// without it is nullopt: "until the context is full"
  /// (apply_context_limit sets max_model_len - prompt tokens).
  std::optional<int32_t> max_tokens;
  /// Choices to generate, 1..limits.max_n. Default: 1.
  int n = 1;
  /// Stream the answer as server-sent events. Default: false.
  bool stream = false;
  /// stream_options.include_usage: send a usage chunk before [DONE].
  /// Default: false.
  bool include_usage = false;
  /// Return log-probabilities (completions: logprobs set; chat: logprobs
  /// true). Default: false.
  bool logprobs = false;
  /// Alternatives per token when logprobs (completions: logprobs; chat:
  /// top_logprobs), 0..20. Default: 0.
  int32_t top_logprobs = 0;
  /// Chat: end the prompt with the assistant's header (vLLM extension
  /// add_generation_prompt). Default: true.
  bool add_generation_prompt = true;
  /// The end user's id as the client sent it, or empty.
  std::string user;
  /// Conversation id for KV stickiness (Tessera extension `session_id`),
  /// or empty.
  std::string session_id;
  /// The request's scheduling priority (`priority`, an integer in
  /// +-max_request_priority of tenant_limits.hpp), HIGHER first like the key
  /// file's tenant priority (vLLM's `priority` is lower first); capped by
  /// the tenant's (request_priority). nullopt: not given.
  std::optional<int32_t> priority;
  /// Prefix-cache salt (vLLM's `cache_salt`): the request reuses cached
  /// blocks only of requests with the same salt (and tenant). 1 to
  /// limits.max_id_bytes bytes, no control characters; empty: none given.
  std::string cache_salt;
  /// Chat: the tools offered and how they may be called (tool_calls.hpp);
  /// null when none are offered (no tools, or tool_choice "none").
  std::shared_ptr<const tool_config> tools;
};

/// Parses the body of a request to `kind`'s endpoint. Checks, in order:
/// the body size (413), UTF-8, JSON nesting depth, JSON syntax, that the
/// body is an object, then each field (400, param naming the field).
/// Never throws.
[[nodiscard]] api_result<api_request> parse_request(api_kind kind, std::string_view body,
                                                    const api_limits& limits = {});

/// Fills in what depends on the tokenized prompt: with `prompt_tokens`
/// tokens and a model context of `max_model_len` tokens, sets
/// params.max_tokens to req.max_tokens, or (chat without max_tokens) to
/// the room left in the context; then checks prompt + max_tokens against
/// the context (400, vLLM's "This model's maximum context length is ..."),
/// min_tokens <= max_tokens, and engine::sampling_params::validate().
[[nodiscard]] std::optional<api_error> apply_context_limit(api_request& req,
                                                           int32_t prompt_tokens,
                                                           int32_t max_model_len);

} // namespace tessera::actors::frontend
