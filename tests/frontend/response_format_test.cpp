// response_format: parsing each form, the 400s for malformed ones (naming
// the field), schema order kept, hostile bodies, and the compiled grammar
// accepting exactly the documents the schema allows.
#include "actors/frontend/response_format.hpp"

#include <gtest/gtest.h>

#include "engine/grammar/matcher.hpp"

namespace {

using namespace tessera::actors::frontend;
using tessera::engine::grammar::grammar_matcher;

response_format parse_ok(const std::string& body) {
  auto r = parse_response_format(body);
  const auto* e = std::get_if<api_error>(&r);
  EXPECT_EQ(e, nullptr) << (e ? e->message : "");
  return e ? response_format{} : std::get<response_format>(r);
}

api_error parse_error(const std::string& body) {
  auto r = parse_response_format(body);
  const auto* e = std::get_if<api_error>(&r);
  EXPECT_NE(e, nullptr) << body;
  return e ? *e : api_error{};
}

bool accepts(const std::shared_ptr<const tessera::engine::grammar::grammar>& g,
             const std::string& doc) {
  grammar_matcher m(g);
  return m.accept_bytes(doc) && m.can_end();
}

TEST(ResponseFormatTest, AbsentNullAndTextMeanNoConstraint) {
  EXPECT_EQ(parse_ok(R"({"model":"m"})").type, response_format::kind::text);
  EXPECT_EQ(parse_ok(R"({"response_format":null})").type, response_format::kind::text);
  auto f = parse_ok(R"({"response_format":{"type":"text"}})");
  EXPECT_EQ(f.type, response_format::kind::text);
  auto g = compile_response_format(f);
  ASSERT_TRUE(std::holds_alternative<std::shared_ptr<const tessera::engine::grammar::grammar>>(g));
  EXPECT_EQ(std::get<0>(g), nullptr);
}

TEST(ResponseFormatTest, JsonObjectCompilesToAnyObject) {
  auto f = parse_ok(R"({"response_format":{"type":"json_object"}})");
  EXPECT_EQ(f.type, response_format::kind::json_object);
  auto g = compile_response_format(f);
  ASSERT_EQ(g.index(), 0u);
  EXPECT_TRUE(accepts(std::get<0>(g), R"({"a":[1,{"b":null}]})"));
  EXPECT_FALSE(accepts(std::get<0>(g), "[1]"));
}

TEST(ResponseFormatTest, JsonSchemaKeepsPropertyOrder) {
  auto f = parse_ok(
      R"({"messages":[],"response_format":{"type":"json_schema","json_schema":{"name":"person_v1","strict":true,"schema":{"type":"object","properties":{"zeta":{"type":"integer"},"alpha":{"type":"string"}},"required":["zeta","alpha"],"additionalProperties":false}}}})");
  EXPECT_EQ(f.type, response_format::kind::json_schema);
  EXPECT_EQ(f.name, "person_v1");
  EXPECT_TRUE(f.strict);
  auto g = compile_response_format(f);
  ASSERT_EQ(g.index(), 0u) << std::get<api_error>(g).message;
  EXPECT_TRUE(accepts(std::get<0>(g), R"({"zeta":1,"alpha":"a"})"));
  EXPECT_FALSE(accepts(std::get<0>(g), R"({"alpha":"a","zeta":1})"));
}

TEST(ResponseFormatTest, MalformedFormsAre400sNamingTheField) {
  EXPECT_EQ(parse_error(R"({"response_format":"json"})").param, "response_format");
  EXPECT_EQ(parse_error(R"({"response_format":{}})").param, "response_format");
  EXPECT_EQ(parse_error(R"({"response_format":{"type":"xml"}})").param, "response_format.type");
  EXPECT_EQ(parse_error(R"({"response_format":{"type":"json_schema"}})").param,
            "response_format.json_schema");
  EXPECT_EQ(parse_error(R"({"response_format":{"type":"json_schema","json_schema":{"schema":{}}}})")
                .param,
            "response_format.json_schema.name");
  EXPECT_EQ(
      parse_error(
          R"({"response_format":{"type":"json_schema","json_schema":{"name":"a b","schema":{}}}})")
          .param,
      "response_format.json_schema.name");
  EXPECT_EQ(
      parse_error(R"({"response_format":{"type":"json_schema","json_schema":{"name":"a"}}})").param,
      "response_format.json_schema.schema");
  EXPECT_EQ(
      parse_error(
          R"({"response_format":{"type":"json_schema","json_schema":{"name":"a","strict":"yes","schema":{}}}})")
          .param,
      "response_format.json_schema.strict");
  api_error e = parse_error("{not json");
  EXPECT_EQ(e.status, 400);
}

TEST(ResponseFormatTest, UnsupportedSchemaKeywordIsA400NamingKeywordAndPointer) {
  auto f = parse_ok(
      R"({"response_format":{"type":"json_schema","json_schema":{"name":"a","schema":{"type":"object","properties":{"age":{"type":"integer","minimum":0}}}}}})");
  auto g = compile_response_format(f);
  ASSERT_EQ(g.index(), 1u);
  const api_error& e = std::get<api_error>(g);
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "response_format.json_schema.schema");
  EXPECT_NE(e.message.find("minimum"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("#/properties/age"), std::string::npos) << e.message;
}

TEST(ResponseFormatTest, HostileBodiesAreRefusedCheaply) {
  // Deep nesting inside the schema.
  std::string deep = R"({"response_format":{"type":"json_schema","json_schema":{"name":"a","schema":)";
  for (int i = 0; i < 100000; ++i)
    deep += "[";
  EXPECT_EQ(parse_error(deep).status, 400);
  // A schema past the size limit.
  std::string big = R"({"response_format":{"type":"json_schema","json_schema":{"name":"a","schema":{"description":")" +
                    std::string(100000, 'x') + R"("}}}})";
  EXPECT_EQ(parse_error(big).param, "response_format.json_schema.schema");
  // A schema whose automaton would be huge.
  auto f = parse_ok(
      R"({"response_format":{"type":"json_schema","json_schema":{"name":"a","schema":{"type":"string","pattern":"^[ab]*a[ab]{12}$","maxLength":1024}}}})");
  response_format_limits small;
  small.max_grammar_nodes = 20000;
  auto g = compile_response_format(f, small);
  ASSERT_EQ(g.index(), 1u);
  EXPECT_NE(std::get<api_error>(g).message.find("too large"), std::string::npos)
      << std::get<api_error>(g).message;
}

} // namespace
