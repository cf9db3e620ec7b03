#pragma once
/// @file
/// Builds the JSON bodies (and server-sent-event frames) the OpenAI API
/// answers with: completions and chat completions, whole or streamed,
/// the usage chunk, `data: [DONE]`, the model list and error bodies.
/// Pure functions of plain structs; never throw (strings are dumped with
/// invalid UTF-8 replaced by U+FFFD).
///
/// A caller accumulates the engine's outputs per choice:
///
///   choice_output c{.index = i};
///   for each engine::request_output out of choice i:
///     stream_delta d = c.append(out);             // streaming:
///     send(chat_chunk(meta, d, opts));            //   one SSE frame each
///   send(usage_chunk(meta, api_kind::chat, make_usage(p, choices)));
///   send(done_event());
/// or, not streaming, chat_response(meta, choices, make_usage(...), opts).
///
/// Streamed chat starts with chat_role_chunk per choice; the chunk that
/// carries a finish_reason is the choice's last.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "actors/frontend/api_error.hpp"
#include "actors/frontend/openai_request.hpp"
#include "engine/engine.hpp"
#include "engine/sampler.hpp"

namespace tessera::engine {
class tokenizer;
}

namespace tessera::actors::frontend {

/// The raw bytes of one token (engine::tokenizer::token_bytes); may be part
/// of a UTF-8 character.
using token_bytes_fn = std::function<std::string(int32_t id)>;

/// token_bytes_fn over `tok`, which must outlive the function.
[[nodiscard]] token_bytes_fn token_bytes_of(const engine::tokenizer& tok);

/// What every object of one response shares.
struct response_meta {
  /// "cmpl-..." / "chatcmpl-..." (make_response_id); the same in every
  /// chunk of a stream.
  std::string id;
  /// Unix time in seconds when the request arrived.
  int64_t created = 0;
  /// The model name as the client asked for it.
  std::string model;
};

/// A fresh response id: "cmpl-" (completion) or "chatcmpl-" (chat)
/// followed by 24 hex digits derived from `unique` (e.g. a random number
/// or a request counter mixed with the process start time).
[[nodiscard]] std::string make_response_id(api_kind kind, uint64_t unique);

/// Options the builders share.
struct response_options {
  /// The request asked for logprobs (api_request::logprobs). Default: false.
  bool logprobs = false;
  /// Streaming with stream_options.include_usage: every chunk carries
  /// "usage": null, as OpenAI sends them. Default: false.
  bool include_usage = false;
  /// Token bytes for the logprobs' token strings; needed when logprobs.
  token_bytes_fn token_bytes;
};

/// Options for `req`: logprobs and include_usage copied, token bytes from
/// `tok` (which must outlive the options).
[[nodiscard]] response_options options_for(const api_request& req,
                                           const engine::tokenizer& tok);

/// A piece of a streamed tool call (delta.tool_calls[k]): id, type and
/// name come in the call's first piece, arguments in pieces that
/// concatenate to the call's arguments.
struct tool_call_delta {
  /// The call's index in the choice.
  int index = 0;
  /// Set in the first piece only.
  std::string id;
  std::string name;
  std::string arguments;
};

/// What a choice produced since the previous delta: one stream chunk.
struct stream_delta {
  /// The choice's index.
  int index = 0;
  /// New text (complete UTF-8 characters, stop strings cut off).
  std::string text;
  /// Per new token: its logprob and alternatives (empty unless asked).
  std::vector<engine::sampled_token> logprobs;
  /// Characters (code points) of the choice's text before this delta: the
  /// base of the completions logprobs' text_offset.
  int64_t text_offset = 0;
  /// Set on the choice's last delta.
  engine::finish_reason finish = engine::finish_reason::none;
  /// The stop string that ended the choice, if any.
  std::string stop_reason;
  /// The stop token id that ended it; -1 for none.
  int32_t stop_token = -1;
  /// Tool calls (chat with tools): chat_chunk sends them after `text`.
  std::vector<tool_call_delta> tool_calls;
  /// `text` is the arguments of tool_calls[0] (a named tool_choice), not
  /// content.
  bool text_is_arguments = false;
};

/// One choice's whole output, accumulated from engine::request_output.
struct choice_output {
  /// The choice's index, 0..n-1.
  int index = 0;
  /// The text so far.
  std::string text;
  /// The generated token ids so far.
  std::vector<int32_t> token_ids;
  /// Per generated token, when logprobs were asked.
  std::vector<engine::sampled_token> logprobs;
  /// Code points in text.
  int64_t text_chars = 0;
  /// Why the choice ended; none while it runs.
  engine::finish_reason finish = engine::finish_reason::none;
  /// The stop string that ended it, if any.
  std::string stop_reason;
  /// The stop token id that ended it; -1 for none.
  int32_t stop_token = -1;

