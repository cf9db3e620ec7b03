// A request's structured-output setting (protocol::structured_output_params)
// crosses the wire: kind and schema text round trip; an unknown kind, an
// oversized schema, a schema without json_schema, or one with ignore_eos
// from a peer are refused naming the field.
#include <gtest/gtest.h>

#include <capnp/message.h>
#include <capnp/serialize.h>

#include "common/error.hpp"
#include "transport/schema/request.capnp.h"
#include "transport/wire/codec.hpp"
#include "transport/wire/frame.hpp"
#include "raw_frame.hpp"
#include "wire_samples.hpp"

namespace tessera::transport::wire {
namespace {

namespace s = tessera::transport::schema;
using so = protocol::structured_output_params;

request_handoff decoded(const request_handoff& m) {
  auto f = encode(wire_message{m});
  EXPECT_TRUE(f) << error_text(f.error());
  auto back = decode(*f);
  EXPECT_TRUE(back) << error_text(back.error());
  return std::get<request_handoff>(*back);
}

TEST(WireStructuredTest, RoundTripsKindAndSchemaText) {
  auto m = test::full_handoff();
  m.request.params.ignore_eos = false;
  m.request.params.structured_output = {};
  EXPECT_EQ(decoded(m).request.params.structured_output, so{});
  // Key order is part of the schema (properties are written in it).
  const std::string schema = R"({"type":"object","properties":{"z":{"type":"integer"},"a":{"type":"string"}}})";
  for (const auto& want : {so{so::kind_type::json_object, ""}, so{so::kind_type::json_schema, schema}}) {
    m.request.params.structured_output = want;
    EXPECT_EQ(decoded(m).request.params.structured_output, want);
  }
}

TEST(WireStructuredTest, RefusesBadSettingsNamingTheField) {
  struct bad_case {
    uint8_t kind;
    std::string schema;
    bool ignore_eos;
    std::string text;
  };
  const std::vector<bad_case> cases{
    {9, "", false, "params.structured_output kind 9"},
    {2, std::string(so::max_schema_bytes + 1, 'x'), false, "params.structured_output.schema"},
    {1, "{}", false, "carries a schema only for json_schema"},
    {2, "", false, "json_schema needs a schema"},
    {1, "", true, "ignore_eos cannot be combined with structured output"},
  };
  for (const auto& c : cases) {
    capnp::MallocMessageBuilder mb;
    auto r = mb.initRoot<s::RequestHandoff>();
    r.setRequestId(5);
    r.initPrompt(2).set(0, 3);
    auto p = r.initParams();
    p.setStructuredKind(c.kind);
    p.setStructuredSchema(capnp::Text::Reader(c.schema.data(), c.schema.size()));
    p.setIgnoreEos(c.ignore_eos);
    auto m = decode(test::frame_of(message_type::request_handoff, mb));
    ASSERT_FALSE(m) << c.text;
    EXPECT_NE(error_text(m.error()).find(c.text), std::string::npos) << error_text(m.error());
  }
}

} // namespace
} // namespace tessera::transport::wire
