// Function calling through a real server (serve_node, a random-weight nano
// model): with tool_choice required or a named function, every answer,
// greedy and sampled, whole and streamed, aggregated and disaggregated, is
// a tool call of an offered function whose arguments validate against its
// schema (the grammar's mask makes this hold for any weights); streamed
// pieces concatenate to the whole answer's calls. Hostile tools are 400s
// naming the field, and the server keeps serving.

#include "actors/node/serve_node.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "tests/actors/nano_serve.hpp"
#include "tests/engine/grammar_test_support.hpp"
#include "tests/support/curl.hpp"
#include "tests/support/test_model.hpp"

namespace tessera::actors {
namespace {

using nlohmann::json;
using tessera::test::http_post_json;

const json weather = json::parse(R"({"type":"function","function":{"name":"get_weather",
  "description":"Current weather","parameters":{"type":"object","properties":{
  "city":{"type":"string","maxLength":12},"unit":{"enum":["celsius","fahrenheit"]}},
  "required":["city","unit"],"additionalProperties":false}}})");
const json add = json::parse(R"({"type":"function","function":{"name":"add_numbers",
  "parameters":{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"number"},
  "exact":{"type":"boolean"},"tags":{"type":"array","items":{"type":"string","maxLength":5},
  "maxItems":3}},"required":["a","b"],"additionalProperties":false}}})");

class ToolServeTest : public ::testing::Test {
protected:
  ToolServeTest() : sys(cfg) {}

  std::unique_ptr<serve_node> start(const std::string& mode) {
    auto o = tessera::test::nano_serve_options(mode);
    // The nano model's context is 512 tokens: a compact template that
    // renders tools (the model's own gets the longer preamble).
    o.chat_template =
      "{% if tools %}<tools>{% for t in tools %}{{ t.function.name }};{% endfor %}</tools>{% endif %}"
      "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% if m.tool_calls %}{% for c in "
      "m.tool_calls %}<call>{{ c.function.name }}{{ c.function.arguments | tojson }}</call>"
      "{% endfor %}{% endif %}</{{ m.role }}>{% endfor %}{% if add_generation_prompt %}"
      "<assistant>{% endif %}";
    if (mode == "disagg")
      o.router.options.max_local_prefill_tokens = 0; // every prompt prefills remotely
    return tessera::test::start_ready(sys, o);
  }

  caf::actor_system_config cfg;
  caf::actor_system sys;
};

struct call {
  std::string id, name, arguments;
  bool operator==(const call& o) const { return name == o.name && arguments == o.arguments; }
};

struct answer {
  std::vector<call> calls;
  json content;
  std::string finish;
};

answer whole(const std::string& body) {
  auto j = json::parse(body);
  const auto& c = j["choices"][0];
  answer a;
  a.finish = c["finish_reason"].is_string() ? c["finish_reason"].get<std::string>() : "";
  a.content = c["message"]["content"];
  if (c["message"].contains("tool_calls"))
    for (const auto& t : c["message"]["tool_calls"]) {
      EXPECT_EQ(t["type"], "function");
      a.calls.push_back({t["id"], t["function"]["name"], t["function"]["arguments"]});
    }
  return a;
}

answer streamed(const std::string& body) {
  answer a;
  std::string content;
  size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    pos += 6;
    auto line = body.substr(pos, body.find('\n', pos) - pos);
    if (line.starts_with("[DONE]"))
      break;
    auto j = json::parse(line);
    if (j["choices"].empty())
      continue;
    const auto& c = j["choices"][0];
    if (c["finish_reason"].is_string())
      a.finish = c["finish_reason"];
    const auto& d = c["delta"];
    if (d.contains("content") && d["content"].is_string())
      content += d["content"].get<std::string>();
    if (d.contains("tool_calls"))
      for (const auto& t : d["tool_calls"]) {
        size_t i = t["index"];
        if (t.contains("id")) {
          EXPECT_EQ(i, a.calls.size()) << "a call starts with its id and name";
          a.calls.push_back({t["id"], t["function"]["name"], ""});
        }
        if (i >= a.calls.size()) {
          ADD_FAILURE() << "arguments before the call's id: " << line;
          continue;
        }
        a.calls[i].arguments += t["function"]["arguments"].get<std::string>();
      }
  }
  a.content = content.empty() ? json(nullptr) : json(content);
  return a;
}

std::string check_call(const call& c, const json& tools) {
  for (const auto& t : tools)
    if (t["function"]["name"] == c.name) {
      auto args = json::parse(c.arguments, nullptr, false);
      if (args.is_discarded())
        return "arguments are not JSON: " + c.arguments;
      const json& schema = t["function"]["parameters"];
      std::string why;
      if (!tessera::test::grammar_support::validate(schema, schema, args, why))
        return why + " in " + c.arguments;
      if (!c.id.starts_with("call_"))
        return "id " + c.id;
      return {};
    }
  return "not an offered function: " + c.name;
}

