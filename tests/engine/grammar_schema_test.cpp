// The schema compiler: what it refuses (with the keyword and pointer), and
// for each supported keyword, hand-written documents it must accept and
// reject.
#include "engine/grammar/json_schema.hpp"

#include <gtest/gtest.h>

#include "engine/grammar/matcher.hpp"

namespace {

using namespace tessera::engine::grammar;
using nlohmann::json;

std::shared_ptr<const grammar> compile(const std::string& schema) {
  auto r = compile_json_schema_text(schema);
  EXPECT_TRUE(r.ok()) << r.error.text();
  return r.value;
}

bool accepts(const std::shared_ptr<const grammar>& g, const std::string& doc) {
  grammar_matcher m(g);
  return m.accept_bytes(doc) && m.can_end();
}

grammar_error error_of(const std::string& schema) {
  auto r = compile_json_schema_text(schema);
  EXPECT_FALSE(r.ok()) << schema;
  return r.error;
}

struct keyword_case {
  const char* schema;
  std::vector<const char*> valid;
  std::vector<const char*> invalid;
};

TEST(GrammarSchemaTest, AcceptsValidAndRejectsInvalidDocumentsPerKeyword) {
  std::vector<keyword_case> cases = {
      {R"({"type":"null"})", {"null"}, {"nul", "nulll", "0", "\"null\"", " null"}},
      {R"({"type":"boolean"})", {"true", "false"}, {"True", "1", "tru"}},
      {R"({"type":"integer"})", {"0", "-7", "123456789"}, {"01", "-", "1.5", "1e3", "--1", "+1", "123456789012345678901"}},
      {R"({"type":"number"})", {"0", "-0.5", "1e10", "2.5E-3", "7", "12345678901234567890.5e-99"}, {"1.", ".5", "1e", "0x1", "1e100"}},
      {R"({"type":"string"})",
       {R"("")", R"("héllo")", R"("a\"b")", R"("tab\tnew\n")", R"("\u0001")"},
       {R"("abc)", "abc", "\"a\nb\"", R"("\x")", R"("\u0041")", "\"\xff\""}},
      {R"({"type":"string","minLength":2,"maxLength":3})",
       {R"("ab")", R"("abc")", R"("éé")", R"("a\n")"},
       {R"("a")", R"("abcd")", R"("")"}},
      {R"({"type":"string","pattern":"^[a-z]+-\\d{2}$"})",
       {R"("abc-12")", R"("x-00")"},
       {R"("abc-1")", R"("ABC-12")", R"("abc-123")", R"("-12")"}},
      {R"({"type":"string","pattern":"ab"})", {R"("ab")", R"("xxabyy")"}, {R"("a b")", R"("")"}},
      {R"({"type":"string","pattern":"^(cat|dog)s?$"})",
       {R"("cat")", R"("dogs")"},
       {R"("cow")", R"("cats!")"}},
      {R"({"type":"string","pattern":"^\\w+@\\w+\\.com$","maxLength":12})",
       {R"("ab@cd.com")"},
       {R"("abcd@efgh.com")", R"("ab@cd.org")"}},
      {R"({"enum":["red","green",3,null,{"a":[1]}]})",
       {R"("red")", "3", "null", R"({"a":[1]})"},
       {R"("blue")", "4", R"("Red")"}},
      {R"({"type":"string","format":"date-time"})",
       {R"("2024-02-28T13:05:59Z")", R"("1999-12-01T00:00:00.123+05:30")"},
       {R"("2024-02-28")", R"("2024-13-01T00:00:00Z")", R"("2024-02-28T24:00:00Z")"}},
      {R"({"format":"uuid"})",
       {R"("123e4567-e89b-12d3-a456-426614174000")"},
       {R"("123e4567e89b12d3a456426614174000")"}},
      {R"({"type":"string","format":"email"})", {R"("a.b@example.com")"}, {R"("a@b")", R"("@x.com")"}},
      {R"({"const":"fixed"})", {R"("fixed")"}, {R"("fixe")", R"("fixed2")"}},
      {R"({"type":"string","enum":["a",1,"b"]})", {R"("a")", R"("b")"}, {"1"}},
      {R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3})",
       {"[1]", "[1,2,3]", "[1, 2, 3]", "[ 1 ]"},
       {"[]", "[1,2,3,4]", "[1,]", "[\"a\"]", "[1  ,2]"}},
      {R"({"type":"array"})", {"[]", R"([1,"a",{"b":null},[true]])"}, {"[", "{}"}},
      {R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},"required":["a"],"additionalProperties":false})",
       {R"({"a":1})", R"({"a":1,"b":"x"})", R"({ "a": 1, "b": "x" })"},
       {R"({})", R"({"b":"x"})", R"({"a":"1"})", R"({"a":1,"c":2})", R"({"b":"x","a":1})"}},
      {R"({"type":"object","properties":{"a":{"type":"integer"}}})",
       {R"({})", R"({"a":1})", R"({"a":1,"zz":[1,{"q":null}]})", R"({"other":true})"},
       {R"({"a":"x"})", R"({"a":1,"a":2})"}},
      {R"({"type":"object","additionalProperties":{"type":"boolean"}})",
       {R"({})", R"({"x":true,"y":false})"},
       {R"({"x":1})"}},
      {R"({"anyOf":[{"type":"integer"},{"type":"string","maxLength":1}]})",
       {"5", R"("a")"},
       {R"("ab")", "true"}},
      {R"({"oneOf":[{"type":"null"},{"type":"boolean"}]})", {"null", "false"}, {"0"}},
      {R"({"type":["string","null"]})", {"null", R"("x")"}, {"1"}},
      {R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},"required":["v","next"],"additionalProperties":false}},"$ref":"#/$defs/node"})",
       {R"({"v":1,"next":null})", R"({"v":1,"next":{"v":2,"next":{"v":3,"next":null}}})"},
       {R"({"v":1})", R"({"v":1,"next":{"v":2}})"}},
      {R"({"definitions":{"t":{"type":"array","items":{"$ref":"#/definitions/t"}}},"$ref":"#/definitions/t"})",
       {"[]", "[[],[[]]]"},
       {"[1]", "[[],[1]]"}},
      {R"(true)", {"1", R"({"a":[]})"}, {"", "x"}},
      {R"({})", {"1", "null"}, {"nil"}},
  };
  for (const auto& c : cases) {
    auto g = compile(c.schema);
    ASSERT_TRUE(g) << c.schema;
    for (const char* doc : c.valid)
      EXPECT_TRUE(accepts(g, doc)) << c.schema << " should accept " << doc;
    for (const char* doc : c.invalid)
      EXPECT_FALSE(accepts(g, doc)) << c.schema << " should reject " << doc;
  }
}

