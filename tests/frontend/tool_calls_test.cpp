// Function calling: tools / tool_choice parsed and refused with the field
// named (hostile bodies included), the call schemas a required or named
// choice compiles to (checked with the grammar), the reply parsers
// (Hermes, Llama 3.1, unknown names and garbage stay content), streaming
// deltas (arguments pieces concatenate to the arguments), the response
// bodies, and tools in the chat template (rendered by a template that
// knows them, a preamble for one that does not).
#include "actors/frontend/tool_calls.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "actors/frontend/chat_template.hpp"
#include "actors/frontend/openai_request.hpp"
#include "actors/frontend/openai_response.hpp"
#include "engine/grammar/json_schema.hpp"
#include "engine/grammar/matcher.hpp"

namespace {

using namespace tessera::actors::frontend;
using nlohmann::json;
namespace grammar = tessera::engine::grammar;

const char* weather_tool = R"({"type":"function","function":{"name":"get_weather",
  "description":"Weather in a city","parameters":{"type":"object","properties":
  {"city":{"type":"string"},"unit":{"enum":["c","f"]}},"required":["city"],
  "additionalProperties":false}}})";
const char* time_tool = R"({"type":"function","function":{"name":"get_time","parameters":
  {"type":"object","properties":{"zone":{"type":"string"}},"required":["zone"]}}})";

std::string body_with(const std::string& extra) {
  return R"({"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[)" +
         std::string{weather_tool} + "," + time_tool + "]" + extra + "}";
}

std::shared_ptr<const tool_config> tools_ok(const std::string& body) {
  auto r = parse_tools(body);
  const auto* e = std::get_if<api_error>(&r);
  EXPECT_EQ(e, nullptr) << (e ? e->message : "");
  return e ? nullptr : std::get<std::shared_ptr<const tool_config>>(r);
}

api_error tools_error(const std::string& body, const tool_limits& lim = {}) {
  auto r = parse_tools(body, lim);
  const auto* e = std::get_if<api_error>(&r);
  EXPECT_NE(e, nullptr) << body.substr(0, 200);
  return e ? *e : api_error{};
}

bool accepts(const std::string& schema, const std::string& doc) {
  auto g = grammar::compile_json_schema_text(schema);
  EXPECT_TRUE(g.ok()) << g.error.text();
  if (!g.ok())
    return false;
  grammar::grammar_matcher m(g.value);
  return m.accept_bytes(doc) && m.can_end();
}

TEST(ToolCallsTest, ParsesToolsAndEachChoice) {
  auto t = tools_ok(body_with(""));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->choice, tool_choice_kind::auto_);
  ASSERT_EQ(t->functions.size(), 2u);
  EXPECT_EQ(t->functions[0].name, "get_weather");
  // Key order kept: the model writes properties as the schema lists them.
  EXPECT_LT(t->functions[0].parameters.find("city"), t->functions[0].parameters.find("unit"));
  EXPECT_TRUE(t->parallel);
  EXPECT_EQ(tools_ok(body_with(R"(,"tool_choice":"required","parallel_tool_calls":false)"))->choice,
            tool_choice_kind::required);
  auto named = tools_ok(body_with(R"(,"tool_choice":{"type":"function","function":{"name":"get_time"}})"));
  ASSERT_TRUE(named);
  EXPECT_EQ(named->choice, tool_choice_kind::named);
  EXPECT_EQ(named->named, "get_time");
  // none: nothing offered to the template, nothing parsed.
  EXPECT_EQ(tools_ok(body_with(R"(,"tool_choice":"none")")), nullptr);
  EXPECT_EQ(tools_ok(R"({"tool_choice":"auto"})"), nullptr);
  // A tool without parameters takes no arguments.
  auto bare = tools_ok(R"({"tools":[{"type":"function","function":{"name":"ping"}}],"tool_choice":"required"})");
  ASSERT_TRUE(bare);
  EXPECT_TRUE(accepts(call_schema(*bare), R"([{"name":"ping","parameters":{}}])"));
}

