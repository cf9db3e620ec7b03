// A worker's outstanding model units (what its heartbeats carry) see the
// context its decode steps read: a request's start (request_start) and the
// decodes a worker accepted (handoff_receiver) priced with the units' d
// term, so a long-context sequence outweighs a short one with as many
// tokens left.
#include <gtest/gtest.h>

#include "actors/worker/handoff_receiver.hpp"
#include "actors/worker/request_start.hpp"
#include "engine/engine_errc.hpp"

namespace tessera::actors {
namespace {

using namespace std::chrono_literals;
namespace wire = transport::wire;

constexpr engine::model_units units{
  .per_input_token = 0.02, .per_output_token = 1.0, .per_request = 3.0, .per_context_token = 0.001};

wire::request_handoff request(uint64_t id, int32_t prompt, int32_t max_tokens) {
  wire::request_handoff h;
  h.request.id = id;
  h.request.prompt.assign(static_cast<size_t>(prompt), 7);
  h.request.params.max_tokens = max_tokens;
  return h;
}

TEST(WorkerUnitsTest, AStartIsPricedFromItsContext) {
  auto s = plan_start(request(1, 1000, 10), units);
  EXPECT_EQ(s.context, 1000);
  EXPECT_EQ(s.output_left, 10);
  // a * 1000 + c + b * 10 + d * (1000 * 10 + 45)
  EXPECT_NEAR(s.units, 20 + 3 + 10 + 0.001 * 10045, 1e-9);
  const auto short_one = plan_start(request(2, 10, 10), units);
  EXPECT_GT(s.units - units.admission(1000), short_one.units - units.admission(10))
    << "decoding after 1000 tokens costs more than after 10";
  // A migrated stream computes its output so far with the prompt.
  auto m = request(3, 1000, 10);
  m.resume_output = {5, 5, 5, 5};
  s = plan_start(m, units);
  EXPECT_EQ(s.context, 1004);
  EXPECT_EQ(s.output_left, 6);
  EXPECT_NEAR(s.units, units.cost(1004, 6), 1e-9);
  // A prefill-only start makes one token.
  auto p = request(4, 1000, 10);
  p.decode_at = {"node", "decode-0"};
  s = plan_start(p, units);
  EXPECT_TRUE(s.prefill_only);
  EXPECT_EQ(s.output_left, 1);
  EXPECT_NEAR(s.units, units.cost(1000, 1), 1e-9);
}

TEST(WorkerUnitsTest, AcceptedDecodesOfALongContextOutweighShortOnes) {
  const auto t0 = handoff_receiver::clock::now();
  auto grant_all = [](const wire::request_handoff& h) -> caf::expected<wire::kv_grant> {
    wire::kv_grant g;
    g.request_id = h.request.id;
    return g;
  };
  auto with_kv = [](wire::request_handoff h) {
    h.kv.emplace();
    h.kv->tokens = h.request.prompt;
    h.kv->tokens.push_back(9); // the prefill worker's token
    return h;
  };
  handoff_receiver long_rx{"decode-long", 10s};
  handoff_receiver short_rx{"decode-short", 10s};
  ASSERT_TRUE(long_rx.offered(with_kv(request(1, 8000, 65)), 1, t0, grant_all)[0].grant);
  ASSERT_TRUE(short_rx.offered(with_kv(request(2, 100, 65)), 1, t0, grant_all)[0].grant);
  // 64 tokens to decode each, the first after prompt + 1.
  EXPECT_NEAR(long_rx.outstanding(units), units.decode(8001, 64) + 3, 1e-9);
  EXPECT_NEAR(short_rx.outstanding(units), units.decode(101, 64) + 3, 1e-9);
  EXPECT_GT(long_rx.outstanding(units), 4 * short_rx.outstanding(units));
  // Without d (a configuration fitted before the context term) both are
  // the same: b per token, what the router saw before.
  engine::model_units old = units;
  old.per_context_token = 0;
  EXPECT_DOUBLE_EQ(long_rx.outstanding(old), short_rx.outstanding(old));
  // The granted decode keeps its context on commit (the worker prices its
  // tracked sequence from it).
  auto g = long_rx.commit(1);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->context, 8001);
}

TEST(WorkerUnitsTest, DecodePricesEveryTokenByItsOwnContext) {
  // decode(ctx, n) = sum over k < n of (b + d * (ctx + k)), split anywhere.
  double sum = 0;
  for (int k = 0; k < 50; ++k)
    sum += units.per_output_token + units.per_context_token * (300 + k);
  EXPECT_NEAR(units.decode(300, 50), sum, 1e-9);
  EXPECT_NEAR(units.decode(300, 20) + units.decode(320, 30), sum, 1e-9);
  EXPECT_EQ(units.decode(300, 0), 0.0);
  EXPECT_EQ(units.decode(300, -4), 0.0);
  EXPECT_NEAR(units.decode(-10, 3), units.decode(0, 3), 1e-12) << "a negative context counts as 0";
}

} // namespace
} // namespace tessera::actors
