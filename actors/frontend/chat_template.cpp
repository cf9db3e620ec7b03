#include "actors/frontend/chat_template.hpp"

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>
#include <utility>

#include <nlohmann/json.hpp>

#include "engine/jinja/template.hpp"
#include "engine/tokenizer.hpp"
#include "engine/utf8.hpp"

namespace tessera::actors::frontend {

namespace {

constexpr std::array<std::string_view, 4> family_names = {"llama3", "chatml", "mistral",
                                                          "llama2"};

bool has(std::string_view s, std::string_view marker) {
  return s.find(marker) != std::string_view::npos;
}

/// The start of `source` for an error message, JSON-quoted so control
/// characters and invalid bytes show harmlessly.
std::string excerpt(std::string_view source) {
  constexpr size_t max_bytes = 80;
  auto cut = engine::utf8_sanitize(source.substr(0, max_bytes));
  auto quoted = nlohmann::json(cut).dump(-1, ' ', false,
                                         nlohmann::json::error_handler_t::replace);
  return source.size() > max_bytes ? quoted + "..." : quoted;
}

/// Decodes the code point of well-formed UTF-8 starting at s[i] and its
/// length.
char32_t decode_at(std::string_view s, size_t i, size_t& len) {
  auto b = static_cast<uint8_t>(s[i]);
  if (b < 0x80) {
    len = 1;
    return b;
  }
  int n = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
  char32_t cp = b & (n == 2 ? 0x1F : n == 3 ? 0x0F : 0x07);
  for (int k = 1; k < n && i + static_cast<size_t>(k) < s.size(); ++k)
    cp = (cp << 6) | (static_cast<uint8_t>(s[i + static_cast<size_t>(k)]) & 0x3F);
  len = static_cast<size_t>(n);
  return cp;
}

/// Python's str.isspace(), which Jinja's `trim` and `.strip()` use.
bool is_py_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0
         || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029
         || c == 0x202F || c == 0x205F || c == 0x3000;
}

/// Python's str.strip() (str.rstrip() when !left) on well-formed UTF-8.
std::string_view py_strip(std::string_view s, bool left = true) {
  size_t begin = 0;
  while (left && begin < s.size()) {
    size_t len = 0;
    if (!is_py_space(decode_at(s, begin, len)))
      break;
    begin += len;
  }
  size_t end = s.size();
  while (end > begin) {
    size_t start = end - 1;
    while (start > begin && (static_cast<uint8_t>(s[start]) & 0xC0) == 0x80)
      --start;
    size_t len = 0;
    if (!is_py_space(decode_at(s, start, len)))
      break;
    end = start;
  }
  return s.substr(begin, end - begin);
}

/// The default system message of a ChatML template: the literal text of
/// a `'<|im_start|>system\n...<|im_end|>'` string in it (Qwen2's "You are
/// a helpful assistant."). Occurrences followed by an expression (Qwen2.5's
/// tools branch) are skipped.
std::string chatml_default_system(std::string_view source) {
  constexpr std::string_view open = "<|im_start|>system";
  constexpr std::string_view close = "<|im_end|>";
  for (size_t pos = source.find(open); pos != std::string_view::npos;
       pos = source.find(open, pos + 1)) {
    auto rest = source.substr(pos + open.size());
    // In tokenizer_config.json the newline is either a real one (the JSON
    // said "\n") or a Jinja escape (the JSON said "\\n").
    if (rest.starts_with("\n"))
      rest.remove_prefix(1);
    else if (rest.starts_with("\\n"))
      rest.remove_prefix(2);
    else
      continue;
    auto end = rest.find(close);
    if (end == std::string_view::npos)
      continue;
    auto literal = rest.substr(0, end);
    if (literal.empty() || literal.find_first_of("'\"{}+") != std::string_view::npos)
      continue;
    std::string out;
    for (size_t i = 0; i < literal.size(); ++i) {
      if (literal[i] == '\\' && i + 1 < literal.size() && literal[i + 1] == 'n') {
        out += '\n';
        ++i;
      } else {
        out += literal[i];
      }
    }
    return out;
  }
  return {};
}

std::string family_list() {
  std::string out;
  for (auto n : family_names) {
    if (!out.empty())
      out += ", ";
    out += n;
  }
  return out;
}

api_error role_error(size_t i, std::string_view family, std::string_view problem) {
  return bad_request("messages[" + std::to_string(i) + "]: the " + std::string{family}
                       + " chat format " + std::string{problem},
                     "messages");
}

/// Splits off an optional leading system message and checks that the rest
/// alternates user/assistant starting with user (the check the mistral and
/// llama2 templates make with raise_exception).
std::optional<api_error> check_alternation(std::span<const chat_message> messages,
                                           std::string_view family, size_t& first,
                                           const chat_message*& system) {
  first = 0;
  system = nullptr;
  if (!messages.empty() && messages[0].role == "system") {
    system = &messages[0];
    first = 1;
  }
  if (first == messages.size())
    return role_error(messages.size() - 1, family,
                      "needs a user message after the system message");
  for (size_t i = first; i < messages.size(); ++i) {
    const auto& role = messages[i].role;
    bool want_user = (i - first) % 2 == 0;
    if (role == "system")
      return role_error(i, family, "takes a system message only as the first message");
    if (role != "user" && role != "assistant")
      return role_error(i, family,
                        "has no " + role
                          + " messages; it takes system (first), user and assistant");
    if ((role == "user") != want_user)
      return role_error(i, family,
                        "needs user and assistant messages to alternate, starting with user; got "
                          + role);
  }
  return std::nullopt;
}

/// Appends template text and data to a prompt's text and runs.
class prompt_builder {
public:
  explicit prompt_builder(chat_prompt& p) : p_(p) {}
  void tmpl(std::string_view s) { add(s, false); }
  void data(std::string_view s) { add(s, true); }

private:
  void add(std::string_view s, bool from_data) {
    if (s.empty())
      return;
    p_.text += s;
    if (!p_.runs.empty() && p_.runs.back().from_data == from_data)
      p_.runs.back().text += s;
    else
      p_.runs.push_back(prompt_run{std::string{s}, from_data});
  }
  chat_prompt& p_;
};

chat_prompt render_llama3(std::span<const chat_message> messages,
                          const chat_special_tokens& tokens, bool add_generation_prompt) {
  chat_prompt p;
  prompt_builder b(p);
  b.tmpl(tokens.bos);
  for (const auto& m : messages) {
    b.tmpl("<|start_header_id|>");
    b.data(m.role);
    b.tmpl("<|end_header_id|>\n\n");
    b.data(py_strip(m.content));
    b.tmpl("<|eot_id|>");
  }
  if (add_generation_prompt)
    b.tmpl("<|start_header_id|>assistant<|end_header_id|>\n\n");
  return p;
}

chat_prompt render_chatml(const chat_template& tmpl, std::span<const chat_message> messages,
                          const chat_special_tokens& tokens, bool add_generation_prompt) {
  chat_prompt p;
  prompt_builder b(p);
  if (!tmpl.default_system.empty() && messages.front().role != "system")
    b.tmpl("<|im_start|>system\n" + tmpl.default_system + "<|im_end|>\n");
  for (const auto& m : messages) {
    b.tmpl("<|im_start|>");
    b.data(m.role);
    b.tmpl("\n");
    b.data(m.content);
    b.tmpl("<|im_end|>\n");
  }
  if (add_generation_prompt)
    b.tmpl("<|im_start|>assistant\n");
  // ChatML templates write no BOS; the tokenizer's own, if it adds one.
  p.add_bos = tokens.tokenizer_adds_bos && !tokens.bos.empty();
  return p;
}

api_result<chat_prompt> render_mistral(const chat_template& tmpl,
                                       std::span<const chat_message> messages,
                                       const chat_special_tokens& tokens) {
  size_t first = 0;
  const chat_message* system = nullptr;
  if (auto err = check_alternation(messages, "mistral", first, system))
    return std::move(*err);
  const bool spaced = tmpl.mistral_spaced;
  chat_prompt p;
  prompt_builder b(p);
  b.tmpl(tokens.bos);
  for (size_t i = first; i < messages.size(); ++i) {
    const auto& m = messages[i];
    if (m.role == "user") {
      b.tmpl(spaced ? " [INST] " : "[INST] ");
      // The original v0.2 template refuses a system message; the 2024 one
      // puts it before the first user message. Both get the latter here.
      if (i == first && system != nullptr) {
        b.data(system->content);
        b.tmpl("\n\n");
      }
      b.data(m.content);
      b.tmpl(" [/INST]");
    } else {
      if (spaced)
        b.tmpl(" ");
      b.data(m.content);
      b.tmpl(tokens.eos);
    }
  }
  return p;
}

api_result<chat_prompt> render_llama2(std::span<const chat_message> messages,
                                      const chat_special_tokens& tokens) {
  size_t first = 0;
  const chat_message* system = nullptr;
  if (auto err = check_alternation(messages, "llama2", first, system))
    return std::move(*err);
  chat_prompt p;
  prompt_builder b(p);
  for (size_t i = first; i < messages.size(); ++i) {
    const auto& m = messages[i];
    const bool with_system = i == first && system != nullptr;
    // The template strips "<<SYS>>...<</SYS>>\n\n" + content as a whole:
    // with the system block in front only the content's end is stripped.
    auto content = with_system ? py_strip(m.content, false) : py_strip(m.content);
    if (m.role == "user") {
      b.tmpl(tokens.bos);
      b.tmpl("[INST] ");
    } else {
      b.tmpl(" ");
    }
    if (with_system) {
      b.tmpl("<<SYS>>\n");
      b.data(system->content);
      // An all-space content: the strip reaches the "\n\n" too.
      b.tmpl(content.empty() ? "\n<</SYS>>" : "\n<</SYS>>\n\n");
    }
    b.data(content);
    if (m.role == "user") {
      b.tmpl(" [/INST]");
    } else {
      b.tmpl(" ");
      b.tmpl(tokens.eos);
    }
  }
  return p;
}

/// Reads a whole file; nullopt if it cannot be read.
std::optional<std::string> read_text_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad())
    return std::nullopt;
  return std::move(ss).str();
}

} // namespace

