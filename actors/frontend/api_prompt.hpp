#pragma once
/// @file
/// From a parsed api_request to the engine's prompt: renders a chat with
/// its template, tokenizes, checks token ids and the context length, and
/// fills in max_tokens (apply_context_limit). Pure: no actors, no HTTP.

#include <cstdint>
#include <vector>

#include "actors/frontend/api_error.hpp"
#include "actors/frontend/chat_template.hpp"
#include "actors/frontend/openai_request.hpp"

namespace tessera::engine {
class tokenizer;
}

namespace tessera::actors::frontend {

/// The prompt token ids of `req`, encoded with `tok`; on success
/// req.params is complete (apply_context_limit ran with `max_model_len`).
///  - completion, text: encoded with special tokens parsed; BOS prepended
///    when the tokenizer adds one and the text does not already start with
///    it (so a prompt written with its own BOS does not get two);
///  - completion, token ids: used as given, each checked < vocab_size;
///  - chat: rendered with `tmpl` (nullptr: the model has no usable
///    template, a 400) and encoded as encode_chat_prompt does.
/// Errors (400): as render_chat, a token id outside the vocabulary, an
/// empty prompt, a prompt that leaves no room in the context.
[[nodiscard]] api_result<std::vector<int32_t>> prepare_prompt(api_request& req,
                                                              const engine::tokenizer& tok,
                                                              const chat_template* tmpl,
                                                              int32_t max_model_len);

} // namespace tessera::actors::frontend