TEST_F(ToolServeTest, RequiredAndNamedChoicesAlwaysCallWithValidArguments) {
  const json tools = {weather, add};
  const std::vector<json> choices = {
    "required", {{"type", "function"}, {"function", {{"name", "get_weather"}}}},
    {{"type", "function"}, {"function", {{"name", "add_numbers"}}}}};
  int checked = 0;
  for (const std::string mode : {"agg", "disagg"}) {
    auto node = start(mode);
    ASSERT_TRUE(node);
    for (const auto& choice : choices)
      for (bool parallel : {true, false})
        for (float temperature : {0.0f, 1.0f}) {
          if (!choice.is_string() && !parallel)
            continue;
          json b = {{"model", "nano"}, {"max_tokens", 160}, {"temperature", temperature},
                    {"seed", 5 + checked}, {"tools", tools}, {"tool_choice", choice},
                    {"parallel_tool_calls", parallel},
                    {"messages", {{{"role", "user"}, {"content", "What is the weather?"}}}}};
          auto r = http_post_json(node->url() + "/v1/chat/completions", b.dump());
          ASSERT_EQ(r.status, 200) << r.body;
          auto a = whole(r.body);
          ASSERT_FALSE(a.calls.empty()) << r.body;
          EXPECT_TRUE(a.content.is_null()) << r.body;
          // A parallel required call is an array the model may go on
          // adding calls to until max_tokens: closed in time, but "length".
          const bool open_ended = choice.is_string() && parallel;
          EXPECT_TRUE(a.finish == "tool_calls" || (open_ended && a.finish == "length")) << r.body;
          if (!choice.is_string() || !parallel) {
            EXPECT_EQ(a.calls.size(), 1u);
          }
          for (const auto& c : a.calls) {
            EXPECT_EQ(check_call(c, tools), "") << r.body;
            if (!choice.is_string()) {
              EXPECT_EQ(c.name, choice["function"]["name"]);
            }
          }
          b["stream"] = true;
          auto s = http_post_json(node->url() + "/v1/chat/completions", b.dump());
          ASSERT_EQ(s.status, 200) << s.body;
          auto sa = streamed(s.body);
          EXPECT_EQ(sa.calls, a.calls) << s.body;
          EXPECT_EQ(sa.finish, a.finish) << s.body;
          EXPECT_TRUE(sa.content.is_null()) << s.body;
          ++checked;
        }
  }
  EXPECT_EQ(checked, 16);
}

TEST_F(ToolServeTest, AutoAnswersAndHostileToolsAreRefused) {
  auto node = start("agg");
  ASSERT_TRUE(node);
  const std::string url = node->url() + "/v1/chat/completions";
  // auto on random weights: whatever the model wrote, a well-formed answer.
  json b = {{"model", "nano"}, {"max_tokens", 24}, {"seed", 1}, {"tools", {weather, add}},
            {"messages", {{{"role", "system"}, {"content", "Use tools."}},
                          {{"role", "user"}, {"content", "Weather in Oslo?"}},
                          {{"role", "assistant"}, {"content", nullptr},
                           {"tool_calls", {{{"id", "call_1"}, {"type", "function"},
                                            {"function", {{"name", "get_weather"},
                                                          {"arguments", R"({"city":"Oslo"})"}}}}}}},
                          {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "-3"}}}}};
  for (bool stream : {false, true}) {
    b["stream"] = stream;
    auto r = http_post_json(url, b.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    auto a = stream ? streamed(r.body) : whole(r.body);
    EXPECT_TRUE(a.finish == "stop" || a.finish == "length" || a.finish == "tool_calls") << r.body;
    for (const auto& c : a.calls)
      EXPECT_EQ(check_call(c, json{weather, add}), "");
  }

  auto refused = [&](const json& body, const std::string& param) {
    auto r = http_post_json(url, body.dump());
    EXPECT_EQ(r.status, 400) << r.body.substr(0, 300);
    auto e = json::parse(r.body, nullptr, false);
    EXPECT_EQ(e.is_object() ? e["error"]["param"] : json(), param) << r.body.substr(0, 300);
  };
  json base = {{"model", "nano"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  auto with = [&](const json& extra) {
    json b = base;
    b.update(extra);
    return b;
  };
  json many = json::array();
  for (int i = 0; i < 10000; ++i)
    many.push_back({{"type", "function"}, {"function", {{"name", "f" + std::to_string(i)}}}});
  refused(with({{"tools", many}}), "tools");
  for (const char* name : {"a\"b", "a\nb", "", "<tool_call>"})
    refused(with({{"tools", {{{"type", "function"}, {"function", {{"name", name}}}}}}}),
            "tools[0].function.name");
  json props = json::object();
  for (int i = 0; i < 5000; ++i)
    props["p" + std::to_string(i)] = {{"type", "string"}};
  refused(with({{"tools", {{{"type", "function"},
                                         {"function", {{"name", "a"},
                                                       {"parameters", {{"type", "object"}, {"properties", props}}}}}}}}}),
          "tools[0].function.parameters");
  json deep = json::object();
  for (int i = 0; i < 80; ++i) // past the body's 64 levels
    deep = {{"type", "array"}, {"items", deep}};
  auto r = http_post_json(url, with({{"tool_choice", "required"},
                                                  {"tools", {{{"type", "function"},
                                                              {"function", {{"name", "a"}, {"parameters", deep}}}}}}}).dump());
  EXPECT_EQ(r.status, 400) << r.body.substr(0, 300);
  refused(with({{"tools", {weather}}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "rm"}}}}}}),
          "tool_choice.function.name");
  // Still serving.
  auto ok = http_post_json(url, with({{"max_tokens", 4}}).dump());
  EXPECT_EQ(ok.status, 200) << ok.body;
}

} // namespace
} // namespace tessera::actors
