// Structured output through the whole single-process cluster (serve_node,
// one prefill + one decode worker with every prompt prefilled remotely, so
// the schema crosses the wire and the decode worker replays the first
// token into its own matcher): completions and chat with response_format,
// streamed and not, give documents that parse and validate, the same as an
// aggregated server gives; a schema the compiler refuses is a 400 naming
// the keyword.

#include "actors/node/serve_node.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "tests/actors/nano_serve.hpp"
#include "tests/engine/grammar_corpus.hpp"
#include "tests/engine/grammar_test_support.hpp"
#include "tests/support/curl.hpp"
#include "tests/support/test_model.hpp"

namespace tessera::actors {
namespace {

using nlohmann::json;
using tessera::test::http_post_json;
using tessera::test::grammar_support::schema_corpus;

class StructuredServeTest : public ::testing::Test {
protected:
  StructuredServeTest() : sys(cfg) {}

  std::unique_ptr<serve_node> start(const std::string& mode) {
    auto o = tessera::test::nano_serve_options(mode);
    o.router.options.max_local_prefill_tokens = 0; // every prompt prefills remotely
    return tessera::test::start_ready(sys, o);
  }

  caf::actor_system_config cfg;
  caf::actor_system sys;
};

std::string check_document(const std::string& schema, const std::string& text) {
  json value = json::parse(text, nullptr, false);
  if (value.is_discarded())
    return "not JSON: " + text;
  json root = json::parse(schema);
  std::string why;
  if (!tessera::test::grammar_support::validate(root, root, value, why))
    return why + "\ndocument: " + text;
  return {};
}

json schema_format(const std::string& schema) {
  return {{"type", "json_schema"},
          {"json_schema", {{"name", "doc"}, {"strict", true}, {"schema", json::parse(schema)}}}};
}

// The text of a completion or chat answer, streamed or not.
std::string answer_text(const std::string& body, bool chat, bool stream) {
  if (!stream) {
    auto j = json::parse(body);
    return chat ? j["choices"][0]["message"]["content"].get<std::string>()
                : j["choices"][0]["text"].get<std::string>();
  }
  std::string text;
  size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    pos += 6;
    size_t end = body.find('\n', pos);
    std::string line = body.substr(pos, end - pos);
    if (line.starts_with("[DONE]"))
      break;
    auto j = json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("choices") && !j["choices"].empty()) {
      const auto& c = j["choices"][0];
      if (chat && c.contains("delta") && c["delta"].contains("content") && c["delta"]["content"].is_string())
        text += c["delta"]["content"].get<std::string>();
      if (!chat && c.contains("text"))
        text += c["text"].get<std::string>();
    }
  }
  return text;
}

TEST_F(StructuredServeTest, DisaggregatedOutputsValidateAndEqualAggregated) {
  auto disagg = start("disagg");
  auto agg = start("agg");
  ASSERT_TRUE(disagg && agg);
  const std::vector<size_t> picks{2, 19, 30, 37, 41, 45};
  int checked = 0;
  for (size_t s : picks) {
    const std::string& schema = schema_corpus()[s];
    for (float temperature : {0.0f, 1.0f})
      for (bool chat : {false, true})
        for (bool stream : {false, true}) {
          json b = {{"model", "nano"}, {"max_tokens", 120}, {"temperature", temperature},
                    {"seed", 11}, {"stream", stream}, {"response_format", schema_format(schema)}};
          if (chat)
            b["messages"] = {{{"role", "user"}, {"content", "Give me a document."}}};
          else
            b["prompt"] = "A JSON document:";
          const std::string path = chat ? "/v1/chat/completions" : "/v1/completions";
          auto d = http_post_json(disagg->url() + path, b.dump());
          ASSERT_EQ(d.status, 200) << d.body;
          auto a = http_post_json(agg->url() + path, b.dump());
          ASSERT_EQ(a.status, 200) << a.body;
          const auto dt = answer_text(d.body, chat, stream);
          EXPECT_EQ(check_document(schema, dt), "") << schema << " chat " << chat << " stream " << stream;
          EXPECT_EQ(dt, answer_text(a.body, chat, stream)) << schema << " t=" << temperature;
          ++checked;
        }
  }
  EXPECT_EQ(checked, 48);
}

TEST_F(StructuredServeTest, JsonObjectAndRefusals) {
  auto node = start("disagg");
  ASSERT_TRUE(node);
  json b = {{"model", "nano"}, {"max_tokens", 80}, {"temperature", 0.7}, {"seed", 3},
            {"messages", {{{"role", "user"}, {"content", "An object please."}}}},
            {"response_format", {{"type", "json_object"}}}};
  auto r = http_post_json(node->url() + "/v1/chat/completions", b.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  auto v = json::parse(answer_text(r.body, true, false), nullptr, false);
  EXPECT_TRUE(v.is_object()) << r.body;

  b["response_format"] = schema_format(R"({"type":"number","multipleOf":3})");
  r = http_post_json(node->url() + "/v1/chat/completions", b.dump());
  EXPECT_EQ(r.status, 400) << r.body;
  auto e = json::parse(r.body);
  EXPECT_EQ(e["error"]["param"], "response_format.json_schema.schema");
  EXPECT_NE(e["error"]["message"].get<std::string>().find("multipleOf"), std::string::npos) << r.body;

  b["response_format"] = {{"type", "json_object"}};
  b["ignore_eos"] = true;
  r = http_post_json(node->url() + "/v1/chat/completions", b.dump());
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("ignore_eos"), std::string::npos) << r.body;
}

} // namespace
} // namespace tessera::actors
