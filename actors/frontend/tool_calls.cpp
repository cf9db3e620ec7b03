#include "actors/frontend/tool_calls.hpp"

#include <algorithm>
#include <mutex>
#include <random>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "engine/grammar/json_schema.hpp"
#include "engine/utf8.hpp"

namespace tessera::actors::frontend {

namespace {

using ojson = nlohmann::ordered_json;

constexpr std::string_view open_tag = "<tool_call>";
constexpr std::string_view close_tag = "</tool_call>";
constexpr std::string_view python_tag = "<|python_tag|>";
constexpr int max_reply_depth = 64;

bool valid_name(std::string_view name) {
  if (name.empty() || name.size() > 64)
    return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '-';
  });
}

/// Parses `text` as JSON, refusing nesting deeper than `max_depth` before
/// it is built (so neither building nor dumping recurses deeply). Nullopt
/// when it is not JSON or too deep.
std::optional<ojson> parse_bounded(std::string_view text, int max_depth) {
  bool too_deep = false;
  try {
    auto doc = ojson::parse(
      text,
      [&](int depth, ojson::parse_event_t, ojson&) {
        if (depth > max_depth)
          too_deep = true;
        return !too_deep;
      },
      true);
    if (too_deep)
      return std::nullopt;
    return doc;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

std::string dump(const ojson& j) {
  return j.dump(-1, ' ', false, ojson::error_handler_t::replace);
}

std::string_view trim(std::string_view s) {
  auto ws = [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; };
  while (!s.empty() && ws(s.front()))
    s.remove_prefix(1);
  while (!s.empty() && ws(s.back()))
    s.remove_suffix(1);
  return s;
}

/// {"name": N, "arguments"|"parameters": {...}} naming an offered function
/// -> a call; else nullopt.
std::optional<tool_call> call_of(const tool_config& tools, const ojson& j) {
  if (!j.is_object())
    return std::nullopt;
  auto name = j.find("name");
  if (name == j.end() || !name->is_string() || !tools.offers(name->get_ref<const std::string&>()))
    return std::nullopt;
  auto args = j.find("arguments");
  if (args == j.end())
    args = j.find("parameters");
  if (args == j.end() || !(args->is_object() || args->is_null()))
    return std::nullopt;
  tool_call c;
  c.name = name->get<std::string>();
  c.arguments = args->is_null() ? "{}" : dump(*args);
  return c;
}

/// A JSON object or an array of them, each a call; nullopt if any is not.
std::optional<std::vector<tool_call>> calls_of(const tool_config& tools, std::string_view text) {
  auto doc = parse_bounded(trim(text), max_reply_depth);
  if (!doc)
    return std::nullopt;
  std::vector<tool_call> out;
  if (doc->is_array()) {
    if (doc->empty())
      return std::nullopt;
    for (const auto& e : *doc) {
      auto c = call_of(tools, e);
      if (!c)
        return std::nullopt;
      out.push_back(std::move(*c));
    }
    return out;
  }
  auto c = call_of(tools, *doc);
  if (!c)
    return std::nullopt;
  out.push_back(std::move(*c));
  return out;
}

parsed_reply parse_hermes(const tool_config& tools, std::string_view text, size_t first) {
  parsed_reply r;
  r.content = std::string{text.substr(0, first)};
  size_t at = first;
  while (at != std::string_view::npos && at < text.size()) {
    size_t body = at + open_tag.size();
    size_t end = text.find(close_tag, body);
    auto inner = text.substr(body, end == std::string_view::npos ? std::string_view::npos : end - body);
    auto calls = calls_of(tools, inner);
    if (!calls)
      return parsed_reply{std::string{text}, {}};
    for (auto& c : *calls)
      r.calls.push_back(std::move(c));
    if (end == std::string_view::npos)
      break;
    at = text.find(open_tag, end + close_tag.size());
  }
  return r;
}

parsed_reply parse_llama(const tool_config& tools, std::string_view text) {
  auto t = trim(text);
  if (t.starts_with(python_tag))
    t = trim(t.substr(python_tag.size()));
  if (!t.starts_with("{"))
    return parsed_reply{std::string{text}, {}};
  if (auto calls = calls_of(tools, t))
    return parsed_reply{"", std::move(*calls)};
  // Llama 3.1 separates parallel calls with ';'.
  parsed_reply r;
  size_t start = 0;
  while (start <= t.size()) {
    size_t semi = t.find(';', start);
    auto part = trim(t.substr(start, semi == std::string_view::npos ? std::string_view::npos
                                                                    : semi - start));
    if (!part.empty()) {
      auto calls = calls_of(tools, part);
      if (!calls)
        return parsed_reply{std::string{text}, {}};
      for (auto& c : *calls)
        r.calls.push_back(std::move(c));
    }
    if (semi == std::string_view::npos)
      break;
    start = semi + 1;
  }
  if (r.calls.empty())
    return parsed_reply{std::string{text}, {}};
  return r;
}

api_error field_error(std::string message, std::string param) {
  return bad_request(std::move(message), std::move(param));
}

} // namespace

bool tool_config::offers(std::string_view name) const {
  return std::any_of(functions.begin(), functions.end(),
                     [&](const tool_function& f) { return f.name == name; });
}

api_result<std::shared_ptr<const tool_config>> parse_tools(std::string_view body,
                                                          const tool_limits& limits) {
  auto doc = parse_bounded(body, limits.max_json_depth);
  if (!doc || !doc->is_object())
    return bad_request("the request body is not a JSON object within " +
                       std::to_string(limits.max_json_depth) + " levels of nesting");
  auto get = [&](const char* key) -> const ojson* {
    auto it = doc->find(key);
    return it == doc->end() || it->is_null() ? nullptr : &*it;
  };
  auto cfg = std::make_shared<tool_config>();

  const ojson* tools = get("tools");
  if (tools != nullptr) {
    if (!tools->is_array())
      return field_error("tools must be an array of {\"type\": \"function\", \"function\": "
                         "{...}} objects",
                         "tools");
    if (tools->size() > limits.max_tools)
      return field_error("tools has " + std::to_string(tools->size()) +
                           " entries, more than the limit of " + std::to_string(limits.max_tools),
                         "tools");
    std::set<std::string, std::less<>> names;
    for (size_t i = 0; i < tools->size(); ++i) {
      const ojson& t = (*tools)[i];
      const std::string at = "tools[" + std::to_string(i) + "]";
      if (!t.is_object())
        return field_error(at + " must be an object {\"type\": \"function\", \"function\": {...}}",
                           at);
      auto type = t.find("type");
      if (type == t.end() || !type->is_string() || *type != "function")
        return field_error(at + ".type must be \"function\"", at + ".type");
      auto fn = t.find("function");
      if (fn == t.end() || !fn->is_object())
        return field_error(at + ".function must be an object {name, description, parameters}",
                           at + ".function");
      auto name = fn->find("name");
      if (name == fn->end() || !name->is_string() ||
          !valid_name(name->get_ref<const std::string&>()))
        return field_error(at + ".function.name must be 1 to 64 letters, digits, '_' or '-'" +
                             (name != fn->end() && name->is_string()
                                ? ", got " + quote_input(name->get<std::string>())
                                : std::string{}),
                           at + ".function.name");
      if (!names.insert(name->get<std::string>()).second)
        return field_error(at + ".function.name " + quote_input(name->get<std::string>()) +
                             " is given twice",
                           at + ".function.name");
      if (auto d = fn->find("description"); d != fn->end() && !d->is_null()) {
        if (!d->is_string())
          return field_error(at + ".function.description must be a string",
                             at + ".function.description");
        if (d->get_ref<const std::string&>().size() > limits.max_description_bytes)
          return field_error(at + ".function.description is over the limit of " +
                               std::to_string(limits.max_description_bytes) + " bytes",
                             at + ".function.description");
      }
      if (auto s = fn->find("strict"); s != fn->end() && !s->is_null() && !s->is_boolean())
        return field_error(at + ".function.strict must be a boolean", at + ".function.strict");
      tool_function f;
      f.name = name->get<std::string>();
      auto params = fn->find("parameters");
      if (params == fn->end() || params->is_null()) {
        f.parameters = R"({"type":"object","properties":{},"additionalProperties":false})";
      } else {
        if (!params->is_object())
          return field_error(at + ".function.parameters must be a JSON Schema object",
                             at + ".function.parameters");
        f.parameters = dump(*params);
        if (f.parameters.size() > limits.max_schema_bytes)
          return field_error(at + ".function.parameters is " +
                               std::to_string(f.parameters.size()) + " bytes, over the limit of " +
                               std::to_string(limits.max_schema_bytes),
                             at + ".function.parameters");
      }
      cfg->functions.push_back(std::move(f));
    }
    cfg->tools_json = dump(*tools);
  }

  if (const ojson* tc = get("tool_choice")) {
    if (tc->is_string()) {
      const auto& s = tc->get_ref<const std::string&>();
      if (s == "none")
        cfg->choice = tool_choice_kind::none;
      else if (s == "auto")
        cfg->choice = tool_choice_kind::auto_;
      else if (s == "required")
        cfg->choice = tool_choice_kind::required;
      else
        return field_error("tool_choice must be \"none\", \"auto\", \"required\" or "
                           "{\"type\": \"function\", \"function\": {\"name\": ...}}, got " +
                             quote_input(s),
                           "tool_choice");
    } else if (tc->is_object()) {
      auto type = tc->find("type");
      auto fn = tc->find("function");
      auto name = fn != tc->end() && fn->is_object() ? fn->find("name") : tc->end();
      if (type == tc->end() || !type->is_string() || *type != "function" || fn == tc->end() ||
          !fn->is_object() || name == fn->end() || !name->is_string())
        return field_error("tool_choice must be {\"type\": \"function\", \"function\": "
                           "{\"name\": ...}} when an object",
                           "tool_choice");
      cfg->choice = tool_choice_kind::named;
      cfg->named = name->get<std::string>();
      if (!cfg->offers(cfg->named))
        return field_error("tool_choice.function.name " + quote_input(cfg->named) +
                             " is not one of the tools",
                           "tool_choice.function.name");
    } else {
      return field_error("tool_choice must be a string or an object", "tool_choice");
    }
  }
  if (const ojson* p = get("parallel_tool_calls")) {
    if (!p->is_boolean())
      return field_error("parallel_tool_calls must be a boolean", "parallel_tool_calls");
    cfg->parallel = p->get<bool>();
  }
  if (cfg->functions.empty()) {
    if (cfg->choice == tool_choice_kind::required || cfg->choice == tool_choice_kind::named)
      return field_error("tool_choice requires tools", "tool_choice");
    return std::shared_ptr<const tool_config>{};
  }
  if (cfg->choice == tool_choice_kind::none)
    return std::shared_ptr<const tool_config>{};

  if (cfg->choice == tool_choice_kind::required || cfg->choice == tool_choice_kind::named) {
    engine::grammar::json_grammar_options opts;
    opts.limits.max_nodes = limits.max_grammar_nodes;
    const auto schema = call_schema(*cfg);
    if (schema.size() > limits.max_call_schema_bytes)
      return field_error("tools: the schema of the call is " + std::to_string(schema.size()) +
                           " bytes, over the limit of " +
                           std::to_string(limits.max_call_schema_bytes),
                         "tools");
    // Each tool on its own first, so an error names the tool.
    for (size_t i = 0; i < cfg->functions.size(); ++i) {
      const auto& f = cfg->functions[i];
      if (cfg->choice == tool_choice_kind::named && f.name != cfg->named)
        continue;
      auto r = engine::grammar::compile_json_schema_text(f.parameters, opts);
      const std::string at = "tools[" + std::to_string(i) + "].function.parameters";
      if (!r.ok())
        return field_error(at + ": " + r.error.text(), at);
    }
    if (cfg->choice == tool_choice_kind::required) {
      auto r = engine::grammar::compile_json_schema_text(schema, opts);
      if (!r.ok())
        return field_error("tools: the schema of a required call over all tools is refused: " +
                             r.error.text(),
                           "tools");
    }
  }
  return std::shared_ptr<const tool_config>{std::move(cfg)};
}

std::string call_schema(const tool_config& tools) {
  if (tools.choice == tool_choice_kind::named) {
    for (const auto& f : tools.functions)
      if (f.name == tools.named)
        return f.parameters;
    return {};
  }
  if (tools.choice != tool_choice_kind::required)
    return {};
  ojson any = ojson::array();
  for (const auto& f : tools.functions) {
    ojson one = ojson::object();
    one["type"] = "object";
    ojson props = ojson::object();
    props["name"] = ojson{{"const", f.name}};
    props["parameters"] = ojson::parse(f.parameters);
    one["properties"] = std::move(props);
    one["required"] = ojson::array({"name", "parameters"});
    one["additionalProperties"] = false;
    any.push_back(std::move(one));
  }
  ojson item = ojson::object();
  item["anyOf"] = std::move(any);
  if (!tools.parallel)
    return dump(item);
  ojson arr = ojson::object();
  arr["type"] = "array";
  arr["minItems"] = 1;
  arr["items"] = std::move(item);
  return dump(arr);
}

std::string make_tool_call_id() {
  static std::mutex mu;
  static std::mt19937_64 rng{std::random_device{}()};
  static constexpr std::string_view alphabet =
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string id = "call_";
  std::lock_guard lock{mu};
  for (int i = 0; i < 24; ++i)
    id += alphabet[std::uniform_int_distribution<size_t>{0, alphabet.size() - 1}(rng)];
  return id;
}

parsed_reply parse_tool_reply(const tool_config& tools, std::string_view text) {
  parsed_reply r;
  switch (tools.choice) {
    case tool_choice_kind::none:
      r.content = std::string{text};
      return r;
    case tool_choice_kind::named:
      r.calls.push_back(tool_call{"", tools.named, std::string{text}});
      break;
    case tool_choice_kind::required:
      if (auto calls = calls_of(tools, text))
        r.calls = std::move(*calls);
      else
        r.content = std::string{text};
      break;
    case tool_choice_kind::auto_:
      if (auto first = text.find(open_tag); first != std::string_view::npos)
        r = parse_hermes(tools, text, first);
      else
        r = parse_llama(tools, text);
      break;
  }
  if (!r.calls.empty() && trim(r.content).empty())
    r.content.clear();
  for (auto& c : r.calls)
    c.id = make_tool_call_id();
  return r;
}

size_t releasable_content(std::string_view text, size_t released) {
  released = std::min(released, text.size());
  size_t lead = text.find_first_not_of(" \n\t\r");
  if (lead == std::string_view::npos)
    return released; // only whitespace so far: wait
  auto rest = text.substr(lead);
  if (released <= lead &&
      (rest.starts_with("{") || rest.starts_with(python_tag) ||
       python_tag.starts_with(rest.substr(0, python_tag.size()))))
    return released; // a Llama 3.1 call may be coming: hold to the end
  if (auto tag = text.find(open_tag, released); tag != std::string_view::npos)
    return std::max(released, tag);
  // Hold a possible start of "<tool_call>" at the end.
  size_t keep = 0;
  for (size_t k = std::min(open_tag.size() - 1, text.size()); k > 0; --k)
    if (open_tag.starts_with(text.substr(text.size() - k))) {
      keep = k;
      break;
    }
  return std::max(released, text.size() - keep);
}

std::string tools_preamble(const tool_config& tools) {
  // Short, so small contexts have room: the Hermes format, which
  // parse_tool_reply reads back.
  std::string out = "You can call these functions:\n<tools>";
  auto arr = parse_bounded(tools.tools_json, 1 << 20);
  if (arr && arr->is_array())
    for (const auto& t : *arr) {
      out += '\n';
      out += dump(t);
    }
  out += "\n</tools>\nTo call one, reply with <tool_call>{\"name\": <function-name>, "
         "\"arguments\": <args-json-object>}</tool_call>.";
  return out;
}

} // namespace tessera::actors::frontend
