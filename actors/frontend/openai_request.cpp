#include "actors/frontend/openai_request.hpp"

#include "actors/frontend/openai_fields.hpp"
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

namespace openai_detail {

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

} // namespace openai_detail

namespace {

using namespace openai_detail;

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
