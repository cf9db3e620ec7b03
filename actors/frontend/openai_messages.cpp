// The chat request's `messages`: roles, content (a string or text parts),
// an assistant turn's tool_calls and a tool turn's tool_call_id, each
// checked with the limits of api_limits.
#include "actors/frontend/openai_fields.hpp"

#include <utility>

namespace tessera::actors::frontend::openai_detail {

namespace {

/// A message's content: a string, or an array of text parts.
std::optional<std::string> message_content(field_reader& r, const json& c,
                                           const std::string& name) {
  if (c.is_string())
    return r.string(c, name, r.limits().max_prompt_bytes);
  if (!c.is_array()) {
    r.fail(name + " must be a string or an array of text parts, got " + describe(c), name);
    return std::nullopt;
  }
  std::string text;
  for (size_t i = 0; i < c.size(); ++i) {
    const json& part = c[i];
    auto pname = name + "[" + std::to_string(i) + "]";
    if (!part.is_object()) {
      r.fail(pname + " must be an object {\"type\": \"text\", \"text\": ...}, got "
               + describe(part),
             pname);
      return std::nullopt;
    }
    auto type = part.find("type");
    if (type == part.end() || !type->is_string()) {
      r.fail(pname + ".type must be a string", pname + ".type");
      return std::nullopt;
    }
    if (*type != "text") {
      r.fail(pname + ".type " + describe(*type)
               + " is not supported; only \"text\" parts are",
             pname + ".type");
      return std::nullopt;
    }
    auto t = part.find("text");
    if (t == part.end() || t->is_null()) {
      r.fail(pname + ".text is required", pname + ".text");
      return std::nullopt;
    }
    auto s = r.string(*t, pname + ".text", r.limits().max_prompt_bytes);
    if (!s)
      return std::nullopt;
    // vLLM joins the text parts of one message with newlines.
    if (i > 0)
      text += '\n';
    text += *s;
  }
  return text;
}

/// An assistant message's tool_calls: [{id, type "function", function
/// {name, arguments}}], kept as JSON text for the chat template.
bool read_message_tool_calls(field_reader& r, const json& tc, const std::string& name,
                             chat_message& out) {
  if (!tc.is_array()) {
    r.fail(name + " must be an array of {id, type, function} objects, got " + describe(tc), name);
    return false;
  }
  for (size_t k = 0; k < tc.size(); ++k) {
    const json& c = tc[k];
    auto at = name + "[" + std::to_string(k) + "]";
    if (!c.is_object()) {
      r.fail(at + " must be an object {id, type, function}", at);
      return false;
    }
    if (auto id = c.find("id"); id != c.end() && !id->is_null() && !r.string(*id, at + ".id", r.limits().max_id_bytes))
      return false;
    if (auto t = c.find("type"); t != c.end() && !t->is_null() && *t != "function") {
      r.fail(at + ".type must be \"function\"", at + ".type");
      return false;
    }
    auto fn = c.find("function");
    if (fn == c.end() || !fn->is_object()) {
      r.fail(at + ".function must be an object {name, arguments}", at + ".function");
      return false;
    }
    auto fname = fn->find("name");
    if (fname == fn->end() || !r.string(*fname, at + ".function.name", 64))
      return false;
    auto args = fn->find("arguments");
    if (args == fn->end() || !r.string(*args, at + ".function.arguments", r.limits().max_prompt_bytes))
      return false;
  }
  out.tool_calls = tc.dump(-1, ' ', false, json::error_handler_t::replace);
  return true;
}

} // namespace

void read_messages(field_reader& r, api_request& req) {
  const json* m = r.get("messages");
  if (m == nullptr) {
    r.fail("messages is required", "messages");
    return;
  }
  if (!m->is_array()) {
    r.fail("messages must be an array of {role, content} objects, got " + describe(*m),
           "messages");
    return;
  }
  if (m->empty()) {
    r.fail("messages must not be empty", "messages");
    return;
  }
  if (m->size() > r.limits().max_messages) {
    r.fail("messages has " + std::to_string(m->size()) + " entries, more than the limit of "
             + std::to_string(r.limits().max_messages),
           "messages");
    return;
  }
  size_t total_bytes = 0;
  for (size_t i = 0; i < m->size(); ++i) {
    const json& msg = (*m)[i];
    auto name = "messages[" + std::to_string(i) + "]";
    if (!msg.is_object()) {
      r.fail(name + " must be an object {role, content}, got " + describe(msg), name);
      return;
    }
    auto role_it = msg.find("role");
    if (role_it == msg.end() || role_it->is_null()) {
      r.fail(name + ".role is required", name + ".role");
      return;
    }
    auto role = r.string(*role_it, name + ".role", 64);
    if (!role)
      return;
    if (*role == "developer") // OpenAI's newer name for the system role
      *role = "system";
    if (*role != "system" && *role != "user" && *role != "assistant" && *role != "tool") {
      r.fail(name + ".role must be one of system, user, assistant, tool, got "
               + describe(*role_it),
             name + ".role");
      return;
    }
    chat_message out;
    out.role = std::move(*role);
    if (auto tc = msg.find("tool_calls");
        tc != msg.end() && !tc->is_null() && !(tc->is_array() && tc->empty())) {
      if (out.role != "assistant") {
        r.fail(name + ".tool_calls is only allowed in assistant messages", name + ".tool_calls");
        return;
      }
      if (!read_message_tool_calls(r, *tc, name + ".tool_calls", out))
        return;
    }
    if (auto id = msg.find("tool_call_id"); id != msg.end() && !id->is_null()) {
      auto v = r.string(*id, name + ".tool_call_id", r.limits().max_id_bytes);
      if (!v)
        return;
      out.tool_call_id = std::move(*v);
    }
    auto content_it = msg.find("content");
    if (content_it == msg.end() || content_it->is_null()) {
      // An assistant turn may come without content (OpenAI allows it when
      // it carried tool calls); every other turn needs one.
      if (out.role != "assistant") {
        r.fail(name + ".content is required", name + ".content");
        return;
      }
    } else {
      auto content = message_content(r, *content_it, name + ".content");
      if (!content)
        return;
      out.content = std::move(*content);
    }
    total_bytes += out.content.size() + out.tool_calls.size();
    if (total_bytes > r.limits().max_prompt_bytes) {
      r.fail("messages hold more than " + std::to_string(r.limits().max_prompt_bytes)
               + " bytes of content, the prompt limit",
             "messages");
      return;
    }
    req.messages.push_back(std::move(out));
  }
}

} // namespace tessera::actors::frontend::openai_detail