TEST(ToolCallsTest, RefusalsNameTheField) {
  auto param = [](const std::string& body) { return tools_error(body).param; };
  EXPECT_EQ(param(R"({"tools":{}})"), "tools");
  EXPECT_EQ(param(R"({"tools":[1]})"), "tools[0]");
  EXPECT_EQ(param(R"({"tools":[{"type":"retrieval","function":{"name":"a"}}]})"), "tools[0].type");
  EXPECT_EQ(param(R"({"tools":[{"type":"function"}]})"), "tools[0].function");
  EXPECT_EQ(param(R"({"tools":[{"type":"function","function":{"name":"a b"}}]})"),
            "tools[0].function.name");
  EXPECT_EQ(param(R"({"tools":[{"type":"function","function":{"name":"a\"b"}}]})"),
            "tools[0].function.name");
  EXPECT_EQ(param(R"({"tools":[{"type":"function","function":{"name":"a\nb"}}]})"),
            "tools[0].function.name");
  EXPECT_EQ(param(R"({"tools":[{"type":"function","function":{"name":""}}]})"),
            "tools[0].function.name");
  EXPECT_EQ(param(R"({"tools":[{"type":"function","function":{"name":")" + std::string(65, 'x') +
                  R"("}}]})"),
            "tools[0].function.name");
  EXPECT_EQ(param(R"({"tools":[{"type":"function","function":{"name":"a"}},
                               {"type":"function","function":{"name":"a"}}]})"),
            "tools[1].function.name");
  EXPECT_EQ(param(R"({"tools":[{"type":"function","function":{"name":"a","parameters":[]}}]})"),
            "tools[0].function.parameters");
  EXPECT_EQ(param(R"({"tools":[{"type":"function","function":{"name":"a","description":5}}]})"),
            "tools[0].function.description");
  EXPECT_EQ(param(body_with(R"(,"tool_choice":"sometimes")")), "tool_choice");
  EXPECT_EQ(param(body_with(R"(,"tool_choice":{"type":"function","function":{"name":"nope"}})")),
            "tool_choice.function.name");
  EXPECT_EQ(param(body_with(R"(,"tool_choice":{"type":"function"})")), "tool_choice");
  EXPECT_EQ(param(body_with(R"(,"parallel_tool_calls":"yes")")), "parallel_tool_calls");
  EXPECT_EQ(param(R"({"tool_choice":"required"})"), "tool_choice");
  // A keyword the grammar engine does not support, only where it would
  // constrain: auto leaves schemas to the model.
  const std::string minimum =
    R"({"tools":[{"type":"function","function":{"name":"a","parameters":{"type":"object",
       "properties":{"n":{"type":"integer","minimum":3}}}}}])";
  EXPECT_TRUE(tools_ok(minimum + "}"));
  auto e = tools_error(minimum + R"(,"tool_choice":"required"})");
  EXPECT_EQ(e.param, "tools[0].function.parameters");
  EXPECT_NE(e.message.find("minimum"), std::string::npos) << e.message;
}

TEST(ToolCallsTest, HostileToolsAreRefusedNotServed) {
  // 10,000 tools.
  std::string many = R"({"tools":[)";
  for (int i = 0; i < 10000; ++i) {
    many += i ? "," : "";
    many += std::string{R"({"type":"function","function":{"name":"f)"} +
            std::to_string(i) + "\"}}";
  }
  many += "]}";
  auto e = tools_error(many);
  EXPECT_EQ(e.param, "tools");
  EXPECT_NE(e.message.find("10000"), std::string::npos);
  // A huge schema.
  std::string props;
  for (int i = 0; i < 5000; ++i) {
    props += i ? "," : "";
    props += std::string{"\"p"} + std::to_string(i) + R"(":{"type":"string"})";
  }
  e = tools_error(R"({"tools":[{"type":"function","function":{"name":"a","parameters":
    {"type":"object","properties":{)" + props + "}}}}]}");
  EXPECT_EQ(e.param, "tools[0].function.parameters");
  // Nesting past the limit is refused before anything is built.
  std::string deep = R"({"tools":[{"type":"function","function":{"name":"a","parameters":)";
  for (int i = 0; i < 10000; ++i)
    deep += R"({"items":)";
  deep += "{}";
  for (int i = 0; i < 10000; ++i)
    deep += "}";
  deep += "}}]}";
  EXPECT_EQ(tools_error(deep).status, 400);
  // Required over many tools whose schemas together pass the engine's bound.
  std::string wide = R"({"tool_choice":"required","tools":[)";
  std::string big_props;
  for (int i = 0; i < 300; ++i) {
    big_props += i ? "," : "";
    big_props += std::string{"\"p"} + std::to_string(i) + R"(":{"type":"string"})";
  }
  for (int i = 0; i < 10; ++i) {
    wide += i ? "," : "";
    wide += std::string{R"({"type":"function","function":{"name":"f)"} +
            std::to_string(i) + R"(","parameters":{"type":"object","properties":{)" + big_props + "}}}}";
  }
  wide += "]}";
  EXPECT_EQ(tools_error(wide).param, "tools");
}

