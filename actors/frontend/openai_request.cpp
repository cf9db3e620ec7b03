#include "actors/frontend/openai_request.hpp"

#include "actors/frontend/response_format.hpp"
#include "actors/frontend/tenant_limits.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "engine/utf8.hpp"

namespace tessera::actors::frontend {

namespace {

using json = nlohmann::json;

constexpr int64_t int32_max = std::numeric_limits<int32_t>::max();
constexpr int64_t int64_max = std::numeric_limits<int64_t>::max();

/// Shows a value the client sent, short enough for a message: numbers and
/// booleans as written, strings quoted (cut at 48 bytes), containers by
/// kind. Never throws (dump's replace handler; the body was valid UTF-8).
std::string describe(const json& j) {
  switch (j.type()) {
    case json::value_t::array:
      return "an array";
    case json::value_t::object:
      return "an object";
    case json::value_t::string: {
      const auto& s = j.get_ref<const std::string&>();
      if (s.size() <= 48)
        return json(s).dump(-1, ' ', false, json::error_handler_t::replace);
      auto cut = engine::utf8_sanitize(std::string_view{s}.substr(0, 48));
      return json(cut).dump(-1, ' ', false, json::error_handler_t::replace) + "...";
    }
    default:
      return j.dump(-1, ' ', false, json::error_handler_t::replace);
  }
}

std::string show(double x) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", x);
  return buf;
}

/// Offset of the first byte of `s` that is not part of well-formed UTF-8,
/// or npos.
size_t first_invalid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    auto b = static_cast<uint8_t>(s[i]);
    if (b < 0x80) {
      ++i;
      continue;
    }
    int len = 0;
    uint8_t lo = 0x80;
    uint8_t hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) {
      len = 2;
    } else if (b >= 0xE0 && b <= 0xEF) {
      len = 3;
      if (b == 0xE0)
        lo = 0xA0; // overlong
      if (b == 0xED)
        hi = 0x9F; // surrogates
    } else if (b >= 0xF0 && b <= 0xF4) {
      len = 4;
      if (b == 0xF0)
        lo = 0x90; // overlong
      if (b == 0xF4)
        hi = 0x8F; // above U+10FFFF
    } else {
      return i;
    }
    if (i + static_cast<size_t>(len) > s.size())
      return i;
    for (int k = 1; k < len; ++k) {
      auto c = static_cast<uint8_t>(s[i + static_cast<size_t>(k)]);
      if (c < (k == 1 ? lo : 0x80) || c > (k == 1 ? hi : 0xBF))
        return i;
    }
    i += static_cast<size_t>(len);
  }
  return std::string_view::npos;
}

