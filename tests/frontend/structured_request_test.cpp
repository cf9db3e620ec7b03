// response_format through parse_request, on both endpoints: json_object and
// json_schema reach the engine's params (the schema text with its key
// order), text leaves them unconstrained, and the 400s name the field or
// the schema keyword; ignore_eos with a response_format is refused.
#include "actors/frontend/openai_request.hpp"

#include <gtest/gtest.h>

namespace {

using namespace tessera::actors::frontend;
using so = tessera::engine::structured_output_params::kind_type;

std::variant<api_request, api_error> parse(api_kind kind, const std::string& rf,
                                           const std::string& extra = "") {
  std::string body = kind == api_kind::chat
                       ? R"({"model":"m","messages":[{"role":"user","content":"Hi"}])"
                       : R"({"model":"m","prompt":"Hi")";
  body += R"(,"response_format":)" + rf + extra + "}";
  return parse_request(kind, body);
}

TEST(StructuredRequestTest, BothEndpointsCarryTheFormatToTheEngine) {
  for (auto kind : {api_kind::chat, api_kind::completion}) {
    auto r = parse(kind, R"({"type":"json_object"})");
    ASSERT_EQ(r.index(), 0u) << std::get<api_error>(r).message;
    EXPECT_EQ(std::get<api_request>(r).params.structured_output.kind, so::json_object);
    EXPECT_TRUE(std::get<api_request>(r).params.structured_output.schema.empty());

    r = parse(kind, R"({"type":"json_schema","json_schema":{"name":"p","strict":true,"schema":{"type":"object","properties":{"zeta":{"type":"integer"},"alpha":{"type":"string"}}}}})");
    ASSERT_EQ(r.index(), 0u) << std::get<api_error>(r).message;
    const auto& st = std::get<api_request>(r).params.structured_output;
    EXPECT_EQ(st.kind, so::json_schema);
    EXPECT_EQ(st.schema,
              R"({"type":"object","properties":{"zeta":{"type":"integer"},"alpha":{"type":"string"}}})")
      << "key order kept";

    for (const char* none : {R"({"type":"text"})", "null"}) {
      r = parse(kind, none);
      ASSERT_EQ(r.index(), 0u);
      EXPECT_EQ(std::get<api_request>(r).params.structured_output.kind, so::none);
    }
  }
}

TEST(StructuredRequestTest, RefusalsNameTheFieldOrKeyword) {
  struct bad_case {
    std::string rf, extra, param, text;
  };
  const std::vector<bad_case> cases{
    {R"({"type":"xml"})", "", "response_format.type", "got xml"},
    {R"("json_object")", "", "response_format", "must be an object"},
    {R"({"type":"json_schema"})", "", "response_format.json_schema", "must be an object"},
    {R"({"type":"json_schema","json_schema":{"name":"a b","schema":{}}})", "",
     "response_format.json_schema.name", "letters"},
    {R"({"type":"json_schema","json_schema":{"name":"n","schema":{"type":"string","format":"hostname"}}})",
     "", "response_format.json_schema.schema", "format"},
    {R"({"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object","patternProperties":{}}}})",
     "", "response_format.json_schema.schema", "patternProperties"},
    {R"({"type":"json_object"})", R"(,"ignore_eos":true)", "", "ignore_eos"},
  };
  for (auto kind : {api_kind::chat, api_kind::completion})
    for (const auto& c : cases) {
      auto r = parse(kind, c.rf, c.extra);
      ASSERT_EQ(r.index(), 1u) << c.rf;
      const auto& e = std::get<api_error>(r);
      EXPECT_EQ(e.status, 400);
      if (!c.param.empty()) {
        EXPECT_EQ(e.param, c.param) << e.message;
      }
      EXPECT_NE(e.message.find(c.text), std::string::npos) << e.message;
    }
}

} // namespace