TEST(ToolCallsTest, CallSchemasAcceptExactlyTheCalls) {
  auto named = tools_ok(body_with(R"(,"tool_choice":{"type":"function","function":{"name":"get_weather"}})"));
  ASSERT_TRUE(named);
  const auto ns = call_schema(*named);
  EXPECT_TRUE(accepts(ns, R"({"city":"Paris","unit":"c"})"));
  EXPECT_FALSE(accepts(ns, R"({"unit":"c"})"));
  EXPECT_FALSE(accepts(ns, R"({"city":"Paris","x":1})"));

  auto req = tools_ok(body_with(R"(,"tool_choice":"required")"));
  ASSERT_TRUE(req);
  const auto rs = call_schema(*req);
  EXPECT_TRUE(accepts(rs, R"([{"name":"get_weather","parameters":{"city":"Oslo"}}])"));
  EXPECT_TRUE(accepts(rs, R"([{"name":"get_weather","parameters":{"city":"Oslo"}},{"name":"get_time","parameters":{"zone":"UTC"}}])"));
  EXPECT_FALSE(accepts(rs, "[]"));
  EXPECT_FALSE(accepts(rs, R"([{"name":"get_time","parameters":{"city":"Oslo"}}])"));
  EXPECT_FALSE(accepts(rs, R"([{"name":"other","parameters":{}}])"));

  auto single = tools_ok(body_with(R"(,"tool_choice":"required","parallel_tool_calls":false)"));
  ASSERT_TRUE(single);
  EXPECT_TRUE(accepts(call_schema(*single), R"({"name":"get_time","parameters":{"zone":"UTC"}})"));
  EXPECT_FALSE(accepts(call_schema(*single), R"([{"name":"get_time","parameters":{"zone":"UTC"}}])"));
}

TEST(ToolCallsTest, ParsesHermesAndLlamaReplies) {
  auto t = tools_ok(body_with(""));
  ASSERT_TRUE(t);
  auto r = parse_tool_reply(*t, "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", "
                                "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>"
                                "{\"name\": \"get_time\", \"arguments\": {\"zone\": \"CET\"}}</tool_call>");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.content, "Let me check.\n");
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(r.calls[0].arguments, R"({"city":"Paris"})");
  EXPECT_EQ(r.calls[1].arguments, R"({"zone":"CET"})");
  EXPECT_TRUE(r.calls[0].id.starts_with("call_"));
  EXPECT_EQ(r.calls[0].id.size(), 29u);
  EXPECT_NE(r.calls[0].id, r.calls[1].id);

  r = parse_tool_reply(*t, R"(  {"name": "get_weather", "parameters": {"city": "Rome"}})");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.content, "");
  EXPECT_EQ(r.calls[0].arguments, R"({"city":"Rome"})");
  r = parse_tool_reply(*t, R"(<|python_tag|>{"name": "get_time", "parameters": {"zone": "A"}}; {"name": "get_time", "parameters": {"zone": "B"}})");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[1].arguments, R"({"zone":"B"})");

  // What does not parse, or names a function not offered, is content.
  for (const char* text :
       {"The weather is fine.", "<tool_call>{\"name\": \"get_weather\", \"arguments\": {</tool_call>",
        "<tool_call>{\"name\": \"rm_rf\", \"arguments\": {}}</tool_call>",
        "{\"name\": \"get_weather\", \"parameters\": 3}", "{\"city\": \"Paris\"}",
        "<tool_call>[]</tool_call>", ""}) {
    r = parse_tool_reply(*t, text);
    EXPECT_TRUE(r.calls.empty()) << text;
    EXPECT_EQ(r.content, text);
  }
  // Deep nesting in a reply is content, not a crash.
  std::string deep = "{\"name\": \"get_weather\", \"parameters\": " + std::string(100000, '[') +
                     std::string(100000, ']') + "}";
  EXPECT_TRUE(parse_tool_reply(*t, deep).calls.empty());

  auto req = tools_ok(body_with(R"(,"tool_choice":"required")"));
  r = parse_tool_reply(*req, R"([{"name":"get_time","parameters":{"zone":"UTC"}}])");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, R"({"zone":"UTC"})");
  auto named = tools_ok(body_with(R"(,"tool_choice":{"type":"function","function":{"name":"get_time"}})"));
  r = parse_tool_reply(*named, R"({"zone": "UTC"})");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "get_time");
  EXPECT_EQ(r.calls[0].arguments, R"({"zone": "UTC"})");
}

