#pragma once
/// @file
/// vLLM's tokenizer endpoints as pure functions over strings: no actors, no
/// HTTP.
///
///   POST /v1/tokenize   {"model", "prompt": text | [ids]} or
///                       {"model", "messages": [...], "add_generation_prompt"}
///                       -> {"count", "max_model_len", "tokens"}
///                       (+ "token_strs" with "return_token_strs": true)
///   POST /v1/detokenize {"model", "tokens": [ids]} -> {"prompt": text}
///
/// The prompt is tokenized exactly as a completion or chat request with the
/// same body would be (prepare_prompt): the ids a request would send to the
/// engine. A prompt that leaves no room for one generated token is the same
/// 400 a completion would get.

#include <cstdint>
#include <string>
#include <string_view>

#include "actors/frontend/api_error.hpp"
#include "actors/frontend/chat_template.hpp"
#include "actors/frontend/openai_request.hpp"

namespace tessera::engine {
class tokenizer;
}

namespace tessera::actors::frontend {

/// What both endpoints need to know about the served model.
struct tokenize_context {
  const engine::tokenizer& tokenizer;
  /// Null: the model has no chat template (a chat body is a 400).
  const chat_template* chat = nullptr;
  std::string_view model_name;
  int32_t max_model_len = 0;
  api_limits limits;
};

/// The body of POST /v1/tokenize's answer, or the error (400 for a bad
/// body, 404 for another model).
[[nodiscard]] api_result<std::string> tokenize_response(std::string_view body, const tokenize_context& ctx);

/// The body of POST /v1/detokenize's answer: the ids' text with special
/// tokens kept (as vLLM's detokenize does), or the error.
[[nodiscard]] api_result<std::string> detokenize_response(std::string_view body, const tokenize_context& ctx);

} // namespace tessera::actors::frontend