std::string_view to_string(chat_template_family f) {
  return family_names[static_cast<size_t>(f)];
}

std::optional<chat_template_family> family_from_name(std::string_view name) {
  for (size_t i = 0; i < family_names.size(); ++i)
    if (family_names[i] == name)
      return static_cast<chat_template_family>(i);
  return std::nullopt;
}

api_result<chat_template> detect_chat_template(std::string_view source) {
  if (py_strip(source).empty())
    return bad_request("the model has no chat template, so it cannot serve chat completions; "
                       "use /v1/completions or pass --chat-template ("
                       + family_list() + ", or a template file)");
  const bool llama3 = has(source, "<|start_header_id|>") && has(source, "<|end_header_id|>")
                      && has(source, "<|eot_id|>");
  const bool chatml = has(source, "<|im_start|>") && has(source, "<|im_end|>");
  const bool inst = has(source, "[INST]") && has(source, "[/INST]");
  std::vector<std::string_view> found;
  if (llama3)
    found.push_back("llama3");
  if (chatml)
    found.push_back("chatml");
  if (inst)
    found.push_back(has(source, "<<SYS>>") ? "llama2" : "mistral");
  if (found.empty())
    return bad_request("unknown chat template: no markers of " + family_list()
                       + " in " + excerpt(source) + "; pass --chat-template with a family name");
  if (found.size() > 1)
    return bad_request("ambiguous chat template: it has the markers of both "
                       + std::string{found[0]} + " and " + std::string{found[1]}
                       + "; pass --chat-template with a family name");
  chat_template t;
  t.family = *family_from_name(found[0]);
  if (t.family == chat_template_family::chatml)
    t.default_system = chatml_default_system(source);
  if (t.family == chat_template_family::mistral) {
    for (auto newer : {"[SYSTEM_PROMPT]", "[AVAILABLE_TOOLS]"})
      if (has(source, newer))
        return bad_request(std::string{"chat template of a newer Mistral format (it uses "}
                           + newer
                           + ") that Tessera does not render; pass --chat-template mistral "
                             "for the v0.2 format");
    t.mistral_spaced = has(source, "' [INST] '") || has(source, "\" [INST] \"");
  }
  return t;
}

