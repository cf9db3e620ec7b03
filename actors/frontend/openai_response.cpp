#include "actors/frontend/openai_response.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include <nlohmann/json.hpp>

#include "engine/tokenizer.hpp"
#include "engine/utf8.hpp"

namespace tessera::actors::frontend {

namespace {

// Insertion-ordered, so bodies read as OpenAI's do (id, object, ... usage).
using json = nlohmann::ordered_json;

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

/// `f` as the double its shortest decimal names (-0.1f -> -0.1, not
/// -0.10000000149011612); JSON has no infinities, so they become -9999
/// (vLLM's stand-in for -inf).
double clean(float f) {
  if (!std::isfinite(f))
    return -9999.0;
  char buf[32];
  auto res = std::to_chars(buf, buf + sizeof(buf) - 1, f);
  *res.ptr = '\0';
  return std::strtod(buf, nullptr);
}

/// Code points in well-formed UTF-8 `s`.
int64_t count_chars(std::string_view s) {
  int64_t n = 0;
  for (char c : s)
    if ((static_cast<uint8_t>(c) & 0xC0) != 0x80)
      ++n;
  return n;
}

json finish_json(engine::finish_reason r) {
  if (r == engine::finish_reason::none)
    return nullptr;
  return std::string{engine::to_string(r)};
}

/// As vLLM gives it: the stop string, the stop token id as a number, or
/// null (EOS, length, still running).
json stop_reason_json(engine::finish_reason r, const std::string& stop_reason, int32_t stop_token) {
  if (r != engine::finish_reason::stop)
    return nullptr;
  if (stop_token >= 0)
    return stop_token;
  if (stop_reason.empty())
    return nullptr;
  return stop_reason;
}

/// A token's display string (U+FFFD for a partial character) and bytes.
struct token_text {
  std::string text;
  std::string bytes;
};

token_text text_of(const response_options& opts, int32_t id) {
  token_text t;
  if (opts.token_bytes)
    t.bytes = opts.token_bytes(id);
  t.text = engine::utf8_sanitize(t.bytes);
  return t;
}

json byte_list(std::string_view bytes) {
  json arr = json::array();
  for (char c : bytes)
    arr.push_back(static_cast<int>(static_cast<uint8_t>(c)));
  return arr;
}

/// OpenAI completions logprobs: {tokens, token_logprobs, top_logprobs,
/// text_offset}; offsets count code points from `offset`.
json completion_logprobs(std::span<const engine::sampled_token> lps, int64_t offset,
                         const response_options& opts) {
  json tokens = json::array();
  json token_logprobs = json::array();
  json top = json::array();
  json text_offset = json::array();
  for (const auto& t : lps) {
    auto tt = text_of(opts, t.token);
    tokens.push_back(tt.text);
    token_logprobs.push_back(clean(t.logprob));
    // As vLLM: the alternatives plus the chosen token; the first of equal
    // strings (the most likely) wins.
    json alts = json::object();
    for (const auto& alt : t.top_logprobs) {
      auto at = text_of(opts, alt.token).text;
      if (!alts.contains(at))
        alts[at] = clean(alt.logprob);
    }
    if (!alts.contains(tt.text))
      alts[tt.text] = clean(t.logprob);
    top.push_back(std::move(alts));
    text_offset.push_back(offset);
    offset += count_chars(tt.text);
  }
  json out = json::object();
  out["tokens"] = std::move(tokens);
  out["token_logprobs"] = std::move(token_logprobs);
  out["top_logprobs"] = std::move(top);
  out["text_offset"] = std::move(text_offset);
  return out;
}

/// OpenAI chat logprobs: {content: [{token, logprob, bytes, top_logprobs:
/// [{token, logprob, bytes}]}]}.
json chat_logprobs(std::span<const engine::sampled_token> lps, const response_options& opts) {
  json content = json::array();
  for (const auto& t : lps) {
    auto tt = text_of(opts, t.token);
    json top = json::array();
    for (const auto& alt : t.top_logprobs) {
      auto at = text_of(opts, alt.token);
      json a = json::object();
      a["token"] = at.text;
      a["logprob"] = clean(alt.logprob);
      a["bytes"] = byte_list(at.bytes);
      top.push_back(std::move(a));
    }
    json e = json::object();
    e["token"] = tt.text;
    e["logprob"] = clean(t.logprob);
    e["bytes"] = byte_list(tt.bytes);
    e["top_logprobs"] = std::move(top);
    content.push_back(std::move(e));
  }
  json out = json::object();
  out["content"] = std::move(content);
  return out;
}

json usage_json(const usage_counts& u) {
  json out = json::object();
  out["prompt_tokens"] = u.prompt_tokens;
  out["completion_tokens"] = u.completion_tokens;
  out["total_tokens"] = int64_t{u.prompt_tokens} + u.completion_tokens;
  if (u.cached_tokens) {
    json details = json::object();
    details["cached_tokens"] = *u.cached_tokens;
    out["prompt_tokens_details"] = std::move(details);
  }
  return out;
}

json head(const response_meta& meta, std::string_view object) {
  json out = json::object();
  out["id"] = meta.id;
  out["object"] = object;
  out["created"] = meta.created;
  out["model"] = meta.model;
  return out;
}

/// One tool call, or a piece of one (index >= 0: streamed, fields left
/// out when empty, as OpenAI streams them).
json tool_call_json(const std::string& id, const std::string& name, const std::string& args,
                    int index) {
  json c = json::object();
  if (index >= 0)
    c["index"] = index;
  if (index < 0 || !id.empty()) {
    c["id"] = id;
    c["type"] = "function";
  }
  json fn = json::object();
  if (index < 0 || !name.empty())
    fn["name"] = name;
  fn["arguments"] = args;
  c["function"] = std::move(fn);
  return c;
}

/// The frames of a chat delta with tool calls: content (if any), then per
/// call its id and name, then its arguments (a named choice's pieces: one
/// frame each); the last frame carries the finish reason.
std::string chat_tool_chunks(const response_meta& meta, const stream_delta& d,
                             const response_options& opts) {
  std::vector<json> deltas;
  if (!d.text.empty() && !d.text_is_arguments)
    deltas.push_back(json{{"content", d.text}});
  for (const auto& t : d.tool_calls) {
    if (d.text_is_arguments) {
      deltas.push_back(json{{"tool_calls", json::array({tool_call_json(t.id, t.name, t.arguments, t.index)})}});
      continue;
    }
    deltas.push_back(json{{"tool_calls", json::array({tool_call_json(t.id, t.name, "", t.index)})}});
    deltas.push_back(json{{"tool_calls", json::array({tool_call_json("", "", t.arguments, t.index)})}});
  }
  const bool last = d.finish != engine::finish_reason::none;
  if (deltas.empty() || last)
    deltas.push_back(json::object());
  const bool called = !d.tool_calls.empty() || d.text_is_arguments;
  std::string frames;
  for (size_t i = 0; i < deltas.size(); ++i) {
    json out = head(meta, "chat.completion.chunk");
    json ch = json::object();
    ch["index"] = d.index;
    ch["delta"] = std::move(deltas[i]);
    ch["logprobs"] = opts.logprobs && i == 0 ? chat_logprobs(d.logprobs, opts) : json(nullptr);
    const bool fin = last && i + 1 == deltas.size();
    ch["finish_reason"] = !fin ? json(nullptr)
                          : called && d.finish == engine::finish_reason::stop
                            ? json("tool_calls")
                            : finish_json(d.finish);
    ch["stop_reason"] = fin ? stop_reason_json(d.finish, d.stop_reason, d.stop_token) : json(nullptr);
    out["choices"] = json::array({std::move(ch)});
    if (opts.include_usage)
      out["usage"] = nullptr;
    frames += sse_event(dump(out));
  }
  return frames;
}

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

} // namespace

token_bytes_fn token_bytes_of(const engine::tokenizer& tok) {
  return [&tok](int32_t id) { return tok.token_bytes(id); };
}

std::string make_response_id(api_kind kind, uint64_t unique) {
  uint64_t a = mix(unique);
  uint64_t b = mix(a ^ 0x5851f42d4c957f2dULL);
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%016llx%08llx", static_cast<unsigned long long>(a),
                static_cast<unsigned long long>(b >> 32));
  return std::string{kind == api_kind::chat ? "chatcmpl-" : "cmpl-"} + buf;
}

