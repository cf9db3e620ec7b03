#include "actors/frontend/api_tokenize.hpp"

#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "actors/frontend/api_prompt.hpp"
#include "engine/tokenizer.hpp"

namespace tessera::actors::frontend {

namespace {

using json = nlohmann::json;

/// The body as a JSON object, with the UTF-8, size and depth checks of a
/// completion body (parse_request does them for the prompt cases).
api_result<json> object_of(std::string_view body, const api_limits& limits) {
  if (body.size() > limits.max_body_bytes)
    return body_too_large(body.size(), limits.max_body_bytes);
  int depth = 0;
  bool too_deep = false;
  auto j = json::parse(
    body,
    [&](int d, json::parse_event_t e, json&) {
      depth = d;
      too_deep = too_deep || ((e == json::parse_event_t::object_start || e == json::parse_event_t::array_start) &&
                              d >= limits.max_json_depth);
      return true;
    },
    /*allow_exceptions=*/false);
  if (too_deep)
    return bad_request("the body nests JSON deeper than " + std::to_string(limits.max_json_depth) + " levels");
  if (j.is_discarded())
    return bad_request("the body is not valid JSON");
  if (!j.is_object())
    return bad_request("the body must be a JSON object");
  return j;
}

std::optional<api_error> check_model(const json& j, const tokenize_context& ctx) {
  auto m = j.find("model");
  if (m == j.end() || m->is_null())
    return std::nullopt; // vLLM's tokenize takes the served model when none is named
  if (!m->is_string())
    return bad_request("model must be a string", "model");
  if (m->get_ref<const std::string&>() != ctx.model_name)
    return unknown_model(m->get_ref<const std::string&>());
  return std::nullopt;
}

} // namespace

api_result<std::string> tokenize_response(std::string_view body, const tokenize_context& ctx) {
  auto obj = object_of(body, ctx.limits);
  if (auto* e = std::get_if<api_error>(&obj))
    return std::move(*e);
  auto& j = std::get<json>(obj);
  if (auto e = check_model(j, ctx))
    return std::move(*e);
  bool token_strs = false;
  if (auto t = j.find("return_token_strs"); t != j.end() && !t->is_null()) {
    if (!t->is_boolean())
      return bad_request("return_token_strs must be a boolean", "return_token_strs");
    token_strs = t->get<bool>();
  }
  const bool chat = j.contains("messages");
  if (chat == j.contains("prompt"))
    return bad_request("the body needs exactly one of prompt and messages", chat ? "messages" : "prompt");
  // The same checks a completion or chat body gets; the model is fixed, and
  // one token of room is all a tokenization needs.
  j["model"] = std::string{ctx.model_name};
  j.erase("return_token_strs");
  j["max_tokens"] = 1;
  auto parsed = parse_request(chat ? api_kind::chat : api_kind::completion, j.dump(), ctx.limits);
  if (auto* e = std::get_if<api_error>(&parsed))
    return std::move(*e);
  auto& req = std::get<api_request>(parsed);
  auto ids = prepare_prompt(req, ctx.tokenizer, ctx.chat, ctx.max_model_len);
  if (auto* e = std::get_if<api_error>(&ids))
    return std::move(*e);
  const auto& tokens = std::get<std::vector<int32_t>>(ids);
  json out = {{"count", tokens.size()}, {"max_model_len", ctx.max_model_len}, {"tokens", tokens}};
  if (token_strs) {
    json strs = json::array();
    for (int32_t id : tokens)
      strs.push_back(ctx.tokenizer.id_to_token(id));
    out["token_strs"] = std::move(strs);
  }
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

api_result<std::string> detokenize_response(std::string_view body, const tokenize_context& ctx) {
  auto obj = object_of(body, ctx.limits);
  if (auto* e = std::get_if<api_error>(&obj))
    return std::move(*e);
  const auto& j = std::get<json>(obj);
  if (auto e = check_model(j, ctx))
    return std::move(*e);
  auto t = j.find("tokens");
  if (t == j.end() || !t->is_array())
    return bad_request("tokens must be an array of token ids", "tokens");
  if (t->size() > ctx.limits.max_prompt_token_ids)
    return bad_request("tokens has " + std::to_string(t->size()) + " ids, more than the limit of " +
                         std::to_string(ctx.limits.max_prompt_token_ids),
                       "tokens");
  const int32_t vocab = ctx.tokenizer.vocab_size();
  std::vector<int32_t> ids;
  ids.reserve(t->size());
  for (size_t i = 0; i < t->size(); ++i) {
    const auto& v = (*t)[i];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= vocab)
      return bad_request("tokens[" + std::to_string(i) + "] must be a token id in [0, " + std::to_string(vocab) +
                           ")",
                         "tokens");
    ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
  }
  json out = {{"prompt", ctx.tokenizer.decode(ids, /*skip_special=*/false)}};
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

} // namespace tessera::actors::frontend