api_result<chat_template> compile_chat_template(std::string_view source,
                                                std::string_view origin) {
  if (py_strip(source).empty())
    return bad_request("the model has no chat template, so it cannot serve chat completions; "
                       "use /v1/completions or pass --chat-template ("
                       + family_list() + ", or a template file)");
  auto compiled = jinja::compiled_template::compile(source);
  if (auto* e = std::get_if<jinja::error>(&compiled))
    return bad_request(std::string{origin} + " cannot be used: " + e->message);
  chat_template t;
  t.jinja = std::make_shared<const jinja::compiled_template>(
    std::get<jinja::compiled_template>(std::move(compiled)));
  // The family, for logs and the built-in fallback's details.
  if (auto detected = detect_chat_template(source); auto* d = std::get_if<chat_template>(&detected)) {
    t.family = d->family;
    t.default_system = d->default_system;
    t.mistral_spaced = d->mistral_spaced;
  }
  // Render once, so a template that fails on any conversation fails now.
  auto probe = nlohmann::ordered_json::array({{{"role", "user"}, {"content", "Hello"}}});
  auto r = render_chat_json(t, probe, nullptr, chat_special_tokens{"<s>", "</s>", false}, true);
  if (auto* e = std::get_if<api_error>(&r))
    return bad_request(std::string{origin}
                       + " fails on a one-message conversation: " + e->message);
  return t;
}