response_options options_for(const api_request& req, const engine::tokenizer& tok) {
  response_options o;
  o.logprobs = req.logprobs;
  o.include_usage = req.stream && req.include_usage;
  o.token_bytes = token_bytes_of(tok);
  return o;
}

stream_delta choice_output::append(const engine::request_output& out) {
  stream_delta d;
  d.index = index;
  d.text_offset = text_chars;
  d.text = out.text;
  d.logprobs = out.logprobs;
  d.finish = out.finish;
  d.stop_reason = out.stop_reason;
  d.stop_token = out.stop_token;
  text += out.text;
  text_chars += count_chars(out.text);
  token_ids.insert(token_ids.end(), out.tokens.begin(), out.tokens.end());
  logprobs.insert(logprobs.end(), out.logprobs.begin(), out.logprobs.end());
  if (out.finish != engine::finish_reason::none) {
    finish = out.finish;
    stop_reason = out.stop_reason;
    stop_token = out.stop_token;
  }
  if (tools)
    stream_tools(d, out.finish != engine::finish_reason::none);
  return d;
}

void choice_output::stream_tools(stream_delta& d, bool last) {
  if (tools->choice == tool_choice_kind::named) {
    d.text_is_arguments = true;
    if (!d.text.empty() || call_id.empty()) {
      tool_call_delta t;
      if (call_id.empty()) {
        call_id = make_tool_call_id();
        t.id = call_id;
        t.name = tools->named;
      }
      t.arguments = d.text;
      d.tool_calls.push_back(std::move(t));
    }
    released = text.size();
    return;
  }
  if (!last) {
    // auto: send what cannot be a call; required: all of it is the call.
    size_t upto = tools->choice == tool_choice_kind::auto_ ? releasable_content(text, released)
                                                           : released;
    d.text = text.substr(released, upto - released);
    released = upto;
    return;
  }
  auto parsed = parse_tool_reply(*tools, text);
  if (parsed.calls.empty()) {
    d.text = text.substr(std::min(released, text.size()));
  } else {
    d.text = parsed.content.size() > released ? parsed.content.substr(released) : std::string{};
    for (size_t i = 0; i < parsed.calls.size(); ++i) {
      auto& c = parsed.calls[i];
      d.tool_calls.push_back(
        tool_call_delta{static_cast<int>(i), std::move(c.id), std::move(c.name), std::move(c.arguments)});
    }
  }
  released = text.size();
}

