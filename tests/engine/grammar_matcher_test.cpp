// The matcher: byte by byte acceptance, rollback by copying, the
// serialised state a request carries between workers (and what a corrupt
// or foreign one gets), and the depth bound.
#include "engine/grammar/matcher.hpp"

#include <gtest/gtest.h>

#include "engine/grammar/json_schema.hpp"

namespace {

using namespace tessera::engine::grammar;
using nlohmann::json;

std::shared_ptr<const grammar> compile(const std::string& schema) {
  auto r = compile_json_schema_text(schema);
  EXPECT_TRUE(r.ok()) << r.error.text();
  return r.value;
}

const char* person =
    R"({"type":"object","properties":{"name":{"type":"string"},"tags":{"type":"array","items":{"type":"string"}}},"required":["name"],"additionalProperties":false})";

TEST(GrammarMatcherTest, RejectedByteLeavesTheStateUnchanged) {
  auto g = compile(person);
  grammar_matcher m(g);
  ASSERT_TRUE(m.accept_bytes(R"({"na)"));
  std::string before = m.serialize();
  EXPECT_FALSE(m.accept_byte('x'));
  EXPECT_EQ(m.serialize(), before);
  EXPECT_FALSE(m.accept_bytes(R"(me":1)"));
  EXPECT_EQ(m.serialize(), before);
  EXPECT_TRUE(m.accept_bytes(R"(me":"Al"})"));
  EXPECT_TRUE(m.can_end());
  EXPECT_TRUE(m.finished());
  EXPECT_FALSE(m.accept_byte(' '));
}

TEST(GrammarMatcherTest, CopiesAreIndependentForRollback) {
  auto g = compile(person);
  grammar_matcher m(g);
  ASSERT_TRUE(m.accept_bytes(R"({"name":"A)"));
  grammar_matcher saved = m;
  ASSERT_TRUE(m.accept_bytes(R"(", "tags": ["x"]})"));
  EXPECT_TRUE(m.can_end());
  EXPECT_FALSE(saved.can_end());
  EXPECT_TRUE(saved.accept_bytes(R"(b"})"));
  EXPECT_TRUE(saved.can_end());
}

TEST(GrammarMatcherTest, MinBytesToEndCountsTheShortestCompletion) {
  auto g = compile(person);
  grammar_matcher m(g);
  EXPECT_EQ(m.min_bytes_to_end(), std::string(R"({"name":""})").size());
  ASSERT_TRUE(m.accept_bytes(R"({"name":"abc)"));
  EXPECT_EQ(m.min_bytes_to_end(), 2u);
  ASSERT_TRUE(m.accept_bytes(R"("})"));
  EXPECT_EQ(m.min_bytes_to_end(), 0u);
}

TEST(GrammarMatcherTest, SerializedStateRoundTripsAndContinues) {
  auto g = compile(
      R"({"$defs":{"t":{"type":"array","items":{"$ref":"#/$defs/t"}}},"$ref":"#/$defs/t"})");
  grammar_matcher m(g);
  ASSERT_TRUE(m.accept_bytes("[[[], [["));
  std::string error;
  auto copy = grammar_matcher::deserialize(g, m.serialize(), error);
  ASSERT_TRUE(copy) << error;
  EXPECT_EQ(copy->serialize(), m.serialize());
  EXPECT_LT(m.serialize().size(), 200u);
  EXPECT_TRUE(copy->accept_bytes("]]]"));
  EXPECT_FALSE(copy->can_end());
  EXPECT_TRUE(copy->accept_bytes("]"));
  EXPECT_TRUE(copy->can_end());
}

TEST(GrammarMatcherTest, CorruptOrForeignStatesAreRefusedWithAReason) {
  auto g = compile(person);
  auto other = compile(R"({"type":"array"})");
  grammar_matcher m(g);
  ASSERT_TRUE(m.accept_bytes(R"({"name":"x)"));
  std::string good = m.serialize();
  std::string error;

  EXPECT_FALSE(grammar_matcher::deserialize(other, good, error));
  EXPECT_NE(error.find("different grammar"), std::string::npos) << error;

  EXPECT_FALSE(grammar_matcher::deserialize(g, "", error));
  EXPECT_NE(error.find("magic"), std::string::npos) << error;

  for (size_t cut = 4; cut < good.size(); ++cut) {
    EXPECT_FALSE(grammar_matcher::deserialize(g, good.substr(0, cut), error)) << cut;
    EXPECT_FALSE(error.empty());
  }
  EXPECT_FALSE(grammar_matcher::deserialize(g, good + "x", error));

  // A node id past the grammar: the last 4 bytes are the top node.
  std::string bad = good;
  for (size_t i = bad.size() - 4; i < bad.size(); ++i)
    bad[i] = '\xff';
  EXPECT_FALSE(grammar_matcher::deserialize(g, bad, error));
  EXPECT_NE(error.find("out of range"), std::string::npos) << error;

  // A huge stack count or depth is refused before any allocation.
  std::string huge = good;
  huge[16] = '\xff', huge[17] = '\xff', huge[18] = '\xff', huge[19] = '\x7f';
  EXPECT_FALSE(grammar_matcher::deserialize(g, huge, error));
  huge = good;
  huge[20] = '\xff', huge[21] = '\xff', huge[22] = '\xff', huge[23] = '\x7f';
  EXPECT_FALSE(grammar_matcher::deserialize(g, huge, error));
}

TEST(GrammarMatcherTest, NestingDeeperThanTheBoundIsRefused) {
  auto g = compile(R"({"type":"array"})");
  grammar_matcher m(g, 64);
  size_t opened = 0;
  while (opened < 200 && m.accept_byte('['))
    ++opened;
  EXPECT_LE(opened, 64u);
  EXPECT_GT(opened, 10u);
  // What was opened can still be closed.
  for (size_t i = 0; i < opened; ++i)
    ASSERT_TRUE(m.accept_byte(']')) << i;
  EXPECT_TRUE(m.can_end());
}

} // namespace