api_result<chat_template> resolve_chat_template(std::string_view tokenizer_template,
                                                std::string_view override_value) {
  if (override_value.empty())
    return compile_chat_template(tokenizer_template, "the model's chat template");
  if (auto family = family_from_name(override_value)) {
    // Keep the details the model's own template gives when it is of the
    // named family (Qwen2's default system message).
    auto detected = detect_chat_template(tokenizer_template);
    if (auto* t = std::get_if<chat_template>(&detected); t && t->family == *family)
      return std::move(*t);
    chat_template t2;
    t2.family = *family;
    t2.mistral_spaced = *family == chat_template_family::mistral;
    return t2;
  }
  // vLLM's --chat-template also takes the template itself.
  if (has(override_value, "{{") || has(override_value, "{%"))
    return compile_chat_template(override_value, "--chat-template");
  std::string path{override_value};
  auto text = read_text_file(path);
  if (!text)
    return bad_request("--chat-template '" + path + "' is neither a family name ("
                       + family_list() + ") nor a readable file");
  auto compiled = compile_chat_template(*text, "the template");
  if (auto* e = std::get_if<api_error>(&compiled))
    e->message = "--chat-template file '" + path + "': " + e->message;
  return compiled;
}

chat_special_tokens special_tokens_of(const engine::tokenizer& tok) {
  const auto& s = tok.settings();
  chat_special_tokens t;
  if (s.bos_id)
    t.bos = tok.id_to_token(*s.bos_id);
  if (!s.eos_ids.empty())
    t.eos = tok.id_to_token(s.eos_ids.front());
  t.tokenizer_adds_bos = s.add_bos && s.bos_id.has_value();
  return t;
}

namespace {

bool known_role(std::string_view role) {
  return role == "system" || role == "user" || role == "assistant" || role == "tool";
}

api_error unknown_role(size_t i, std::string_view role) {
  return bad_request("messages[" + std::to_string(i) + "].role must be one of system, user, "
                       "assistant, tool, got " + excerpt(role),
                     "messages");
}

/// Renders with the Jinja template: messages and tools are data; the
/// special tokens and the flag are the template's.
api_result<chat_prompt> render_jinja(const chat_template& tmpl,
                                     const nlohmann::ordered_json& messages,
                                     const nlohmann::ordered_json& tools,
                                     const chat_special_tokens& tokens,
                                     bool add_generation_prompt) {
  nlohmann::ordered_json data = {{"messages", messages}};
  if (!tools.is_null())
    data["tools"] = tools;
  nlohmann::ordered_json trusted = {{"bos_token", tokens.bos},
                                    {"eos_token", tokens.eos},
                                    {"add_generation_prompt", add_generation_prompt}};
  auto r = tmpl.jinja->render(data, trusted);
  if (auto* e = std::get_if<jinja::error>(&r))
    return bad_request(e->raised ? "the chat template refused the conversation: " + e->message
                                 : "the chat template failed on this conversation: " + e->message,
                       "messages");
  chat_prompt p;
  for (auto& run : std::get<std::vector<jinja::run>>(r)) {
    p.text += run.text;
    p.runs.push_back(prompt_run{std::move(run.text), run.from_data});
  }
  p.add_bos = tokens.tokenizer_adds_bos && !tokens.bos.empty() && !p.text.starts_with(tokens.bos);
  return p;
}

} // namespace