usage_counts make_usage(int32_t prompt_tokens, std::span<const choice_output> choices) {
  usage_counts u;
  u.prompt_tokens = prompt_tokens;
  for (const auto& c : choices)
    u.completion_tokens += static_cast<int32_t>(c.token_ids.size());
  return u;
}

std::string sse_event(std::string_view json_text) {
  std::string out;
  out.reserve(json_text.size() + 8);
  out += "data: ";
  out += json_text;
  out += "\n\n";
  return out;
}

std::string_view done_event() {
  return "data: [DONE]\n\n";
}

std::string completion_response(const response_meta& meta,
                                 std::span<const choice_output> choices,
                                 const usage_counts& usage, const response_options& opts) {
  json out = head(meta, "text_completion");
  json arr = json::array();
  for (const auto& c : choices) {
    json ch = json::object();
    ch["index"] = c.index;
    ch["text"] = c.text;
    ch["logprobs"] = opts.logprobs ? completion_logprobs(c.logprobs, 0, opts) : json(nullptr);
    ch["finish_reason"] = finish_json(c.finish);
    ch["stop_reason"] = stop_reason_json(c.finish, c.stop_reason, c.stop_token);
    arr.push_back(std::move(ch));
  }
  out["choices"] = std::move(arr);
  out["usage"] = usage_json(usage);
  return dump(out);
}

std::string chat_response(const response_meta& meta, std::span<const choice_output> choices,
                          const usage_counts& usage, const response_options& opts) {
  json out = head(meta, "chat.completion");
  json arr = json::array();
  for (const auto& c : choices) {
    json msg = json::object();
    msg["role"] = "assistant";
    msg["content"] = c.text;
    bool called = false;
    if (c.tools) {
      auto parsed = parse_tool_reply(*c.tools, c.text);
      if (!parsed.calls.empty()) {
        called = true;
        msg["content"] = parsed.content.empty() ? json(nullptr) : json(parsed.content);
        json calls = json::array();
        for (const auto& call : parsed.calls)
          calls.push_back(tool_call_json(call.id, call.name, call.arguments, -1));
        msg["tool_calls"] = std::move(calls);
      }
    }
    json ch = json::object();
    ch["index"] = c.index;
    ch["message"] = std::move(msg);
    ch["logprobs"] = opts.logprobs ? chat_logprobs(c.logprobs, opts) : json(nullptr);
    ch["finish_reason"] = called && c.finish == engine::finish_reason::stop
                            ? json("tool_calls")
                            : finish_json(c.finish);
    ch["stop_reason"] = stop_reason_json(c.finish, c.stop_reason, c.stop_token);
    arr.push_back(std::move(ch));
  }
  out["choices"] = std::move(arr);
  out["usage"] = usage_json(usage);
  return dump(out);
}