TEST(ToolCallsTest, StreamedContentHoldsWhatMayBeACall) {
  EXPECT_EQ(releasable_content("Hello there", 0), 11u);
  EXPECT_EQ(releasable_content("Hello <tool", 0), 6u);
  EXPECT_EQ(releasable_content("Hello <tool_call>{\"na", 3), 6u);
  EXPECT_EQ(releasable_content("Hello <b>", 0), 9u);
  EXPECT_EQ(releasable_content("  ", 0), 0u);
  EXPECT_EQ(releasable_content("  {\"name\"", 0), 0u);
  EXPECT_EQ(releasable_content("<|python", 0), 0u);
  EXPECT_EQ(releasable_content("<tool_call>", 0), 0u);
}

tessera::engine::request_output piece(std::string text, bool last = false) {
  tessera::engine::request_output o;
  o.text = std::move(text);
  o.tokens = {1};
  if (last)
    o.finish = tessera::engine::finish_reason::stop;
  return o;
}

// The tool-call pieces of SSE frames, by index: name and concatenated args.
struct streamed {
  std::string content;
  std::vector<std::pair<std::string, std::string>> calls; // name, arguments
  std::vector<std::string> ids;
  std::string finish;
};

void read_frames(const std::string& frames, streamed& s) {
  size_t pos = 0;
  while ((pos = frames.find("data: ", pos)) != std::string::npos) {
    pos += 6;
    auto end = frames.find("\n\n", pos);
    auto j = json::parse(frames.substr(pos, end - pos));
    const auto& c = j["choices"][0];
    if (c["finish_reason"].is_string())
      s.finish = c["finish_reason"];
    const auto& d = c["delta"];
    if (d.contains("content") && d["content"].is_string())
      s.content += d["content"].get<std::string>();
    if (d.contains("tool_calls"))
      for (const auto& t : d["tool_calls"]) {
        size_t i = t["index"];
        if (t.contains("id")) {
          ASSERT_EQ(i, s.calls.size()) << "id and name come first";
          s.ids.push_back(t["id"]);
          s.calls.emplace_back(t["function"]["name"], "");
        }
        ASSERT_LT(i, s.calls.size());
        s.calls[i].second += t["function"]["arguments"].get<std::string>();
      }
  }
}

TEST(ToolCallsTest, StreamsNamedArgumentsAsTheyCome) {
  auto named = tools_ok(body_with(R"(,"tool_choice":{"type":"function","function":{"name":"get_time"}})"));
  choice_output c;
  c.tools = named;
  response_meta meta{"chatcmpl-1", 0, "m"};
  streamed s;
  for (auto p : {piece("{\"zo"), piece("ne\": "), piece("\"UTC\"}"), piece("", true)})
    read_frames(chat_chunk(meta, c.append(p), {}), s);
  ASSERT_EQ(s.calls.size(), 1u);
  EXPECT_EQ(s.calls[0].first, "get_time");
  EXPECT_EQ(s.calls[0].second, c.text);
  EXPECT_EQ(s.content, "");
  EXPECT_EQ(s.finish, "tool_calls");

  // The whole answer: content null, the same arguments.
  auto body = json::parse(chat_response(meta, std::span{&c, 1}, {}, {}));
  const auto& msg = body["choices"][0]["message"];
  EXPECT_TRUE(msg["content"].is_null());
  EXPECT_EQ(msg["tool_calls"][0]["function"]["arguments"], c.text);
  EXPECT_EQ(msg["tool_calls"][0]["type"], "function");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "tool_calls");
}

