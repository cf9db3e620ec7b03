// A request's speculative setting (protocol::speculative_params) crosses the
// wire: round trips with and without it, and a peer's unknown method or
// out-of-range K is refused naming the field.
#include <gtest/gtest.h>

#include <cstring>

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
using bytes = std::vector<std::byte>;
using spec = protocol::speculative_params;

request_handoff decoded(const request_handoff& m) {
  auto f = encode(wire_message{m});
  EXPECT_TRUE(f) << error_text(f.error());
  auto back = decode(*f);
  EXPECT_TRUE(back) << error_text(back.error());
  return std::get<request_handoff>(*back);
}

TEST(WireSpeculativeTest, RoundTripsTheRequestsSetting) {
  auto m = test::full_handoff();
  m.request.params.speculative.reset();
  EXPECT_FALSE(decoded(m).request.params.speculative);
  for (auto sp : {spec{spec::method_kind::ngram, 4}, spec{spec::method_kind::draft, 16},
                  spec{spec::method_kind::none, 0}}) {
    m.request.params.speculative = sp;
    auto back = decoded(m).request.params.speculative;
    ASSERT_TRUE(back);
    EXPECT_EQ(*back, sp);
  }
}

using test::frame_of;

TEST(WireSpeculativeTest, RefusesAnUnknownMethodOrKNamingTheField) {
  struct bad_case {
    uint8_t method;
    int32_t tokens;
    const char* text;
  };
  for (const auto& c : {bad_case{7, 4, "params.speculative method 7"},
                        bad_case{1, 99, "speculative num_tokens must be in [1, 16], got 99"},
                        bad_case{1, 0, "speculative num_tokens must be in [1, 16], got 0"}}) {
    capnp::MallocMessageBuilder mb;
    auto r = mb.initRoot<s::RequestHandoff>();
    r.setRequestId(5);
    r.initPrompt(2).set(0, 3);
    auto p = r.initParams();
    p.setHasSpeculative(true);
    p.setSpeculativeMethod(c.method);
    p.setSpeculativeTokens(c.tokens);
    auto m = decode(frame_of(message_type::request_handoff, mb));
    ASSERT_FALSE(m) << c.text;
    EXPECT_NE(error_text(m.error()).find(c.text), std::string::npos) << error_text(m.error());
  }
}

} // namespace
} // namespace tessera::transport::wire
