#include "actors/frontend/api_prompt.hpp"

#include <string>
#include <utility>

#include "engine/tokenizer.hpp"

namespace tessera::actors::frontend {

api_result<std::vector<int32_t>> prepare_prompt(api_request& req, const engine::tokenizer& tok,
                                                const chat_template* tmpl,
                                                int32_t max_model_len) {
  std::vector<int32_t> ids;
  if (req.kind == api_kind::chat) {
    if (tmpl == nullptr)
      return bad_request("the model has no chat template, so it cannot serve chat completions; "
                         "use /v1/completions or start the server with --chat-template",
                         "messages");
    auto prompt = render_chat_request(*tmpl, req, special_tokens_of(tok));
    if (auto* e = std::get_if<api_error>(&prompt))
      return std::move(*e);
    ids = encode_chat_prompt(tok, std::get<chat_prompt>(prompt));
  } else if (req.prompt_tokens) {
    ids = *req.prompt_tokens;
    const int32_t vocab = tok.vocab_size();
    for (size_t i = 0; i < ids.size(); ++i)
      if (ids[i] >= vocab)
        return bad_request("prompt token " + std::to_string(i) + " is " + std::to_string(ids[i])
                             + ", not a token id of the model (vocabulary of "
                             + std::to_string(vocab) + ")",
                           "prompt");
  } else {
    ids = tok.encode(req.prompt_text, /*add_bos=*/false, /*parse_special=*/true);
    const auto& s = tok.settings();
    if (s.add_bos && s.bos_id && (ids.empty() || ids.front() != *s.bos_id))
      ids.insert(ids.begin(), *s.bos_id);
  }
  if (auto err = apply_context_limit(req, static_cast<int32_t>(ids.size()), max_model_len))
    return std::move(*err);
  return ids;
}

} // namespace tessera::actors::frontend