std::string completion_chunk(const response_meta& meta, const stream_delta& d,
                             const response_options& opts) {
  json out = head(meta, "text_completion");
  json ch = json::object();
  ch["index"] = d.index;
  ch["text"] = d.text;
  ch["logprobs"] =
    opts.logprobs ? completion_logprobs(d.logprobs, d.text_offset, opts) : json(nullptr);
  ch["finish_reason"] = finish_json(d.finish);
  ch["stop_reason"] = stop_reason_json(d.finish, d.stop_reason, d.stop_token);
  out["choices"] = json::array({std::move(ch)});
  if (opts.include_usage)
    out["usage"] = nullptr;
  return sse_event(dump(out));
}

std::string chat_role_chunk(const response_meta& meta, int index,
                            const response_options& opts) {
  json out = head(meta, "chat.completion.chunk");
  json delta = json::object();
  delta["role"] = "assistant";
  delta["content"] = "";
  json ch = json::object();
  ch["index"] = index;
  ch["delta"] = std::move(delta);
  ch["logprobs"] = nullptr;
  ch["finish_reason"] = nullptr;
  out["choices"] = json::array({std::move(ch)});
  if (opts.include_usage)
    out["usage"] = nullptr;
  return sse_event(dump(out));
}

std::string chat_chunk(const response_meta& meta, const stream_delta& d,
                       const response_options& opts) {
  if (d.text_is_arguments || !d.tool_calls.empty())
    return chat_tool_chunks(meta, d, opts);
  json out = head(meta, "chat.completion.chunk");
  json delta = json::object();
  if (!d.text.empty() || d.finish == engine::finish_reason::none)
    delta["content"] = d.text;
  json ch = json::object();
  ch["index"] = d.index;
  ch["delta"] = std::move(delta);
  ch["logprobs"] = opts.logprobs ? chat_logprobs(d.logprobs, opts) : json(nullptr);
  ch["finish_reason"] = finish_json(d.finish);
  ch["stop_reason"] = stop_reason_json(d.finish, d.stop_reason, d.stop_token);
  out["choices"] = json::array({std::move(ch)});
  if (opts.include_usage)
    out["usage"] = nullptr;
  return sse_event(dump(out));
}

std::string usage_chunk(const response_meta& meta, api_kind kind, const usage_counts& usage) {
  json out = head(meta, kind == api_kind::chat ? "chat.completion.chunk" : "text_completion");
  out["choices"] = json::array();
  out["usage"] = usage_json(usage);
  return sse_event(dump(out));
}

namespace {

json model_json(const model_card& m) {
  json e = json::object();
  e["id"] = m.id;
  e["object"] = "model";
  e["created"] = m.created;
  e["owned_by"] = m.owned_by;
  if (m.max_model_len > 0)
    e["max_model_len"] = m.max_model_len;
  return e;
}

} // namespace

std::string model_response(const model_card& model) { return dump(model_json(model)); }

std::string models_response(std::span<const model_card> models) {
  json data = json::array();
  for (const auto& m : models)
    data.push_back(model_json(m));
  json out = json::object();
  out["object"] = "list";
  out["data"] = std::move(data);
  return dump(out);
}

std::string error_body(const api_error& e) {
  json err = json::object();
  err["message"] = e.message;
  err["type"] = e.type;
  err["param"] = e.param.empty() ? json(nullptr) : json(e.param);
  err["code"] = e.code.empty() ? json(nullptr) : json(e.code);
  json out = json::object();
  out["error"] = std::move(err);
  return dump(out);
}

std::string error_event(const api_error& e) {
  return sse_event(error_body(e));
}

} // namespace tessera::actors::frontend