  /// Chat with tools: how the reply is read (tool_calls.hpp); null for
  /// plain text.
  std::shared_ptr<const tool_config> tools;
  /// Streaming with tools: bytes of `text` already sent as content (auto)
  /// or arguments (named), and the named call's id.
  size_t released = 0;
  std::string call_id;

  /// Adds one engine output of this choice's request and returns the part
  /// that is new, ready for a stream chunk. With tools: a named choice's
  /// text streams as the call's arguments; auto holds text that may be a
  /// call (releasable_content); at the end the held text is parsed and
  /// its calls (or the text) come in the last delta.
  stream_delta append(const engine::request_output& out);

private:
  void stream_tools(stream_delta& d, bool last);
};

/// Token counts of a request.
struct usage_counts {
  /// Prompt tokens (counted once, whatever n).
  int32_t prompt_tokens = 0;
  /// Generated tokens over all choices.
  int32_t completion_tokens = 0;
  /// Prompt tokens served from the prefix cache; when set, usage carries
  /// prompt_tokens_details.cached_tokens.
  std::optional<int32_t> cached_tokens;
};

/// Usage of a request whose prompt had `prompt_tokens` tokens and whose
/// choices are `choices`.
[[nodiscard]] usage_counts make_usage(int32_t prompt_tokens,
                                      std::span<const choice_output> choices);

/// "data: " + json + "\n\n": one server-sent event.
[[nodiscard]] std::string sse_event(std::string_view json);

/// "data: [DONE]\n\n", the last event of every stream.
[[nodiscard]] std::string_view done_event();

/// A whole completion: object "text_completion", choices[{index, text,
/// logprobs (null, or {tokens, token_logprobs, top_logprobs,
/// text_offset}), finish_reason, stop_reason}], usage.
[[nodiscard]] std::string completion_response(const response_meta& meta,
                                              std::span<const choice_output> choices,
                                              const usage_counts& usage,
                                              const response_options& opts);

/// A whole chat completion: object "chat.completion", choices[{index,
/// message{role "assistant", content, tool_calls (with tools, when the
/// reply parsed as calls: [{id, type "function", function {name,
/// arguments}}], content then null if empty)}, logprobs (null, or {content:
/// [{token, logprob, bytes, top_logprobs}]}), finish_reason,
/// stop_reason}], usage.
[[nodiscard]] std::string chat_response(const response_meta& meta,
                                        std::span<const choice_output> choices,
                                        const usage_counts& usage,
                                        const response_options& opts);

/// SSE frame of one streamed completion chunk (object "text_completion").
[[nodiscard]] std::string completion_chunk(const response_meta& meta, const stream_delta& d,
                                           const response_options& opts);

/// SSE frame of a chat stream's first chunk for choice `index`: delta
/// {role: "assistant", content: ""}.
[[nodiscard]] std::string chat_role_chunk(const response_meta& meta, int index,
                                          const response_options& opts);

/// SSE frame of one streamed chat chunk (object "chat.completion.chunk"):
/// delta {content} (empty delta {} when the chunk only finishes), logprobs,
/// finish_reason (null until the last). With tool calls: a frame per call
/// piece, delta {tool_calls: [{index, id, type, function {name,
/// arguments}}]}, as OpenAI and vLLM stream them: id and name first, then
/// arguments; the last frame's finish_reason is "tool_calls".
[[nodiscard]] std::string chat_chunk(const response_meta& meta, const stream_delta& d,
                                     const response_options& opts);

/// SSE frame of the usage chunk sent before [DONE] when include_usage:
/// choices [], usage.
[[nodiscard]] std::string usage_chunk(const response_meta& meta, api_kind kind,
                                      const usage_counts& usage);

/// A served model, for GET /v1/models.
struct model_card {
  /// The name clients pass as "model".
  std::string id;
  /// Unix time in seconds (e.g. when the server started).
  int64_t created = 0;
  /// Default: "tessera".
  std::string owned_by = "tessera";
  /// Longest prompt + output in tokens; 0 leaves it out (vLLM extension).
  int32_t max_model_len = 0;
};

/// Body of GET /v1/models: object "list", data[{id, object "model",
/// created, owned_by}].
[[nodiscard]] std::string models_response(std::span<const model_card> models);

/// Body of GET /v1/models/{id}: one entry of models_response's data.
[[nodiscard]] std::string model_response(const model_card& model);

/// Body of an error response: {"error": {"message", "type", "param",
/// "code"}} (empty param / code as null). Send it with e.status.
[[nodiscard]] std::string error_body(const api_error& e);

/// SSE frame carrying an error in the middle of a stream, after which the
/// caller sends done_event() (vLLM's way).
[[nodiscard]] std::string error_event(const api_error& e);

} // namespace tessera::actors::frontend