/// Deepest nesting of arrays and objects in `body` (strings skipped), or
/// more than `limit` as soon as it is exceeded. Checked before parsing so
/// that no part of the parser sees a pathological nesting.
int json_depth(std::string_view body, int limit) {
  int depth = 0;
  int deepest = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : body) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > deepest) {
        deepest = depth;
        if (deepest > limit)
          return deepest;
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

/// The JSON text of each non-integer number of a body (and of integers
/// too large for 64 bits), by the name the field_reader gives its field
/// ("top_p", "stop_token_ids[3]", "messages[0].x"): errors quote a number
/// as the client wrote it, not as it reads back from a double (1e-300 is
/// not "0", 1e400 not "inf").
using raw_numbers = std::map<std::string, std::string, std::less<>>;

/// Builds the DOM as json::parse does, noting each float's text in a
/// raw_numbers by its path.
class raw_number_sax {
public:
  raw_number_sax(json& result, raw_numbers& raw) : dom_(result, true), raw_(raw) {}

  bool null() { return value() && dom_.null(); }
  bool boolean(bool v) { return value() && dom_.boolean(v); }
  bool number_integer(json::number_integer_t v) { return value() && dom_.number_integer(v); }
  bool number_unsigned(json::number_unsigned_t v) { return value() && dom_.number_unsigned(v); }
  bool number_float(json::number_float_t v, const std::string& text) {
    if (!value())
      return false;
    raw_.insert_or_assign(path(), quote_input(text));
    return dom_.number_float(v, text);
  }
  bool string(std::string& v) { return value() && dom_.string(v); }
  bool binary(json::binary_t& v) { return value() && dom_.binary(v); }
  bool start_object(std::size_t n) {
    if (!value())
      return false;
    frames_.push_back({false, 0, {}});
    return dom_.start_object(n);
  }
  bool key(std::string& k) {
    frames_.back().key = k;
    return dom_.key(k);
  }
  bool end_object() {
    frames_.pop_back();
    return dom_.end_object();
  }
  bool start_array(std::size_t n) {
    if (!value())
      return false;
    frames_.push_back({true, 0, {}});
    return dom_.start_array(n);
  }
  bool end_array() {
    frames_.pop_back();
    return dom_.end_array();
  }
  bool parse_error(std::size_t pos, const std::string& token, const nlohmann::detail::exception& e) {
    return dom_.parse_error(pos, token, e);
  }

private:
  struct frame {
    bool array = false;
    size_t next = 0; // arrays: the index of the next element
    std::string key; // objects: the key of the current member
  };

  // A value starts: in an array it takes the next index.
  bool value() {
    if (!frames_.empty() && frames_.back().array)
      ++frames_.back().next;
    return true;
  }

  std::string path() const {
    std::string out;
    for (const auto& f : frames_) {
      if (f.array) {
        out += "[" + std::to_string(f.next - 1) + "]";
      } else {
        if (!out.empty())
          out += '.';
        out += f.key;
      }
    }
    return out;
  }

  nlohmann::detail::json_sax_dom_parser<json> dom_;
  raw_numbers& raw_;
  std::vector<frame> frames_;
};

/// Reads the fields of one request body, remembering the first error.
/// Every access checks the type first, so nothing here throws.
class field_reader {
public:
  field_reader(const json& obj, const api_limits& limits, const raw_numbers* raw = nullptr)
      : obj_(obj), limits_(limits), raw_(raw) {}

  /// The first error met, if any.
  std::optional<api_error> error;

  /// True once an error is recorded.
  [[nodiscard]] bool failed() const { return error.has_value(); }

  /// The field, or nullptr when absent or null.
  [[nodiscard]] const json* get(const char* key) const {
    auto it = obj_.find(key);
    if (it == obj_.end() || it->is_null())
      return nullptr;
    return &*it;
  }

  void fail(std::string message, std::string param) {
    if (!error)
      error = bad_request(std::move(message), std::move(param));
  }

  /// An integer in [lo, hi]; integral floats count (16.0).
  std::optional<int64_t> integer(const json& j, const std::string& name, int64_t lo,
                                 int64_t hi) {
    std::optional<int64_t> v;
    if (j.is_number_integer() && !j.is_number_unsigned()) {
      v = j.get<int64_t>();
    } else if (j.is_number_unsigned()) {
      auto u = j.get<uint64_t>();
      v = u > static_cast<uint64_t>(int64_max) ? int64_max : static_cast<int64_t>(u);
    } else if (j.is_number_float()) {
      double d = j.get<double>();
      if (std::isfinite(d) && std::floor(d) == d && d >= -9.2e18 && d <= 9.2e18)
        v = static_cast<int64_t>(d);
    }
    if (!v) {
      fail(name + " must be an integer " + range(lo, hi) + ", got " + given(j, name), name);
      return std::nullopt;
    }
    if (*v < lo) {
      fail(name + " must be an integer >= " + std::to_string(lo) + ", got " + given(j, name), name);
      return std::nullopt;
    }
    if (*v > hi) {
      fail(name + " must be an integer <= " + std::to_string(hi) + ", got " + given(j, name), name);
      return std::nullopt;
    }
    return v;
  }

  std::optional<int64_t> integer(const char* key, int64_t lo, int64_t hi) {
    const json* j = get(key);
    if (j == nullptr || failed())
      return std::nullopt;
    return integer(*j, key, lo, hi);
  }

  /// A number in [lo, hi], or (lo, hi] when `lo_open`.
  std::optional<double> number(const char* key, double lo, double hi, bool lo_open = false) {
    const json* j = get(key);
    if (j == nullptr || failed())
      return std::nullopt;
    std::string want = std::string{key} + " must be a number in " + (lo_open ? "(" : "[")
                       + show(lo) + ", " + show(hi) + "], got ";
    if (!j->is_number()) {
      fail(want + describe(*j), key);
      return std::nullopt;
    }
    auto in_range = [&](double x) { return std::isfinite(x) && (lo_open ? x > lo : x >= lo) && x <= hi; };
    const double d = j->get<double>();
    if (!in_range(d)) {
      fail(want + given(*j, key), key);
      return std::nullopt;
    }
    // The sampling parameters are 32-bit floats: 1e-300 is in (0, 1] but
    // becomes 0, which the engine would refuse with a confusing "got 0".
    const double f = static_cast<double>(static_cast<float>(d));
    if (!in_range(f)) {
      fail(want + given(*j, key) + " (" + show(f) + " as a 32-bit float)", key);
      return std::nullopt;
    }
    return d;
  }

  std::optional<bool> boolean(const json& j, const std::string& name) {
    if (!j.is_boolean()) {
      fail(name + " must be a boolean, got " + given(j, name), name);
      return std::nullopt;
    }
    return j.get<bool>();
  }

  std::optional<bool> boolean(const char* key) {
    const json* j = get(key);
    if (j == nullptr || failed())
      return std::nullopt;
    return boolean(*j, key);
  }

  /// A string of valid UTF-8 of at most `max_bytes`.
  std::optional<std::string> string(const json& j, const std::string& name, size_t max_bytes) {
    if (!j.is_string()) {
      fail(name + " must be a string, got " + given(j, name), name);
      return std::nullopt;
    }
    const auto& s = j.get_ref<const std::string&>();
    if (!engine::utf8_is_valid(s)) {
      fail(name + " is not valid UTF-8", name);
      return std::nullopt;
    }
    if (s.size() > max_bytes) {
      fail(name + " is " + std::to_string(s.size()) + " bytes, more than the limit of "
             + std::to_string(max_bytes),
           name);
      return std::nullopt;
    }
    return s;
  }

  std::optional<std::string> string(const char* key, size_t max_bytes) {
    const json* j = get(key);
    if (j == nullptr || failed())
      return std::nullopt;
    return string(*j, key, max_bytes);
  }

  [[nodiscard]] const api_limits& limits() const { return limits_; }

private:
  // A number as the client wrote it (its JSON text, cut to
  // max_quoted_bytes), or describe() for everything else.
  std::string given(const json& j, std::string_view name) const {
    if (raw_ != nullptr && j.is_number())
      if (auto it = raw_->find(name); it != raw_->end())
        return it->second;
    return describe(j);
  }

  static std::string range(int64_t lo, int64_t hi) {
    if (hi == int64_max)
      return ">= " + std::to_string(lo);
    return "in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  }

  const json& obj_;
  const api_limits& limits_;
  const raw_numbers* raw_ = nullptr;
};

/// Token ids from an array of integers.
std::optional<std::vector<int32_t>> token_ids(field_reader& r, const json& arr,
                                              const std::string& name) {
  if (arr.size() > r.limits().max_prompt_token_ids) {
    r.fail(name + " has " + std::to_string(arr.size()) + " token ids, more than the limit of "
             + std::to_string(r.limits().max_prompt_token_ids),
           name);
    return std::nullopt;
  }
  std::vector<int32_t> ids;
  ids.reserve(arr.size());
  for (size_t i = 0; i < arr.size(); ++i) {
    auto v = r.integer(arr[i], name + "[" + std::to_string(i) + "]", 0, int32_max);
    if (!v)
      return std::nullopt;
    ids.push_back(static_cast<int32_t>(*v));
  }
  return ids;
}

bool all_integers(const json& arr) {
  for (const auto& e : arr)
    if (!e.is_number())
      return false;
  return true;
}

void read_prompt(field_reader& r, api_request& req) {
  const json* p = r.get("prompt");
  const std::string shape =
    "prompt must be a string, an array of one string, or an array of token ids";
  if (p == nullptr) {
    r.fail("prompt is required", "prompt");
    return;
  }
  auto take_text = [&](const json& s, const std::string& name) {
    if (auto text = r.string(s, name, r.limits().max_prompt_bytes))
      req.prompt_text = std::move(*text);
  };
  if (p->is_string()) {
    take_text(*p, "prompt");
    return;
  }
  if (!p->is_array()) {
    r.fail(shape + ", got " + describe(*p), "prompt");
    return;
  }
  if (p->empty()) {
    r.fail("prompt must not be an empty array", "prompt");
    return;
  }
  const json& first = (*p)[0];
  auto batch = [&] {
    r.fail("prompt holds a batch of " + std::to_string(p->size())
             + " prompts; send one prompt per request",
           "prompt");
  };
  if (first.is_string() || first.is_array()) {
    if (p->size() > 1) {
      batch();
      return;
    }
    if (first.is_string()) {
      take_text(first, "prompt[0]");
      return;
    }
    if (first.empty()) {
      r.fail("prompt[0] must not be an empty array", "prompt");
      return;
    }
    if (!all_integers(first)) {
      r.fail(shape + ", got an array holding " + describe(first), "prompt");
      return;
    }
    req.prompt_tokens = token_ids(r, first, "prompt[0]");
    return;
  }
  if (!all_integers(*p)) {
    r.fail(shape + ", got an array holding " + describe(first), "prompt");
    return;
  }
  req.prompt_tokens = token_ids(r, *p, "prompt");
}

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

void read_stop(field_reader& r, api_request& req) {
  const json* s = r.get("stop");
  if (s == nullptr)
    return;
  const auto& lim = r.limits();
  auto add = [&](const json& e, const std::string& name) {
    auto str = r.string(e, name, lim.max_stop_bytes);
    if (!str)
      return false;
    if (str->empty()) {
      r.fail(name + " must not be empty", "stop");
      return false;
    }
    req.params.stop.push_back(std::move(*str));
    return true;
  };
  if (s->is_string()) {
    add(*s, "stop");
    return;
  }
  if (!s->is_array()) {
    r.fail("stop must be a string or an array of strings, got " + describe(*s), "stop");
    return;
  }
  if (s->size() > lim.max_stop_strings) {
    r.fail("stop must have at most " + std::to_string(lim.max_stop_strings)
             + " strings, got " + std::to_string(s->size()),
           "stop");
    return;
  }
  for (size_t i = 0; i < s->size(); ++i)
    if (!add((*s)[i], "stop[" + std::to_string(i) + "]"))
      return;
}

void read_stop_token_ids(field_reader& r, api_request& req) {
  const json* s = r.get("stop_token_ids");
  if (s == nullptr)
    return;
  if (!s->is_array()) {
    r.fail("stop_token_ids must be an array of token ids, got " + describe(*s),
           "stop_token_ids");
    return;
  }
  if (s->size() > r.limits().max_stop_token_ids) {
    r.fail("stop_token_ids must have at most " + std::to_string(r.limits().max_stop_token_ids)
             + " ids, got " + std::to_string(s->size()),
           "stop_token_ids");
    return;
  }
  for (size_t i = 0; i < s->size(); ++i) {
    auto v = r.integer((*s)[i], "stop_token_ids[" + std::to_string(i) + "]", 0, int32_max);
    if (!v)
      return;
    req.params.stop_token_ids.push_back(static_cast<int32_t>(*v));
  }
}

void read_logprobs(field_reader& r, api_request& req) {
  constexpr int64_t max_lp = engine::sampling_params::max_logprobs;
  if (req.kind == api_kind::completion) {
    // Completions: logprobs is the number of alternatives (0: the chosen
    // token's only).
    if (auto lp = r.integer("logprobs", 0, max_lp)) {
      req.logprobs = true;
      req.top_logprobs = static_cast<int32_t>(*lp);
    }
  } else {
    if (auto lp = r.boolean("logprobs"))
      req.logprobs = *lp;
    if (auto top = r.integer("top_logprobs", 0, max_lp)) {
      if (!req.logprobs) {
        r.fail("top_logprobs requires logprobs to be true", "top_logprobs");
        return;
      }
      req.top_logprobs = static_cast<int32_t>(*top);
    }
  }
  if (req.logprobs)
    req.params.logprobs = req.top_logprobs;
}

/// Fields that would change the answer in ways Tessera does not implement.
void reject_unsupported(field_reader& r, const api_request& req) {
  if (req.kind == api_kind::completion) {
    if (auto echo = r.boolean("echo"); echo && *echo)
      r.fail("echo is not supported", "echo");
    const json* s = r.get("suffix");
    if (s && !(s->is_string() && s->get_ref<const std::string&>().empty()))
      r.fail("suffix is not supported", "suffix");
    if (auto best_of = r.integer("best_of", 1, int64_max); best_of && *best_of != req.n)
      r.fail("best_of is not supported (only best_of == n), got " + std::to_string(*best_of),
             "best_of");
    if (r.get("tools") || r.get("tool_choice") || r.get("parallel_tool_calls"))
      r.fail("tools, tool_choice and parallel_tool_calls are chat fields", "tools");
  }
  if (const json* b = r.get("logit_bias"); b && !(b->is_object() && b->empty()))
    r.fail("logit_bias is not supported", "logit_bias");
}

void read_fields(field_reader& r, api_request& req) {
  const auto& lim = r.limits();
  auto& p = req.params;

  const json* model = r.get("model");
  if (model == nullptr)
    r.fail("model is required", "model");
  else if (auto m = r.string(*model, "model", lim.max_id_bytes)) {
    if (m->empty())
      r.fail("model must not be empty", "model");
    req.model = std::move(*m);
  }

  if (req.kind == api_kind::completion)
    read_prompt(r, req);
  else
    read_messages(r, req);

  // Chat: max_completion_tokens replaces the deprecated max_tokens.
  std::optional<int64_t> max_tokens;
  if (req.kind == api_kind::chat)
    max_tokens = r.integer("max_completion_tokens", 1, lim.max_tokens_limit);
  if (!max_tokens)
    max_tokens = r.integer("max_tokens", 1, lim.max_tokens_limit);
  if (max_tokens)
    req.max_tokens = static_cast<int32_t>(*max_tokens);
  else if (req.kind == api_kind::completion)
    req.max_tokens = 16; // OpenAI's default for completions
  if (req.max_tokens)
    p.max_tokens = *req.max_tokens;

  if (auto v = r.number("temperature", 0.0, 2.0))
    p.temperature = static_cast<float>(*v);
  if (auto v = r.number("top_p", 0.0, 1.0, true))
    p.top_p = static_cast<float>(*v);
  if (auto v = r.integer("top_k", -1, int32_max))
    p.top_k = static_cast<int32_t>(*v);
  if (auto v = r.number("min_p", 0.0, 1.0))
    p.min_p = static_cast<float>(*v);
  if (auto v = r.number("presence_penalty", -2.0, 2.0))
    p.presence_penalty = static_cast<float>(*v);
  if (auto v = r.number("frequency_penalty", -2.0, 2.0))
    p.frequency_penalty = static_cast<float>(*v);
  if (auto v = r.number("repetition_penalty", 0.0, 100.0, true))
    p.repetition_penalty = static_cast<float>(*v);
  if (const json* s = r.get("seed"); s && !r.failed()) {
    // Any 64-bit integer; negative seeds wrap (two's complement), so each
    // distinct seed still names one stream of draws.
    if (s->is_number_unsigned())
      p.seed = s->get<uint64_t>();
    else if (auto v = r.integer(*s, "seed", std::numeric_limits<int64_t>::min(), int64_max))
      p.seed = static_cast<uint64_t>(*v);
  }
  if (auto v = r.integer("min_tokens", 0, lim.max_tokens_limit)) {
    p.min_tokens = static_cast<int32_t>(*v);
    if (req.max_tokens && p.min_tokens > *req.max_tokens)
      r.fail("min_tokens must be <= max_tokens (" + std::to_string(*req.max_tokens) + "), got "
               + std::to_string(p.min_tokens),
             "min_tokens");
  }
  if (auto v = r.boolean("ignore_eos"))
    p.ignore_eos = *v;
  read_stop(r, req);
  read_stop_token_ids(r, req);

  if (auto v = r.integer("n", 1, lim.max_n))
    req.n = static_cast<int>(*v);
  read_logprobs(r, req);

  if (auto v = r.boolean("stream"))
    req.stream = *v;
  if (const json* so = r.get("stream_options"); so && !r.failed()) {
    if (!so->is_object()) {
      r.fail("stream_options must be an object, got " + describe(*so), "stream_options");
    } else if (!req.stream) {
      r.fail("stream_options is only allowed when stream is true", "stream_options");
    } else if (auto iu = so->find("include_usage"); iu != so->end() && !iu->is_null()) {
      if (auto v = r.boolean(*iu, "stream_options.include_usage"))
        req.include_usage = *v;
    }
  }

  // Speculative decoding: {"method": "ngram"|"draft", "num_tokens": K}.
  if (const json* sp = r.get("speculative"); sp && !r.failed()) {
    using spec = engine::speculative_params;
    if (!sp->is_object()) {
      r.fail("speculative must be an object {\"method\", \"num_tokens\"}, got " + describe(*sp),
             "speculative");
    } else {
      spec s;
      auto m = sp->find("method");
      if (m == sp->end() || !m->is_string())
        r.fail("speculative.method must be \"ngram\" or \"draft\"", "speculative");
      else if (auto v = r.string(*m, "speculative.method", 16); v && *v == "ngram")
        s.method = spec::method_kind::ngram;
      else if (v && *v == "draft")
        s.method = spec::method_kind::draft;
      else if (v)
        r.fail("speculative.method must be \"ngram\" or \"draft\", got \"" + *v + "\"",
               "speculative");
      auto k = sp->find("num_tokens");
      if (k == sp->end() || k->is_null())
        r.fail("speculative.num_tokens must be an integer in [1, " +
                 std::to_string(spec::max_tokens) + "]",
               "speculative");
      else if (auto v = r.integer(*k, "speculative.num_tokens", 1, spec::max_tokens))
        s.num_tokens = static_cast<int32_t>(*v);
      if (!r.failed())
        p.speculative = s;
    }
  }

  if (req.kind == api_kind::chat)
    if (auto v = r.boolean("add_generation_prompt"))
      req.add_generation_prompt = *v;
  if (auto v = r.string("user", lim.max_id_bytes))
    req.user = std::move(*v);
  if (auto v = r.string("session_id", lim.max_id_bytes))
    req.session_id = std::move(*v);
  if (auto v = r.integer("priority", -max_request_priority, max_request_priority))
    req.priority = static_cast<int32_t>(*v);
  if (auto v = r.string("cache_salt", lim.max_id_bytes)) {
    if (v->empty() || std::any_of(v->begin(), v->end(), [](char c) { return (c >= 0 && c < 0x20) || c == 0x7f; }))
      r.fail("cache_salt must be a non-empty string without control characters", "cache_salt");
    else
      req.cache_salt = std::move(*v);
  }

  reject_unsupported(r, req);
}

} // namespace

api_result<api_request> parse_request(api_kind kind, std::string_view body,
                                      const api_limits& limits) {
  if (body.size() > limits.max_body_bytes)
    return body_too_large(body.size(), limits.max_body_bytes);
  // JSON text is UTF-8 (RFC 8259); nlohmann rejects ill-formed bytes in
  // strings too, but checking here names the offset and covers all of it.
  if (auto bad = first_invalid_utf8(body); bad != std::string_view::npos)
    return bad_request("request body is not valid UTF-8: ill-formed byte 0x"
                       + [&] {
                           char hex[3];
                           std::snprintf(hex, sizeof(hex), "%02X",
                                         static_cast<unsigned>(static_cast<uint8_t>(body[bad])));
                           return std::string{hex};
                         }()
                       + " at offset " + std::to_string(bad));
  if (json_depth(body, limits.max_json_depth) > limits.max_json_depth)
    return bad_request("request body nests arrays and objects deeper than "
                       + std::to_string(limits.max_json_depth) + " levels");
  json j;
  raw_numbers raw;
  try {
    raw_number_sax sax{j, raw};
    json::sax_parse(body, &sax);
  } catch (const json::exception& e) {
    // nlohmann quotes the offending token whole: a 3 MB number would come
    // back as a 3 MB error.
    return bad_request("request body is not valid JSON: " + quote_input(e.what()));
  }
  if (!j.is_object())
    return bad_request("request body must be a JSON object, got " + describe(j));

  api_request req;
  req.kind = kind;
  field_reader r{j, limits, &raw};
  try {
    read_fields(r, req);
  } catch (const json::exception& e) {
    // Not expected (every access checks the type first); never let one out.
    return internal_error(std::string{"reading the request failed: "} + e.what());
  }
  if (r.error)
    return std::move(*r.error);
  // response_format (both endpoints): parsed from the raw body to keep the
  // schema's key order, compiled here so a refused keyword is a 400.
  if (auto it = j.find("response_format"); it != j.end() && !it->is_null())
    if (auto err = apply_response_format(body, req.params))
      return std::move(*err);

  // tools (chat): parsed from the raw body to keep the schemas' key order;
  // a required or named tool_choice constrains the output with the call's
  // schema, which the engine compiles again from its text.
  if (kind == api_kind::chat && (j.contains("tools") || j.contains("tool_choice") ||
                                 j.contains("parallel_tool_calls"))) {
    auto tools = parse_tools(body);
    if (auto* e = std::get_if<api_error>(&tools))
      return std::move(*e);
    req.tools = std::get<std::shared_ptr<const tool_config>>(std::move(tools));
    if (req.tools && (req.tools->choice == tool_choice_kind::required ||
                      req.tools->choice == tool_choice_kind::named)) {
      if (req.params.structured_output.kind != engine::structured_output_params::kind_type::none)
        return bad_request("response_format cannot be combined with a required or named "
                           "tool_choice (the call's schema constrains the output)",
                           "response_format");
      req.params.structured_output = {engine::structured_output_params::kind_type::json_schema,
                                      call_schema(*req.tools)};
    }
  }

  // The engine's own check, as a last guard. Chat without max_tokens gets
  // its real max_tokens later (apply_context_limit); check with a stand-in.
  auto check = req.params;
  if (!req.max_tokens)
    check.max_tokens = std::max(check.min_tokens, 1);
  if (auto err = check.validate())
    return bad_request(error_message(err));
  return req;
}

std::optional<api_error> apply_context_limit(api_request& req, int32_t prompt_tokens,
                                             int32_t max_model_len) {
  const std::string param = req.kind == api_kind::chat ? "messages" : "prompt";
  const std::string what = req.kind == api_kind::chat ? "messages" : "prompt";
  if (prompt_tokens <= 0)
    return bad_request("the " + what + " must not be empty (0 tokens)", param);
  int64_t room = int64_t{max_model_len} - prompt_tokens;
  if (!req.max_tokens) {
    if (room < 1)
      return bad_request("This model's maximum context length is "
                           + std::to_string(max_model_len) + " tokens. However, your " + what
                           + " resulted in " + std::to_string(prompt_tokens)
                           + " tokens. Please reduce the length of the " + what + ".",
                         param);
    req.params.max_tokens = static_cast<int32_t>(room);
  } else {
    if (*req.max_tokens > room)
      return bad_request("This model's maximum context length is "
                           + std::to_string(max_model_len) + " tokens. However, you requested "
                           + std::to_string(int64_t{prompt_tokens} + *req.max_tokens)
                           + " tokens (" + std::to_string(prompt_tokens) + " in the " + what
                           + ", " + std::to_string(*req.max_tokens)
                           + " in the completion). Please reduce the length of the " + what
                           + " or completion.",
                         param);
    req.params.max_tokens = *req.max_tokens;
  }
  if (req.params.min_tokens > req.params.max_tokens)
    return bad_request("min_tokens (" + std::to_string(req.params.min_tokens)
                         + ") is more than the " + std::to_string(req.params.max_tokens)
                         + " tokens left for the completion",
                       "min_tokens");
  if (auto err = req.params.validate())
    return bad_request(error_message(err));
  return std::nullopt;
}

} // namespace tessera::actors::frontend