TEST(GrammarSchemaTest, JsonObjectModeAcceptsAnyObjectOnly) {
  auto r = compile_json_object_mode();
  ASSERT_TRUE(r.ok()) << r.error.text();
  EXPECT_TRUE(accepts(r.value, "{}"));
  EXPECT_TRUE(accepts(r.value, R"({"a":[1,2,{"b":"c"}],"d":-1.5e3,"e":null})"));
  EXPECT_FALSE(accepts(r.value, "[]"));
  EXPECT_FALSE(accepts(r.value, "1"));
  EXPECT_FALSE(accepts(r.value, R"({"a":})"));
}

TEST(GrammarSchemaTest, WhitespaceIsBoundedPerGap) {
  auto g = compile(R"({"type":"array","items":{"type":"integer"}})");
  EXPECT_TRUE(accepts(g, "[ 1, 2 ]"));
  EXPECT_TRUE(accepts(g, "[\n1,\t2]"));
  EXPECT_FALSE(accepts(g, "[  1]"));
  EXPECT_FALSE(accepts(g, " [1]"));
  json_grammar_options none;
  none.max_whitespace = 0;
  auto tight = compile_json_schema_text(R"({"type":"array"})", none);
  ASSERT_TRUE(tight.ok());
  EXPECT_TRUE(accepts(tight.value, "[1,2]"));
  EXPECT_FALSE(accepts(tight.value, "[1, 2]"));
}

TEST(GrammarSchemaTest, UnsupportedKeywordsNameTheKeywordAndPointer) {
  auto e = error_of(R"({"type":"object","properties":{"age":{"type":"integer","minimum":0}}})");
  EXPECT_EQ(e.keyword, "minimum");
  EXPECT_EQ(e.pointer, "/properties/age");
  EXPECT_NE(e.text().find("minimum"), std::string::npos);
  EXPECT_NE(e.text().find("#/properties/age"), std::string::npos);

  e = error_of(R"({"type":"array","items":{"allOf":[{}]}})");
  EXPECT_EQ(e.keyword, "allOf");
  EXPECT_EQ(e.pointer, "/items");

  e = error_of(R"({"properties":{"a/b":{"format":"hostname"}}})");
  EXPECT_EQ(e.keyword, "format");
  EXPECT_NE(e.message.find("hostname"), std::string::npos);
  EXPECT_EQ(e.pointer, "/properties/a~1b");

  e = error_of(R"({"anyOf":[{"type":"string"},{"not":{}}]})");
  EXPECT_EQ(e.keyword, "not");
  EXPECT_EQ(e.pointer, "/anyOf/1");
}