api_result<chat_prompt> render_chat_json(const chat_template& tmpl,
                                         const nlohmann::ordered_json& messages,
                                         const nlohmann::ordered_json& tools,
                                         const chat_special_tokens& tokens,
                                         bool add_generation_prompt) {
  if (!messages.is_array() || messages.empty())
    return bad_request("messages must not be empty", "messages");
  for (size_t i = 0; i < messages.size(); ++i) {
    const auto& m = messages[i];
    auto role = m.is_object() ? m.find("role") : m.end();
    if (!m.is_object() || role == m.end() || !role->is_string())
      return bad_request("messages[" + std::to_string(i) + "] needs a string role", "messages");
    if (!known_role(role->get_ref<const std::string&>()))
      return unknown_role(i, role->get_ref<const std::string&>());
  }
  if (tmpl.jinja)
    return render_jinja(tmpl, messages, tools, tokens, add_generation_prompt);
  std::vector<chat_message> plain;
  for (size_t i = 0; i < messages.size(); ++i) {
    const auto& m = messages[i];
    auto content = m.find("content");
    if (content == m.end() || !content->is_string())
      return bad_request("messages[" + std::to_string(i) + "]: the built-in " + std::string{to_string(tmpl.family)}
                           + " chat format takes string contents only",
                         "messages");
    plain.push_back(chat_message{m["role"].get<std::string>(), content->get<std::string>()});
  }
  return render_chat(tmpl, plain, tokens, add_generation_prompt);
}

api_result<chat_prompt> render_chat(const chat_template& tmpl,
                                    std::span<const chat_message> messages,
                                    const chat_special_tokens& tokens,
                                    bool add_generation_prompt) {
  if (messages.empty())
    return bad_request("messages must not be empty", "messages");
  for (size_t i = 0; i < messages.size(); ++i)
    if (!known_role(messages[i].role))
      return unknown_role(i, messages[i].role);
  if (tmpl.jinja) {
    auto json_messages = nlohmann::ordered_json::array();
    for (const auto& m : messages)
      json_messages.push_back({{"role", m.role}, {"content", m.content}});
    return render_jinja(tmpl, json_messages, nullptr, tokens, add_generation_prompt);
  }
  switch (tmpl.family) {
    case chat_template_family::llama3:
      return render_llama3(messages, tokens, add_generation_prompt);
    case chat_template_family::chatml:
      return render_chatml(tmpl, messages, tokens, add_generation_prompt);
    case chat_template_family::mistral:
      return render_mistral(tmpl, messages, tokens);
    case chat_template_family::llama2:
      return render_llama2(messages, tokens);
  }
  return internal_error("unknown chat template family");
}

namespace {

using ojson = nlohmann::ordered_json;

/// JSON text parsed with nesting refused beyond 64 levels; discarded on
/// any error.
ojson parse_shallow(std::string_view text) {
  bool too_deep = false;
  auto j = ojson::parse(
    text,
    [&](int depth, ojson::parse_event_t, ojson&) {
      if (depth > 64)
        too_deep = true;
      return !too_deep;
    },
    false);
  if (too_deep)
    return ojson(ojson::value_t::discarded);
  return j;
}

/// A message as a template reads it.
ojson message_json(const chat_message& m) {
  ojson j = ojson::object();
  j["role"] = m.role;
  j["content"] = m.content;
  if (!m.tool_calls.empty()) {
    auto calls = parse_shallow(m.tool_calls);
    if (calls.is_array()) {
      for (auto& c : calls) {
        if (!c.is_object() || !c.contains("function") || !c["function"].is_object())
          continue;
        auto& fn = c["function"];
        if (auto a = fn.find("arguments"); a != fn.end() && a->is_string()) {
          auto args = parse_shallow(a->get_ref<const std::string&>());
          if (args.is_object())
            *a = std::move(args);
        }
      }
      j["tool_calls"] = std::move(calls);
    }
  }
  if (!m.tool_call_id.empty())
    j["tool_call_id"] = m.tool_call_id;
  return j;
}

/// The messages for a template without tool support: calls written as
/// Hermes `<tool_call>` text, tool results as user turns, the tools in the
/// system message.
std::vector<chat_message> messages_with_preamble(const api_request& req) {
  std::vector<chat_message> out;
  for (const auto& m : req.messages) {
    chat_message p{m.role, m.content};
    if (m.role == "tool") {
      p.role = "user";
      p.content = "<tool_response>\n" + m.content + "\n</tool_response>";
    }
    auto calls = m.tool_calls.empty() ? ojson() : parse_shallow(m.tool_calls);
    if (calls.is_array())
      for (const auto& c : calls) {
        if (!c.is_object() || !c.contains("function") || !c["function"].is_object())
          continue;
        const auto& fn = c["function"];
        std::string name = fn.contains("name") && fn["name"].is_string() ? fn["name"].get<std::string>() : "";
        std::string args = fn.contains("arguments") && fn["arguments"].is_string()
                             ? fn["arguments"].get<std::string>()
                             : "{}";
        if (!p.content.empty())
          p.content += "\n";
        p.content += "<tool_call>\n{\"name\": " + ojson(name).dump(-1, ' ', false, ojson::error_handler_t::replace) +
                     ", \"arguments\": " + args + "}\n</tool_call>";
      }
    out.push_back(std::move(p));
  }
  if (req.tools) {
    auto preamble = tools_preamble(*req.tools);
    if (!out.empty() && out.front().role == "system")
      out.front().content += "\n\n" + preamble;
    else
      out.insert(out.begin(), chat_message{"system", std::move(preamble)});
  }
  return out;
}

} // namespace