TEST(ToolCallsTest, StreamsAutoContentThenCalls) {
  auto t = tools_ok(body_with(""));
  response_meta meta{"chatcmpl-1", 0, "m"};
  {
    choice_output c;
    c.tools = t;
    streamed s;
    for (auto p : {piece("Sure. <tool"), piece("_call>{\"name\": \"get_weather\", "),
                   piece("\"arguments\": {\"city\": \"Oslo\"}}</tool_call>"), piece("", true)})
      read_frames(chat_chunk(meta, c.append(p), {}), s);
    EXPECT_EQ(s.content, "Sure. ");
    ASSERT_EQ(s.calls.size(), 1u);
    EXPECT_EQ(s.calls[0].second, R"({"city":"Oslo"})");
    EXPECT_EQ(s.finish, "tool_calls");
    auto body = json::parse(chat_response(meta, std::span{&c, 1}, {}, {}));
    EXPECT_EQ(body["choices"][0]["message"]["content"], "Sure. ");
    EXPECT_EQ(body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"], s.calls[0].second);
  }
  {
    // Plain text streams as content, a held '{' that is no call too.
    choice_output c;
    c.tools = t;
    streamed s;
    auto d = c.append(piece("Hello"));
    EXPECT_EQ(d.text, "Hello");
    read_frames(chat_chunk(meta, d, {}), s);
    read_frames(chat_chunk(meta, c.append(piece(" world", true)), {}), s);
    EXPECT_EQ(s.content, "Hello world");
    EXPECT_EQ(s.finish, "stop");
    choice_output b;
    b.tools = t;
    streamed s2;
    EXPECT_EQ(b.append(piece("{not a call")).text, "");
    read_frames(chat_chunk(meta, b.append(piece("}", true)), {}), s2);
    EXPECT_EQ(s2.content, "{not a call}");
    EXPECT_TRUE(s2.calls.empty());
    auto body = json::parse(chat_response(meta, std::span{&b, 1}, {}, {}));
    EXPECT_EQ(body["choices"][0]["message"]["content"], "{not a call}");
    EXPECT_FALSE(body["choices"][0]["message"].contains("tool_calls"));
  }
}

TEST(ToolCallsTest, RequestsCarryToolsAndToolMessages) {
  auto r = parse_request(api_kind::chat, body_with(R"(,"tool_choice":"required")"));
  ASSERT_TRUE(std::holds_alternative<api_request>(r)) << std::get<api_error>(r).message;
  const auto& req = std::get<api_request>(r);
  ASSERT_TRUE(req.tools);
  EXPECT_EQ(req.params.structured_output.kind,
            tessera::engine::structured_output_params::kind_type::json_schema);
  EXPECT_EQ(req.params.structured_output.schema, call_schema(*req.tools));

  auto conv = parse_request(api_kind::chat, R"({"model":"m","messages":[
    {"role":"user","content":"weather?"},
    {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",
      "function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}]},
    {"role":"tool","tool_call_id":"call_1","content":"-3 C"}]})");
  ASSERT_TRUE(std::holds_alternative<api_request>(conv)) << std::get<api_error>(conv).message;
  const auto& m = std::get<api_request>(conv).messages;
  ASSERT_EQ(m.size(), 3u);
  EXPECT_NE(m[1].tool_calls.find("get_weather"), std::string::npos);
  EXPECT_EQ(m[2].tool_call_id, "call_1");

  auto err = [](const std::string& body) {
    auto x = parse_request(api_kind::chat, body);
    return std::holds_alternative<api_error>(x) ? std::get<api_error>(x).param : "accepted";
  };
  EXPECT_EQ(err(R"({"model":"m","messages":[{"role":"user","content":"x","tool_calls":[{"function":{"name":"a","arguments":"{}"}}]}]})"),
            "messages[0].tool_calls");
  EXPECT_EQ(err(R"({"model":"m","messages":[{"role":"assistant","tool_calls":[{"function":{"name":"a","arguments":{}}}]}]})"),
            "messages[0].tool_calls[0].function.arguments");
  EXPECT_EQ(err(R"({"model":"m","messages":[{"role":"assistant","tool_calls":{}}]})"),
            "messages[0].tool_calls");
  EXPECT_EQ(err(body_with(R"(,"tool_choice":"required","response_format":{"type":"json_object"})")),
            "response_format");
  EXPECT_EQ(err(body_with(R"(,"tool_choice":"bogus")")), "tool_choice");
  auto comp = parse_request(api_kind::completion, R"({"model":"m","prompt":"x","tools":[]})");
  ASSERT_TRUE(std::holds_alternative<api_error>(comp));
  EXPECT_EQ(std::get<api_error>(comp).param, "tools");
}

