// Round trips of every wire message kind through encode() and decode(), and
// the encoder's refusal of messages a peer would reject.

#include <gtest/gtest.h>

#include <cstring>

#include "common/error.hpp"
#include "transport/wire/codec.hpp"
#include "transport/wire/frame.hpp"
#include "wire_expect.hpp"
#include "wire_samples.hpp"

namespace tessera::transport::wire {
namespace {

using test::expect_same;

wire_message round_trip(const wire_message& m) {
  auto frame = encode(m);
  EXPECT_TRUE(frame) << error_text(frame.error());
  if (!frame)
    return m;
  EXPECT_EQ(frame->size() % 8, 0u);
  auto back = decode(*frame);
  EXPECT_TRUE(back) << error_text(back.error());
  if (!back)
    return m;
  // Re-encoding the decoded message gives the same bytes.
  auto again = encode(*back);
  EXPECT_TRUE(again && *again == *frame);
  return *back;
}

TEST(WireCodecTest, RoundTripsRequestHandoffWithEveryFieldSet) {
  auto m = test::full_handoff();
  auto back = round_trip(m);
  expect_same(m, std::get<request_handoff>(back));
  EXPECT_EQ(std::get<request_handoff>(back).request.params.seed, 42u);
}

TEST(WireCodecTest, RoundTripsAResumedRequest) {
  auto m = test::resumed_handoff();
  auto back = std::get<request_handoff>(round_trip(m));
  expect_same(m, back);
  EXPECT_EQ(back.resume_output, (std::vector<int32_t>{9, 2, 6}));
}

TEST(WireCodecTest, RoundTripsRequestHandoffWithOptionalFieldsUnset) {
  auto m = test::minimal_handoff();
  auto back = std::get<request_handoff>(round_trip(m));
  expect_same(m, back);
  EXPECT_FALSE(back.request.params.seed.has_value());
  EXPECT_FALSE(back.request.params.logprobs.has_value());
  EXPECT_FALSE(back.kv.has_value());
  // Defaults survive: the schema's defaults match sampling_params'.
  EXPECT_EQ(back.request.params.temperature, 1.0f);
  EXPECT_EQ(back.request.params.max_tokens, 16);
}

TEST(WireCodecTest, RoundTripsZeroSeedAndZeroLogprobsAsSet) {
  auto m = test::minimal_handoff();
  m.request.params.seed = 0;
  m.request.params.logprobs = 0;
  auto back = std::get<request_handoff>(round_trip(m));
  EXPECT_EQ(back.request.params.seed, std::optional<uint64_t>{0});
  EXPECT_EQ(back.request.params.logprobs, std::optional<int32_t>{0});
}

TEST(WireCodecTest, RoundTripsTokenChunks) {
  for (const auto& m : {test::chunk_with_logprobs(), test::plain_chunk()})
    expect_same(m, std::get<token_chunk>(round_trip(m)));
}

TEST(WireCodecTest, RoundTripsNegativeInfinityLogprob) {
  auto m = test::chunk_with_logprobs();
  m.logprobs[1].logprob = -std::numeric_limits<float>::infinity();
  expect_same(m, std::get<token_chunk>(round_trip(m)));
}

TEST(WireCodecTest, RoundTripsKvTransferBatch) {
  auto m = test::sample_batch();
  expect_same(m, std::get<kv_transfer_batch>(round_trip(m)));
}

TEST(WireCodecTest, RoundTripsKvEventsWithAndWithoutParent) {
  for (const auto& m : {test::stored_event(), test::removed_event()})
    expect_same(m, std::get<kv_event>(round_trip(m)));
  kv_event cleared;
  cleared.kind = kv_event_kind::cleared;
  cleared.tier = kv_tier::g1_pool;
  expect_same(cleared, std::get<kv_event>(round_trip(cleared)));
}

TEST(WireCodecTest, RoundTripsMembershipHeartbeatAndError) {
  expect_same(test::sample_membership(), std::get<membership>(round_trip(test::sample_membership())));
  expect_same(test::sample_heartbeat(), std::get<heartbeat>(round_trip(test::sample_heartbeat())));
  expect_same(test::sample_error(), std::get<wire_error>(round_trip(test::sample_error())));
}

TEST(WireCodecTest, RoundTripsKvGrantAndCancel) {
  expect_same(test::sample_grant(), std::get<kv_grant>(round_trip(test::sample_grant())));
  expect_same(test::sample_cancel(), std::get<request_cancel>(round_trip(test::sample_cancel())));
  expect_same(test::sample_join(), std::get<worker_join>(round_trip(test::sample_join())));
  auto store = test::sample_join(); // a node's kv store joins the router's index too
  store.roles = {node_role::kvstore};
  expect_same(store, std::get<worker_join>(round_trip(store)));
}

TEST(WireCodecTest, RoundTripsRequestStatusAndItsReplyWithinTheirBounds) {
  request_status ask{{1, 2, 0xffffffffffffffffull}};
  EXPECT_EQ(std::get<request_status>(round_trip(ask)).request_ids, ask.request_ids);
  request_status_reply none; // the worker holds every asked request
  EXPECT_TRUE(std::get<request_status_reply>(round_trip(none)).unknown_ids.empty());
  request_status_reply some{{2}};
  EXPECT_EQ(std::get<request_status_reply>(round_trip(some)).unknown_ids, some.unknown_ids);
  // Asking about nothing, or about more ids than the bound, is refused.
  auto empty = encode(wire_message{request_status{}});
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error(), transport_errc::invalid_message);
  request_status many;
  many.request_ids.resize(wire_limits{}.max_status_ids + 1, 7);
  EXPECT_FALSE(encode(wire_message{many}));
  request_status_reply many_back;
  many_back.unknown_ids.resize(wire_limits{}.max_status_ids + 1, 7);
  EXPECT_FALSE(encode(wire_message{many_back}));
}

TEST(WireCodecTest, RoundTripsRouteCallReplyAndWorkerViewsAndRefusesBadOnes) {
  route_call call{42, {1, 2, 3}, "salt", "session-7", 64, 2500};
  auto c = std::get<route_call>(round_trip(call));
  EXPECT_EQ(c.max_wait_ms, 2500);
  EXPECT_EQ(c.request_id, 42u);
  EXPECT_EQ(c.prompt, call.prompt);
  EXPECT_EQ(c.cache_salt, "salt");
  EXPECT_EQ(c.session_id, "session-7");
  EXPECT_EQ(c.max_tokens, 64);
  route_reply reply{{"p", "prefill-0"}, {"d", "decode-0"}, true, 3, "kv", {"s", "kvstore"}, 2};
  auto r = std::get<route_reply>(round_trip(reply));
  EXPECT_EQ(r.prefill.node, "p");
  EXPECT_EQ(r.decode.actor, "decode-0");
  EXPECT_TRUE(r.disaggregated);
  EXPECT_EQ(r.cached_blocks, 3);
  EXPECT_EQ(r.kv_source.node, "s");
  EXPECT_EQ(r.kv_source_blocks, 2);
  worker_views views{{{7, {"d", "decode-0"}, 1, false, "heartbeats stopped", 1500, -1},
                      {8, {"p", "prefill-0"}, 0, true, "", 20, 4}}};
  auto v = std::get<worker_views>(round_trip(views));
  ASSERT_EQ(v.workers.size(), 2u);
  EXPECT_EQ(v.workers[0].worker_id, 7u);
  EXPECT_EQ(v.workers[0].reason, "heartbeats stopped");
  EXPECT_FALSE(v.workers[0].healthy);
  EXPECT_EQ(v.workers[1].canary_ms, 4);
  EXPECT_TRUE(std::get<worker_views>(round_trip(worker_views{})).workers.empty());
  // Refused: an empty prompt, a negative max_tokens, a reply without a
  // decode worker or with a kv source and no blocks, a role out of range.
  EXPECT_FALSE(encode(wire_message{route_call{1, {}, "", "", 4}}));
  EXPECT_FALSE(encode(wire_message{route_call{1, {5}, "", "", -1}}));
  EXPECT_FALSE(encode(wire_message{route_call{1, {-5}, "", "", 1}}));
  EXPECT_FALSE(encode(wire_message{route_call{1, {5}, "", "", 1, -1}})) << "a negative hold";
  EXPECT_FALSE(encode(wire_message{route_call{1, {5}, "", "", 1, max_route_wait_ms + 1}}));
  EXPECT_TRUE(encode(wire_message{route_call{1, {5}, "", "", 1, max_route_wait_ms}}));
  auto no_decode = reply;
  no_decode.decode = {};
  EXPECT_FALSE(encode(wire_message{no_decode}));
  auto no_blocks = reply;
  no_blocks.kv_source_blocks = 0;
  EXPECT_FALSE(encode(wire_message{no_blocks}));
  auto bad_role = views;
  bad_role.workers[0].role = 3;
  EXPECT_FALSE(encode(wire_message{bad_role}));
  worker_views many;
  many.workers.resize(wire_limits{}.max_worker_views + 1, views.workers[1]);
  EXPECT_FALSE(encode(wire_message{many}));
}

TEST(WireCodecTest, RoundTripsKvFetchRequestAndReply) {
  expect_same(test::sample_fetch(), std::get<kv_fetch_request>(round_trip(test::sample_fetch())));
  expect_same(test::sample_fetch_reply(), std::get<kv_fetch_reply>(round_trip(test::sample_fetch_reply())));
  kv_fetch_reply none; // a store that holds nothing of the chain
  expect_same(none, std::get<kv_fetch_reply>(round_trip(none)));
  kv_fetch_reply busy; // a store at its bound of fetches in flight
  busy.busy = true;
  expect_same(busy, std::get<kv_fetch_reply>(round_trip(busy)));
  // "Busy" with blocks is a contradiction the encoder refuses.
  auto contradiction = test::sample_fetch_reply();
  contradiction.busy = true;
  auto frame = encode(wire_message{contradiction});
  ASSERT_FALSE(frame);
  EXPECT_EQ(frame.error(), transport_errc::invalid_message);
}

TEST(WireCodecTest, RoundTripsEnvelopesAndTheirInnerFrame) {
  auto req = test::request_envelope();
  ASSERT_FALSE(req.payload.empty());
  auto back = std::get<envelope>(round_trip(req));
  expect_same(req, back);
  auto inner = decode(back.payload);
  ASSERT_TRUE(inner) << error_text(inner.error());
  expect_same(wire_message{test::minimal_handoff()}, *inner);
  expect_same(test::empty_response(), std::get<envelope>(round_trip(test::empty_response())));
}

TEST(WireCodecTest, FrameHeaderNamesTypeAndLength) {
  auto frame = encode(test::sample_heartbeat());
  ASSERT_TRUE(frame);
  auto h = parse_frame_header(*frame);
  ASSERT_TRUE(h) << error_text(h.error());
  EXPECT_EQ(h->type, static_cast<uint16_t>(message_type::heartbeat));
  EXPECT_EQ(h->version, frame_version);
  EXPECT_EQ(h->body_bytes + frame_header_bytes, frame->size());
  EXPECT_EQ(std::memcmp(frame->data(), "TSRA", 4), 0);
}

TEST(WireCodecTest, ConvertsCafErrorForTheWire) {
  auto e = to_wire_error(make_transport_error(transport_errc::timeout, "no reply in 5 ms"));
  EXPECT_EQ(e.category, "transport");
  EXPECT_EQ(e.code, static_cast<uint8_t>(transport_errc::timeout));
  EXPECT_EQ(e.message, "no reply in 5 ms");
  expect_same(e, std::get<wire_error>(round_trip(e)));
}

TEST(WireCodecTest, EncodeRefusesInvalidSamplingParamsNamingTheField) {
  auto m = test::full_handoff();
  m.request.params.top_p = 2.0f;
  auto frame = encode(m);
  ASSERT_FALSE(frame);
  EXPECT_EQ(frame.error(), transport_errc::invalid_message);
  EXPECT_NE(error_text(frame.error()).find("request_handoff: params: top_p must be in (0, 1], got 2"),
            std::string::npos)
    << error_text(frame.error());
}

TEST(WireCodecTest, EncodeRefusesInconsistentMessagesNamingTheField) {
  struct bad_case {
    wire_message m;
    const char* text;
  };
  auto kv_hashes = test::full_handoff();
  kv_hashes.kv->block_hashes.push_back(::tessera::test::bh(1));
  auto logprobs = test::chunk_with_logprobs();
  logprobs.logprobs.pop_back();
  auto cached = test::plain_chunk();
  cached.cached_prompt_tokens = 6;
  auto block = test::sample_batch();
  block.blocks[1].token_count = 17;
  auto roles = test::sample_membership();
  roles.roles.push_back(node_role::decode);
  auto usage = test::sample_heartbeat();
  usage.kv_usage[0].used_bytes = 2000;
  auto load = test::sample_heartbeat();
  load.load = std::numeric_limits<float>::quiet_NaN();
  auto parent = test::removed_event();
  parent.parent_hash = ::tessera::test::bh(1);
  auto empty = test::minimal_handoff();
  empty.request.prompt.clear();
  auto salt = test::minimal_handoff();
  salt.request.cache_salt.assign(2000, 'x');
  auto no_grants = test::sample_grant();
  no_grants.blocks.clear();
  auto tell_id = test::request_envelope();
  tell_id.kind = envelope_kind::tell;
  auto no_call = test::request_envelope();
  no_call.call_id = 0;
  auto no_op = test::request_envelope();
  no_op.operation.clear();
  auto nested = test::request_envelope();
  nested.payload = encode(wire_message{test::request_envelope()}).value();
  auto junk = test::request_envelope();
  junk.payload.assign(40, std::byte{7});
  auto failure = test::request_envelope();
  failure.kind = envelope_kind::failure;
  failure.operation.clear();
  auto half_address = test::full_handoff();
  half_address.reply_to.actor.clear();
  auto long_actor = test::full_handoff();
  long_actor.decode_at.actor.assign(65, 'a');
  auto router_role = test::sample_join();
  router_role.roles = {node_role::router};
  auto store_and_worker = test::sample_join();
  store_and_worker.roles = {node_role::kvstore, node_role::decode};
  auto no_fetch = test::sample_fetch();
  no_fetch.block_hashes.clear();
  auto no_bytes = test::sample_fetch();
  no_bytes.max_bytes = 0;
  auto short_block = test::sample_fetch_reply();
  short_block.blocks[1].data.pop_back();
  auto tokens = test::sample_fetch_reply();
  tokens.blocks[0].token_count = 5;
  auto half_source = test::full_handoff();
  half_source.kv_source_blocks = 0;
  auto resume_with_kv = test::full_handoff();
  resume_with_kv.resume_output = {1};
  auto resume_past_max = test::resumed_handoff();
  resume_past_max.resume_output.assign(12, 1);
  auto resume_bad_id = test::resumed_handoff();
  resume_bad_id.resume_output[1] = -4;
  std::vector<bad_case> cases = {
    {store_and_worker, "roles[0] must be prefill or decode (or kvstore alone)"},
    {no_fetch, "kv_fetch_request: block_hashes must not be empty"},
    {no_bytes, "kv_fetch_request: max_bytes must be >= 1"},
    {short_block, "blocks[1].data must hold layout.block_bytes() = 64 bytes, got 63"},
    {tokens, "blocks[0].token_count must be in [1, 4], got 5"},
    {half_source, "kv_source and kv_source_blocks must both be set or neither"},
    {resume_with_kv, "resume_output cannot come with kv or decode_at"},
    {resume_past_max, "resume_output holds 12 tokens, at or past params.max_tokens 12"},
    {resume_bad_id, "resume_output[1]"},
    {router_role, "roles[0] must be prefill or decode"},
    {half_address, "reply_to: node and actor must both be set or both be empty"},
    {long_actor, "decode_at.actor has 65 bytes, more than the maximum 64"},
    {no_grants, "kv_grant: blocks must not be empty"},
    {tell_id, "call_id must be 0 in a tell, got 5"},
    {no_call, "call_id must not be 0"},
    {no_op, "operation must not be empty"},
    {nested, "payload must not be another envelope"},
    {junk, "payload is not a frame"},
    {failure, "a failure's payload must be an error frame"},
    {kv_hashes, "kv.block_hashes must have num_computed / block_tokens = 2 entries, got 3"},
    {logprobs, "logprobs must be empty or have one entry per token (3), got 2"},
    {cached, "cached_prompt_tokens must be in [0, prompt_tokens (5)], got 6"},
    {block, "blocks[1].token_count must be in [1, 16], got 17"},
    {roles, "roles[3] repeats role 3"},
    {usage, "kv_usage[0].used_bytes 2000 exceeds capacity_bytes 1000"},
    {load, "load must be finite and >= 0"},
    {parent, "parent_hash is only allowed on stored events"},
    {empty, "prompt must not be empty"},
    {salt, "cache_salt has 2000 bytes, more than the maximum 1024"},
  };
  for (const auto& c : cases) {
    auto frame = encode(c.m);
    ASSERT_FALSE(frame) << c.text;
    EXPECT_EQ(frame.error(), transport_errc::invalid_message);
    EXPECT_NE(error_text(frame.error()).find(c.text), std::string::npos)
      << "expected \"" << c.text << "\" in " << error_text(frame.error());
  }
}

TEST(WireCodecTest, EncodeRefusesBodiesOverTheMaximum) {
  wire_limits lim;
  lim.max_body_bytes = 256;
  auto m = test::full_handoff();
  auto frame = encode(m, lim);
  ASSERT_FALSE(frame);
  EXPECT_EQ(frame.error(), transport_errc::message_too_large);
  EXPECT_NE(error_text(frame.error()).find("more than the maximum 256"), std::string::npos)
    << error_text(frame.error());
}

TEST(WireCodecTest, EncodeIntoAppendsAndLeavesBufferUnchangedOnError) {
  std::vector<std::byte> out;
  ASSERT_FALSE(encode_into(test::plain_chunk(), out));
  const auto first = out.size();
  ASSERT_FALSE(encode_into(test::sample_error(), out));
  EXPECT_GT(out.size(), first);
  const auto before = out;
  auto bad = test::plain_chunk();
  bad.tokens.push_back(-1);
  EXPECT_TRUE(encode_into(bad, out));
  EXPECT_EQ(out, before);
}

} // namespace
} // namespace tessera::transport::wire