api_result<chat_prompt> render_chat_request(const chat_template& tmpl, const api_request& req,
                                            const chat_special_tokens& tokens) {
  const bool any_calls = std::any_of(req.messages.begin(), req.messages.end(),
                                     [](const chat_message& m) { return !m.tool_calls.empty(); });
  if (tmpl.jinja) {
    auto msgs = ojson::array();
    for (const auto& m : req.messages)
      msgs.push_back(message_json(m));
    ojson tools = req.tools ? parse_shallow(req.tools->tools_json) : ojson();
    if (tools.is_discarded())
      tools = nullptr;
    auto with = render_chat_json(tmpl, msgs, tools, tokens, req.add_generation_prompt);
    if (tools.is_null() || std::holds_alternative<api_error>(with))
      return with;
    auto without = render_chat_json(tmpl, msgs, nullptr, tokens, req.add_generation_prompt);
    if (auto* w = std::get_if<chat_prompt>(&without);
        w == nullptr || w->text != std::get<chat_prompt>(with).text)
      return with;
    // The template ignores tools: describe them in the system message.
  } else if (!req.tools && !any_calls) {
    return render_chat(tmpl, req.messages, tokens, req.add_generation_prompt);
  }
  auto plain = messages_with_preamble(req);
  return render_chat(tmpl, plain, tokens, req.add_generation_prompt);
}

std::vector<int32_t> encode_chat_prompt(const engine::tokenizer& tok, const chat_prompt& prompt) {
  std::vector<int32_t> ids;
  if (prompt.add_bos && tok.settings().bos_id)
    ids.push_back(*tok.settings().bos_id);
  // Plain text accumulates across runs (so a benign prompt tokenizes as
  // one text would) and is cut only at special tokens of template runs.
  std::string plain;
  auto flush = [&] {
    if (plain.empty())
      return;
    auto part = tok.encode(plain, /*add_bos=*/false, /*parse_special=*/false);
    ids.insert(ids.end(), part.begin(), part.end());
    plain.clear();
  };
  std::vector<prompt_run> runs = prompt.runs;
  if (runs.empty() && !prompt.text.empty())
    runs.push_back(prompt_run{prompt.text, false}); // a prompt built by hand: all template
  for (const auto& run : runs) {
    if (run.from_data) {
      plain += run.text;
      continue;
    }
    // The special tokens this template text holds, as the tokenizer
    // matches them (longest first, left to right).
    std::vector<std::pair<std::string, int32_t>> specials;
    for (int32_t id : tok.encode(run.text, /*add_bos=*/false, /*parse_special=*/true))
      if (tok.is_special(id)) {
        auto text = tok.token_bytes(id);
        if (!text.empty()
            && std::find_if(specials.begin(), specials.end(),
                            [&](const auto& s) { return s.second == id; }) == specials.end())
          specials.emplace_back(std::move(text), id);
      }
    if (specials.empty()) {
      plain += run.text;
      continue;
    }
    std::sort(specials.begin(), specials.end(),
              [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
    std::string_view t = run.text;
    for (size_t i = 0; i < t.size();) {
      auto hit = std::find_if(specials.begin(), specials.end(),
                              [&](const auto& s) { return t.substr(i).starts_with(s.first); });
      if (hit == specials.end()) {
        plain += t[i++];
        continue;
      }
      flush();
      ids.push_back(hit->second);
      i += hit->first.size();
    }
  }
  flush();
  return ids;
}

} // namespace tessera::actors::frontend