chat_template jinja(const std::string& source) {
  auto t = compile_chat_template(source, "test");
  EXPECT_TRUE(std::holds_alternative<chat_template>(t)) << std::get<api_error>(t).message;
  return std::get<chat_template>(t);
}

std::string render(const chat_template& t, const std::string& body) {
  auto r = parse_request(api_kind::chat, body);
  EXPECT_TRUE(std::holds_alternative<api_request>(r)) << std::get<api_error>(r).message;
  auto p = render_chat_request(t, std::get<api_request>(r), chat_special_tokens{});
  EXPECT_TRUE(std::holds_alternative<chat_prompt>(p)) << std::get<api_error>(p).message;
  return std::holds_alternative<chat_prompt>(p) ? std::get<chat_prompt>(p).text : "";
}

TEST(ToolCallsTest, TemplatesGetToolsOrAPreamble) {
  // Tool-aware, in the style of Qwen2.5's and Llama 3.1's templates.
  auto aware = jinja(
    "{% if tools %}TOOLS{% for t in tools %} {{ t.function.name }}{% endfor %}\n{% endif %}"
    "{% for m in messages %}{{ m.role }}:{{ m.content }}"
    "{% if m.tool_calls %}{% for c in m.tool_calls %}[CALL {{ c.function.name }} "
    "{{ c.function.arguments | tojson }}]{% endfor %}{% endif %}"
    "{% if m.tool_call_id %}({{ m.tool_call_id }}){% endif %}\n{% endfor %}");
  const std::string conv = R"(,"messages":[{"role":"user","content":"w?"},
    {"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather",
     "arguments":"{\"city\": \"Oslo\"}"}}]},{"role":"tool","tool_call_id":"c1","content":"cold"}]})";
  const std::string with_tools = R"({"model":"m","tools":[)" + std::string{weather_tool} + "]" + conv;
  EXPECT_EQ(render(aware, with_tools),
            "TOOLS get_weatheruser:w?assistant:[CALL get_weather {\"city\": \"Oslo\"}]"
            "tool:cold(c1)"); // trim_blocks, as transformers renders
  // tool_choice none: the template is not shown the tools.
  EXPECT_EQ(render(aware, R"({"model":"m","tool_choice":"none","tools":[)" + std::string{weather_tool} +
                            "]" + conv)
              .find("TOOLS"),
            std::string::npos);

  // A template without tool support: the tools in the system message,
  // calls and results as text.
  auto plain = jinja("{% for m in messages %}<{{ m.role }}>{{ m.content }}</{{ m.role }}>{% endfor %}");
  auto text = render(plain, with_tools);
  EXPECT_TRUE(text.starts_with("<system>You can call these functions:\n<tools>\n{")) << text;
  EXPECT_NE(text.find("\"name\":\"get_weather\""), std::string::npos) << text;
  EXPECT_NE(text.find("<assistant><tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call></assistant>"),
            std::string::npos)
    << text;
  EXPECT_NE(text.find("<user><tool_response>\ncold\n</tool_response></user>"), std::string::npos) << text;
  // Without tools a plain conversation renders as before.
  EXPECT_EQ(render(plain, R"({"model":"m","messages":[{"role":"user","content":"hi"}]})"),
            "<user>hi</user>");
}

} // namespace
