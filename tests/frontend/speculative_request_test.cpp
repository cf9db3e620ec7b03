// The request body's speculative field ({"method", "num_tokens"}) as
// actors/frontend/openai_request.cpp parses it: what is accepted, and a
// 400 naming the field for everything else.
#include <string>
#include <variant>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "actors/frontend/openai_request.hpp"

namespace {

using namespace tessera::actors::frontend;
using json = nlohmann::json;
using spec = tessera::engine::speculative_params;

api_result<api_request> parse(const json& speculative) {
  json body = {{"model", "m"}, {"prompt", "Hello"}, {"speculative", speculative}};
  return parse_request(api_kind::completion, body.dump());
}

TEST(SpeculativeRequestTest, AcceptsNgramAndDraftWithK) {
  auto r = parse({{"method", "ngram"}, {"num_tokens", 4}});
  ASSERT_TRUE(std::holds_alternative<api_request>(r)) << std::get<api_error>(r).message;
  const auto& p = std::get<api_request>(r).params;
  ASSERT_TRUE(p.speculative);
  EXPECT_EQ(*p.speculative, (spec{spec::method_kind::ngram, 4}));
  auto d = parse({{"method", "draft"}, {"num_tokens", 16.0}});
  ASSERT_TRUE(std::holds_alternative<api_request>(d)) << std::get<api_error>(d).message;
  EXPECT_EQ(*std::get<api_request>(d).params.speculative, (spec{spec::method_kind::draft, 16}));
  // null: the server's default.
  auto n = parse(nullptr);
  ASSERT_TRUE(std::holds_alternative<api_request>(n));
  EXPECT_FALSE(std::get<api_request>(n).params.speculative);
}

TEST(SpeculativeRequestTest, RejectsBadShapesNamingTheField) {
  const json bad_bodies[] = {
    "ngram",
    json::array({"ngram", 4}),
    {{"num_tokens", 4}},
    {{"method", "medusa"}, {"num_tokens", 4}},
    {{"method", 3}, {"num_tokens", 4}},
    {{"method", "ngram"}},
    {{"method", "ngram"}, {"num_tokens", 0}},
    {{"method", "ngram"}, {"num_tokens", 17}},
    {{"method", "ngram"}, {"num_tokens", 2.5}},
    {{"method", "ngram"}, {"num_tokens", "4"}},
    {{"method", std::string(5000, 'x')}, {"num_tokens", 4}},
  };
  for (const auto& b : bad_bodies) {
    auto r = parse(b);
    ASSERT_TRUE(std::holds_alternative<api_error>(r)) << b.dump();
    const auto& e = std::get<api_error>(r);
    EXPECT_EQ(e.status, 400) << b.dump();
    EXPECT_NE(e.param.find("speculative"), std::string::npos) << e.param << " for " << b.dump();
    EXPECT_NE(e.message.find("speculative"), std::string::npos) << e.message;
    EXPECT_LT(e.message.size(), 300u) << "the message does not echo a long value";
  }
}

} // namespace
