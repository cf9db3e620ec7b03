// The native client SDK's wire messages (protocol/client.hpp): each round
// trips field for field, and a client frame that is oversized, out of range
// or contradictory is refused by name on decode, never trusted. An attacker
// holding the cluster secret can send any bytes; these are what it gets.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>

#include <capnp/message.h>

#include "common/error.hpp"
#include "transport/schema/client.capnp.h"
#include "transport/schema/tokens.capnp.h"
#include "transport/wire/codec.hpp"
#include "transport/wire/validate.hpp"
#include "raw_frame.hpp"
#include "wire_expect.hpp"

namespace tessera::transport::wire {
namespace {

namespace s = tessera::transport::schema;
using protocol::client_errc;
using protocol::prompt_kind;

client_submit chat_submit() {
  client_submit m;
  m.request_id = 42;
  m.client = "sdk-7f3a";
  m.model = "nano";
  m.kind = prompt_kind::chat;
  m.messages = {{"system", "be brief"}, {"user", "hello \xe2\x9c\x93"}};
  m.params.temperature = 0.5f;
  m.params.seed = 7;
  m.params.max_tokens = 33;
  m.params.stop = {"\n\n"};
  m.params.logprobs = 3;
  m.priority = -3;
  m.api_key = "sk-tenant";
  m.detokenize = false;
  return m;
}

/// A chunk of two tokens with logprobs, the second with three alternatives
/// (the first -inf: a token the model gives no chance is a legal answer).
token_chunk logprob_chunk() {
  token_chunk c;
  c.id = 42;
  c.tokens = {17, 4};
  c.text = "ab";
  c.output_tokens = 2;
  c.prompt_tokens = 5;
  c.logprobs = {{17, -0.25f, {}},
                {4, -1.5f, {{9, -0.5f}, {4, -1.5f}, {2, -std::numeric_limits<float>::infinity()}}}};
  return c;
}

std::vector<wire_message> client_samples() {
  client_submit ids;
  ids.request_id = 1;
  ids.kind = prompt_kind::token_ids;
  ids.prompt_ids = {1, 2, 3, 500};
  client_submit text;
  text.request_id = 2;
  text.kind = prompt_kind::text;
  text.prompt_text = "Once upon a time";
  return {chat_submit(),
          ids,
          text,
          client_accepted{42, {5, 6, 7}, "nano"},
          client_cancel{42, "sdk-7f3a"},
          cluster_info{{"nano"}, true, 2, 3, 2048, false},
          client_failed{42, client_errc::unauthorized, 401, "authentication_error", "invalid_api_key", "",
                        "Incorrect API key provided."},
          logprob_chunk()};
}

TEST(WireClientTest, EveryClientMessageRoundTrips) {
  for (const auto& m : client_samples()) {
    auto f = encode(m);
    ASSERT_TRUE(f) << error_text(f.error());
    auto back = decode(*f);
    ASSERT_TRUE(back) << error_text(back.error());
    test::expect_same(m, *back);
  }
}

TEST(WireClientTest, TypesFollowTheRouterMessages) {
  EXPECT_EQ(type_of(wire_message{client_submit{}}), message_type::client_submit);
  EXPECT_EQ(type_of(wire_message{client_failed{}}), message_type::client_failed);
  EXPECT_EQ(static_cast<uint16_t>(message_type::client_failed), max_message_type);
  EXPECT_EQ(to_string(message_type::cluster_info), "cluster_info");
}

/// The error text of encoding `m` (the sender's check), or "" if it encodes.
std::string refusal_of(const wire_message& m) {
  auto f = encode(m);
  return f ? std::string{} : error_text(f.error());
}

TEST(WireClientTest, ContradictoryOrEmptySubmitsAreRefusedByName) {
  auto m = chat_submit();
  m.request_id = 0;
  EXPECT_NE(refusal_of(m).find("request_id must not be 0"), std::string::npos) << refusal_of(m);
  m = chat_submit();
  m.prompt_text = "and text too";
  EXPECT_NE(refusal_of(m).find("only messages may be set"), std::string::npos) << refusal_of(m);
  EXPECT_NE(refusal_of(m).find("prompt_text is set too"), std::string::npos) << refusal_of(m);
  m = chat_submit();
  m.messages.clear();
  EXPECT_NE(refusal_of(m).find("messages must not be empty"), std::string::npos) << refusal_of(m);
  m = chat_submit();
  m.kind = prompt_kind::token_ids;
  EXPECT_NE(refusal_of(m).find("prompt_ids must not be empty"), std::string::npos) << refusal_of(m);
  m = chat_submit();
  m.messages[1].role.clear();
  EXPECT_NE(refusal_of(m).find("messages[1].role must not be empty"), std::string::npos) << refusal_of(m);
  m = chat_submit();
  m.priority = 2'000'000;
  EXPECT_NE(refusal_of(m).find("priority must be in"), std::string::npos) << refusal_of(m);
  m = chat_submit();
  m.params.top_p = 2.0f;
  EXPECT_NE(refusal_of(m).find("params: "), std::string::npos) << refusal_of(m);
  client_submit ids;
  ids.request_id = 1;
  ids.kind = prompt_kind::token_ids;
  ids.prompt_ids = {3, -1};
  EXPECT_NE(refusal_of(ids).find("prompt_ids[1] must be >= 0"), std::string::npos) << refusal_of(ids);
}

TEST(WireClientTest, BadRepliesAreRefusedByName) {
  EXPECT_NE(refusal_of(client_failed{1, client_errc::internal, 200, "x", "", "", "m"}).find("http_status"),
            std::string::npos);
  EXPECT_NE(refusal_of(client_failed{1, static_cast<client_errc>(0), 500, "x", "", "", "m"}).find("code out of range"),
            std::string::npos);
  EXPECT_NE(refusal_of(cluster_info{{"a"}, true, 5, 3, 10, false}).find("healthy_workers"), std::string::npos);
  EXPECT_NE(refusal_of(cluster_info{{""}, true, 0, 0, 10, false}).find("models[0] must not be empty"),
            std::string::npos);
  EXPECT_NE(refusal_of(client_cancel{0, ""}).find("request_id must not be 0"), std::string::npos);
}

/// Decodes a raw frame a hostile peer built (no encoder check on the way).
std::string decode_refusal(message_type t, capnp::MessageBuilder& mb) {
  auto back = decode(test::frame_of(t, mb));
  return back ? std::string{} : error_text(back.error());
}

TEST(WireClientTest, HostileFramesAreRefusedOnDecodeByName) {
  {
    // Two prompts at once: refused, not read one way or the other.
    capnp::MallocMessageBuilder mb;
    auto b = mb.initRoot<s::ClientSubmit>();
    b.setRequestId(9);
    b.setKind(1);
    b.setPromptText("text");
    b.initPromptIds(2).set(0, 5);
    b.initParams().setMaxTokens(4);
    b.getParams().setTopP(1.0f);
    b.getParams().setTemperature(1.0f);
    auto why = decode_refusal(message_type::client_submit, mb);
    EXPECT_NE(why.find("client_submit: only prompt_text may be set"), std::string::npos) << why;
  }
  {
    capnp::MallocMessageBuilder mb;
    auto b = mb.initRoot<s::ClientSubmit>();
    b.setRequestId(9);
    b.setKind(7);
    auto why = decode_refusal(message_type::client_submit, mb);
    EXPECT_NE(why.find("client_submit: kind 7 is not"), std::string::npos) << why;
  }
  {
    // An api key of 64 KiB: bounded before it is copied.
    capnp::MallocMessageBuilder mb;
    auto b = mb.initRoot<s::ClientSubmit>();
    b.setRequestId(9);
    std::string key(65536, 'k');
    b.setApiKey(key);
    auto why = decode_refusal(message_type::client_submit, mb);
    EXPECT_NE(why.find("api_key has 65536 bytes, more than the maximum 1024"), std::string::npos) << why;
  }
  {
    capnp::MallocMessageBuilder mb;
    auto b = mb.initRoot<s::ClientSubmit>();
    b.setRequestId(9);
    b.setKind(2);
    b.initMessages(static_cast<unsigned>(protocol::max_client_messages + 1));
    auto why = decode_refusal(message_type::client_submit, mb);
    EXPECT_NE(why.find("messages has 4097 entries"), std::string::npos) << why;
  }
  {
    capnp::MallocMessageBuilder mb;
    auto b = mb.initRoot<s::ClientSubmit>();
    b.setRequestId(9);
    b.setKind(2);
    auto msgs = b.initMessages(1);
    msgs[0].setRole(std::string(100, 'r'));
    auto why = decode_refusal(message_type::client_submit, mb);
    EXPECT_NE(why.find("messages[0].role has 100 bytes"), std::string::npos) << why;
  }
  {
    capnp::MallocMessageBuilder mb;
    auto b = mb.initRoot<s::ClientFailed>();
    b.setRequestId(1);
    b.setCode(200);
    auto why = decode_refusal(message_type::client_failed, mb);
    EXPECT_NE(why.find("client_failed: code 200 is not a client_errc"), std::string::npos) << why;
  }
  {
    capnp::MallocMessageBuilder mb;
    auto b = mb.initRoot<s::ClusterInfo>();
    b.initModels(static_cast<unsigned>(protocol::max_client_models + 1));
    auto why = decode_refusal(message_type::cluster_info, mb);
    EXPECT_NE(why.find("cluster_info: models has 257 entries"), std::string::npos) << why;
  }
}

TEST(WireClientTest, LogprobsCrossBothWaysBoundedAndChecked) {
  // A submit asking for the chosen token's logprob and 5 alternatives, and
  // the chunk that answers it, round trip value for value.
  auto m = chat_submit();
  m.params.logprobs = 5;
  auto f = encode(m);
  ASSERT_TRUE(f) << error_text(f.error());
  auto back = decode(*f);
  ASSERT_TRUE(back) << error_text(back.error());
  EXPECT_EQ(std::get<client_submit>(*back).params.logprobs, std::optional<int32_t>{5});
  const auto c = logprob_chunk();
  auto cf = encode(c);
  ASSERT_TRUE(cf) << error_text(cf.error());
  auto cback = decode(*cf);
  ASSERT_TRUE(cback) << error_text(cback.error());
  test::expect_same(c, std::get<token_chunk>(*cback));

  // The sender refuses what the receiver would: a count over the limit
  // (21 > sampling_params::max_logprobs) or negative, NaN or positive
  // logprobs, and alternatives past the limit.
  m.params.logprobs = 21;
  EXPECT_NE(refusal_of(m).find("logprobs must be in [0, 20], got 21"), std::string::npos) << refusal_of(m);
  m.params.logprobs = -1;
  EXPECT_NE(refusal_of(m).find("logprobs must be in [0, 20], got -1"), std::string::npos) << refusal_of(m);
  auto nan = logprob_chunk();
  nan.logprobs[0].logprob = std::nanf("");
  EXPECT_NE(refusal_of(nan).find("logprobs[0].logprob must be <= 0"), std::string::npos) << refusal_of(nan);
  auto positive = logprob_chunk();
  positive.logprobs[1].top_logprobs[0].logprob = 0.5f;
  EXPECT_NE(refusal_of(positive).find("logprobs[1].top_logprobs[0] must have token >= 0 and logprob <= 0"),
            std::string::npos)
    << refusal_of(positive);
  auto many = logprob_chunk();
  many.logprobs[1].top_logprobs.assign(21, {3, -2.0f});
  EXPECT_NE(refusal_of(many).find("logprobs[1].top_logprobs has 21 entries, more than the maximum 20"),
            std::string::npos)
    << refusal_of(many);
  auto uneven = logprob_chunk();
  uneven.logprobs.pop_back();
  EXPECT_NE(refusal_of(uneven).find("logprobs must be empty or have one entry per token"), std::string::npos)
    << refusal_of(uneven);

  // And the receiver refuses the same from a hostile peer that skipped the
  // sender's checks.
  {
    capnp::MallocMessageBuilder mb;
    auto b = mb.initRoot<s::ClientSubmit>();
    b.setRequestId(9);
    b.setKind(1);
    b.setPromptText("text");
    auto p = b.initParams();
    p.setMaxTokens(4);
    p.setTopP(1.0f);
    p.setTemperature(1.0f);
    p.setHasLogprobs(true);
    p.setLogprobs(1000);
    auto why = decode_refusal(message_type::client_submit, mb);
    EXPECT_NE(why.find("logprobs must be in [0, 20], got 1000"), std::string::npos) << why;
  }
  auto chunk_frame = [](float logprob, unsigned top) {
    auto mb = std::make_unique<capnp::MallocMessageBuilder>();
    auto b = mb->initRoot<s::TokenChunk>();
    b.setRequestId(42);
    b.initTokens(1).set(0, 7);
    auto lp = b.initLogprobs(1)[0];
    lp.setToken(7);
    lp.setLogprob(logprob);
    auto alts = lp.initTop(top);
    for (unsigned i = 0; i < top; ++i) {
      alts[i].setToken(static_cast<int32_t>(i));
      alts[i].setLogprob(-1.0f);
    }
    b.setStopToken(-1);
    return mb;
  };
  {
    auto mb = chunk_frame(-0.5f, 3);
    EXPECT_EQ(decode_refusal(message_type::token_chunk, *mb), "");
  }
  {
    auto mb = chunk_frame(std::nanf(""), 0);
    auto why = decode_refusal(message_type::token_chunk, *mb);
    EXPECT_NE(why.find("token_chunk: logprobs[0].logprob must be <= 0"), std::string::npos) << why;
    EXPECT_NE(why.find("nan"), std::string::npos) << why;
  }
  {
    auto mb = chunk_frame(-0.5f, 5000);
    auto why = decode_refusal(message_type::token_chunk, *mb);
    EXPECT_NE(why.find("logprobs[0].top_logprobs has 5000 entries"), std::string::npos) << why;
  }
}

TEST(WireClientTest, FuzzedClientFramesNeverCrashAndAreNeverHalfRead) {
  std::mt19937_64 rng{17};
  for (const auto& m : client_samples()) {
    auto f = encode(m);
    ASSERT_TRUE(f);
    for (int round = 0; round < 2000; ++round) {
      auto bad = *f;
      const int flips = 1 + static_cast<int>(rng() % 8);
      for (int i = 0; i < flips; ++i)
        bad[rng() % bad.size()] ^= static_cast<std::byte>(1u << (rng() % 8));
      if (rng() % 4 == 0)
        bad.resize(rng() % bad.size());
      auto back = decode(bad);
      // Whatever decodes passed every check: validate() agrees.
      if (back) {
        EXPECT_FALSE(validate(*back)) << "round " << round;
      }
    }
  }
}

} // namespace
} // namespace tessera::transport::wire