TEST(GrammarSchemaTest, BadSchemasGetClearErrors) {
  EXPECT_EQ(error_of(R"({"type":"strin"})").keyword, "type");
  EXPECT_EQ(error_of(R"({"$ref":"http://example.com/s.json"})").keyword, "$ref");
  EXPECT_EQ(error_of(R"({"$ref":"#/$defs/missing"})").keyword, "$ref");
  EXPECT_EQ(error_of(R"({"type":"string","minLength":5,"maxLength":2})").keyword, "maxLength");
  EXPECT_EQ(error_of(R"({"type":"array","minItems":-1})").keyword, "minItems");
  EXPECT_EQ(error_of(R"({"type":"string","maxLength":100000})").keyword, "maxLength");
  EXPECT_EQ(error_of(R"({"type":"string","pattern":"(a"})").keyword, "pattern");
  EXPECT_EQ(error_of(R"({"type":"string","pattern":"(?=a)b"})").keyword, "pattern");
  EXPECT_EQ(error_of(R"({"type":"string","pattern":"(a)\\1"})").keyword, "pattern");
  EXPECT_EQ(error_of(R"({"type":"string","pattern":"a^b"})").keyword, "pattern");
  EXPECT_EQ(error_of(R"({"type":"string","pattern":"a{2000}"})").keyword, "pattern");
  EXPECT_EQ(error_of(R"({"enum":[]})").keyword, "enum");
  EXPECT_EQ(error_of(R"({"type":"integer","enum":["a"]})").keyword, "enum");
  EXPECT_EQ(error_of(R"({"type":"object","required":["x"],"additionalProperties":false})")
                .keyword,
            "required");
  EXPECT_EQ(error_of(R"(false)").keyword, "false");
  EXPECT_EQ(error_of(R"(42)").keyword, "");
  // Recursion with no base case has no finite instance.
  auto e = error_of(
      R"({"type":"object","properties":{"x":{"$ref":"#"}},"required":["x"],"additionalProperties":false})");
  EXPECT_NE(e.message.find("no finite"), std::string::npos) << e.text();
  // A reference to itself with no JSON text in between.
  e = error_of(R"({"$defs":{"a":{"anyOf":[{"$ref":"#/$defs/a"},{"type":"null"}]}},"$ref":"#/$defs/a"})");
  EXPECT_EQ(e.keyword, "$ref") << e.text();
}

TEST(GrammarSchemaTest, UnsatisfiablePatternAndLengthIsAnError) {
  auto e = error_of(R"({"type":"string","pattern":"^abcd$","maxLength":3})");
  EXPECT_NE(e.message.find("no finite"), std::string::npos) << e.text();
}

TEST(GrammarSchemaTest, OversizedSchemasFailBeforeBuildingTheAutomaton) {
  std::string schema = R"({"type":"object","properties":{)";
  for (int i = 0; i < 300; ++i) {
    if (i > 0)
      schema.append(",");
    schema.append("\"p").append(std::to_string(i)).append(R"(":{"type":"array","maxItems":1000})");
  }
  schema += "}}";
  json_grammar_options opts;
  opts.limits.max_nodes = 100'000;
  auto r = compile_json_schema_text(schema, opts);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error.message.find("too large"), std::string::npos) << r.error.text();
  EXPECT_FALSE(compile_json_schema_text("{not json").ok());
}

TEST(GrammarSchemaTest, AnnotationsAreIgnored) {
  auto g = compile(
      R"({"$schema":"https://json-schema.org/draft/2020-12/schema","title":"T","description":"d","type":"integer","default":1,"examples":[2]})");
  EXPECT_TRUE(accepts(g, "3"));
}

TEST(GrammarSchemaTest, ADeadEndAlternativeIsPrunedNotEntered) {
  // The second alternative can never finish; the matcher must not follow it.
  auto g = compile(R"({"anyOf":[{"type":"string","pattern":"^a$"},{"type":"string","pattern":"^b$","maxLength":0}]})");
  grammar_matcher m(g);
  EXPECT_TRUE(m.accept_byte('"'));
  EXPECT_FALSE(m.accept_byte('b'));
  EXPECT_TRUE(m.accept_byte('a'));
}

} // namespace
