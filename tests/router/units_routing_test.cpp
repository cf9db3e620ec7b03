// Routing by model units: placement counts what requests cost, not how many
// there are; the sticky break gives up a session's worker when it carries
// more than a factor times the least-loaded one; the blocks measure stays
// selectable; and the autoscaling formula.
#include <cmath>
#include <limits>
#include <optional>

#include <gtest/gtest.h>

#include "actors/router/autoscale.hpp"
#include "actors/router/kv_policy.hpp"
#include "actors/router/load_policies.hpp"
#include "common/error.hpp"

namespace {

using namespace tessera::actors;
using tessera::engine::model_units;

worker_load loaded(uint64_t id, double units, int64_t decode_blocks, int32_t requests) {
  worker_load w;
  w.id = id;
  w.role = worker_role::both;
  w.active_decode_blocks = decode_blocks;
  w.active_requests = requests;
  w.outstanding_units = units;
  return w;
}

// A request without cached blocks (the prefix index is not needed to test
// the load term).
route_request request(int32_t prompt, int32_t max_tokens, std::string session = {}) {
  route_request r;
  r.prompt_tokens = prompt;
  r.block_tokens = 16;
  r.max_tokens = max_tokens;
  r.session_id = std::move(session);
  return r;
}

std::unique_ptr<router_policy> policy(std::string_view name, router_options opts = {}) {
  auto p = make_router_policy(name, std::move(opts));
  if (!p) {
    ADD_FAILURE() << tessera::error_text(p.error());
    return nullptr;
  }
  return std::move(*p);
}

route_decision must_route(router_policy& p, const route_request& req, const std::vector<worker_load>& w,
                          const prefix_index& idx) {
  auto d = p.route(req, w, idx);
  if (!d) {
    ADD_FAILURE() << tessera::error_text(d.error());
    return {};
  }
  return *d;
}

TEST(UnitsRoutingTest, LeastLoadedPlacesByUnitsNotByBlocks) {
  prefix_index idx;
  // Worker 1: two long generations (few KV blocks so far, much decode
  // left). Worker 2: many short requests (more blocks, little work left).
  const std::vector<worker_load> w{loaded(1, 2 * 2000.0, 10, 2), loaded(2, 12 * 40.0, 40, 12)};
  router_options units_opts;
  units_opts.load = load_measure::units;
  units_opts.units = model_units{0.01, 1.0, 2.0};
  auto by_units = policy("least-loaded", units_opts);
  EXPECT_EQ(must_route(*by_units, request(64, 32), w, idx).decode_worker, 2u);
  router_options block_opts = units_opts;
  block_opts.load = load_measure::blocks;
  auto by_blocks = policy("least-loaded", block_opts);
  EXPECT_EQ(must_route(*by_blocks, request(64, 32), w, idx).decode_worker, 1u);
}

TEST(UnitsRoutingTest, KvCostInUnitsWeighsTheUncachedPromptByA) {
  // Worker 1 holds all 32 blocks of a 512-token prompt but has 300 units
  // outstanding; worker 2 holds none and is idle. With a = 1 the prompt
  // costs 512 on worker 2, more than worker 1's queue; with a = 0.1 it
  // costs 51.2, less.
  const auto req = request(512, 0);
  const worker_load w1 = loaded(1, 300, 0, 1), w2 = loaded(2, 0, 0, 0);
  EXPECT_DOUBLE_EQ(kv_prefill_cost_units(w1, 32, req, 1.0, {1.0, 1.0, 0}), 300.0);
  EXPECT_DOUBLE_EQ(kv_prefill_cost_units(w2, 0, req, 1.0, {1.0, 1.0, 0}), 512.0);
  EXPECT_DOUBLE_EQ(kv_prefill_cost_units(w2, 0, req, 1.0, {0.1, 1.0, 0}), 51.2);
  EXPECT_DOUBLE_EQ(kv_prefill_cost_units(w2, 0, req, 2.0, {0.1, 1.0, 0}), 102.4);
  EXPECT_DOUBLE_EQ(kv_prefill_cost_units(w2, 16, req, 1.0, {0.1, 1.0, 0}), 25.6);
  // Without cached blocks the kv policy picks the least outstanding units,
  // whatever the blocks say.
  prefix_index idx;
  const std::vector<worker_load> w{loaded(1, 300, 1, 1), loaded(2, 100, 50, 5)};
  router_options o;
  o.load = load_measure::units;
  o.units = model_units{0.1, 1.0, 0};
  auto p = policy("kv", o);
  auto d = must_route(*p, req, w, idx);
  EXPECT_EQ(d.decode_worker, 2u) << d.reason;
  o.load = load_measure::blocks;
  p = policy("kv", o);
  d = must_route(*p, req, w, idx);
  EXPECT_EQ(d.decode_worker, 1u) << d.reason;
}

TEST(UnitsRoutingTest, EachWorkerPricesThePromptInItsOwnDevicesUnits) {
  // A mixed fleet: prefill worker 1 an H100 (a = 0.025 ms per prompt
  // token) with 2,400 tokens queued (60 units), prefill worker 2 an A100
  // (a = 0.08), idle. A 4,096-token prompt costs 60 + 102 = 162 units on
  // the H100 and 328 on the A100: the H100 finishes it first. Blocks see
  // 2,400 queued tokens against none and pick the A100; so do units priced
  // with one a for everyone (the router's own).
  prefix_index idx;
  const model_units h100{0.025, 0.79, 0, 5.45e-5};
  const model_units a100{0.08, 1.27, 0, 1.06e-4};
  auto prefill = [](uint64_t id, double units, int64_t queued, std::optional<model_units> own) {
    worker_load w = loaded(id, units, 0, queued > 0 ? 1 : 0);
    w.role = worker_role::prefill;
    w.queued_prefill_tokens = queued;
    w.units = own;
    return w;
  };
  auto decode = [](uint64_t id, std::optional<model_units> own) {
    worker_load w = loaded(id, 0, 0, 0);
    w.role = worker_role::decode;
    w.units = own;
    return w;
  };
  const std::vector<worker_load> mixed{prefill(1, 60, 2400, h100), prefill(2, 0, 0, a100), decode(3, h100),
                                       decode(4, a100)};
  router_options o;
  o.load = load_measure::units;
  o.units = h100; // the router's own: the fallback
  const auto req = request(4096, 16);
  auto d = must_route(*policy("kv", o), req, mixed, idx);
  EXPECT_TRUE(d.disaggregated);
  EXPECT_EQ(d.prefill_worker, 1u) << d.reason;
  o.load = load_measure::blocks;
  EXPECT_EQ(must_route(*policy("kv", o), req, mixed, idx).prefill_worker, 2u);
  // Workers that joined without units: everyone in the router's.
  auto uniform = mixed;
  for (auto& w : uniform)
    w.units.reset();
  o.load = load_measure::units;
  EXPECT_EQ(must_route(*policy("kv", o), req, uniform, idx).prefill_worker, 2u);
  EXPECT_EQ(&units_of(uniform[0], o.units), &o.units);
  EXPECT_EQ(units_of(mixed[1], o.units).per_input_token, 0.08);
}

TEST(UnitsRoutingTest, StickySessionBreaksWhenItsWorkerExceedsTheFactor) {
  prefix_index idx;
  router_options o;
  o.load = load_measure::units;
  o.units = model_units{0.0, 1.0, 0.0}; // a request of max_tokens 10 costs 10
  o.sticky_break_factor = 2.0;
  auto p = policy("least-loaded", o);
  std::vector<worker_load> w{loaded(1, 0, 0, 0), loaded(2, 5, 0, 0)};
  auto first = must_route(*p, request(32, 10, "conv"), w, idx);
  ASSERT_EQ(first.decode_worker, 1u);
  // Worker 1 at 29 <= 2 x (5 + 10): the session stays.
  w[0].outstanding_units = 29;
  auto second = must_route(*p, request(32, 10, "conv"), w, idx);
  EXPECT_EQ(second.decode_worker, 1u) << second.reason;
  EXPECT_TRUE(second.sticky);
  // At 31 > 30 it moves to worker 2, and the session follows it there.
  w[0].outstanding_units = 31;
  auto third = must_route(*p, request(32, 10, "conv"), w, idx);
  EXPECT_EQ(third.decode_worker, 2u) << third.reason;
  EXPECT_FALSE(third.sticky);
  EXPECT_NE(third.reason.find("sticky worker 1 replaced: load 31 units > 2 x 15"), std::string::npos)
    << third.reason;
  EXPECT_EQ(p->sticky_breaks(), 1u);
  w[0].outstanding_units = 0;
  w[1].outstanding_units = 0;
  EXPECT_EQ(must_route(*p, request(32, 10, "conv"), w, idx).decode_worker, 2u);
}

TEST(UnitsRoutingTest, StickyBreakFactorZeroNeverBreaks) {
  prefix_index idx;
  router_options o;
  o.load = load_measure::units;
  o.sticky_break_factor = 0;
  auto p = policy("least-loaded", o);
  std::vector<worker_load> w{loaded(1, 0, 0, 0), loaded(2, 0, 0, 0)};
  const auto first = must_route(*p, request(32, 10, "s"), w, idx).decode_worker;
  w[first == 1 ? 0 : 1].outstanding_units = 1e9;
  auto again = must_route(*p, request(32, 10, "s"), w, idx);
  EXPECT_EQ(again.decode_worker, first);
  EXPECT_TRUE(again.sticky);
}

TEST(UnitsRoutingTest, StickyBreakInBlocksCountsBlocks) {
  prefix_index idx;
  router_options o;
  o.load = load_measure::blocks;
  auto p = policy("least-loaded", o);
  std::vector<worker_load> w{loaded(1, 0, 0, 0), loaded(2, 0, 4, 0)};
  ASSERT_EQ(must_route(*p, request(32, 32, "s"), w, idx).decode_worker, 1u);
  // The request is 4 blocks: the bar is 2 x (4 + 4) = 16 blocks.
  w[0].active_decode_blocks = 16;
  EXPECT_EQ(must_route(*p, request(32, 32, "s"), w, idx).decode_worker, 1u);
  w[0].active_decode_blocks = 17;
  EXPECT_EQ(must_route(*p, request(32, 32, "s"), w, idx).decode_worker, 2u);
}

TEST(UnitsRoutingTest, BadOptionsAreRefused) {
  for (double f : {0.5, -1.0, std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
    router_options o;
    o.sticky_break_factor = f;
    auto p = make_router_policy("kv", o);
    ASSERT_FALSE(p) << f;
    EXPECT_NE(tessera::error_text(p.error()).find("sticky_break_factor"), std::string::npos);
  }
  router_options o;
  o.units.per_output_token = -1;
  EXPECT_FALSE(make_router_policy("least-loaded", o));
  o.units.per_output_token = std::numeric_limits<double>::quiet_NaN();
  EXPECT_FALSE(make_router_policy("least-loaded", o));
}

TEST(UnitsRoutingTest, NegativeOrNanUnitsCountAsZero) {
  EXPECT_EQ(load_in(load_measure::units, loaded(1, -5, 0, 0), 16), 0.0);
  EXPECT_EQ(load_in(load_measure::units, loaded(1, std::numeric_limits<double>::quiet_NaN(), 0, 0), 16), 0.0);
  EXPECT_EQ(load_in(load_measure::blocks, loaded(1, 99, 3, 0), 16), 3.0);
}

TEST(AutoscaleTest, RecommendsDemandOverCapacityAtTargetUtilization) {
  autoscale_options o; // 1000 units/s per worker at 0.8
  autoscale_input in;
  in.workers = 2;
  in.demanded_per_second = 0;
  EXPECT_EQ(recommended_workers(in, o), 1);
  in.demanded_per_second = 800;
  EXPECT_EQ(recommended_workers(in, o), 1);
  in.demanded_per_second = 801;
  EXPECT_EQ(recommended_workers(in, o), 2);
  in.demanded_per_second = 4000;
  EXPECT_EQ(recommended_workers(in, o), 5);
  in.demanded_per_second = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(recommended_workers(in, o), 1);
}

TEST(AutoscaleTest, AMissedSloAsksForMoreThanThereAre) {
  autoscale_options o;
  o.slo_ttft_ms = 500;
  o.slo_itl_ms = 50;
  autoscale_input in;
  in.workers = 3;
  in.demanded_per_second = 100; // 1 by demand
  in.ttft_p90_ms = 400;
  in.itl_p90_ms = 40;
  EXPECT_EQ(recommended_workers(in, o), 1);
  in.ttft_p90_ms = 700;
  EXPECT_EQ(recommended_workers(in, o), 4);
  // A decode-only role is judged by ITL alone.
  in.ttft_applies = false;
  EXPECT_EQ(recommended_workers(in, o), 1);
  in.itl_p90_ms = 60;
  EXPECT_EQ(recommended_workers(in, o), 4);
  // No SLO set: latency is not looked at.
  EXPECT_EQ(recommended_workers(in, autoscale_options{}), 1);
}

TEST(AutoscaleTest, EwmaRateConvergesToTheArrivalRate) {
  ewma_rate r;
  for (int i = 0; i < 400; ++i) { // 100 s at 250 ms ticks, 50 units per tick
    r.add(50);
    r.tick(0.25, 10.0);
  }
  EXPECT_NEAR(r.per_second(), 200.0, 1.0);
  for (int i = 0; i < 40; ++i) // 10 s idle: one time constant, 1/e left
    r.tick(0.25, 10.0);
  EXPECT_NEAR(r.per_second(), 200.0 / std::exp(1.0), 2.0);
}

TEST(AutoscaleTest, HistogramQuantileOfTheWindow) {
  const std::vector<double> bounds{0.1, 0.2, 0.4};
  // Before: 10 observations at <= 0.1. Now: 10 more, all in (0.2, 0.4].
  const std::vector<uint64_t> before{10, 10, 10, 10};
  const std::vector<uint64_t> now{10, 10, 20, 20};
  auto q = histogram_quantile(bounds, before, now, 0.9);
  ASSERT_TRUE(q);
  EXPECT_NEAR(*q, 0.2 + 0.2 * 0.9, 1e-12);
  EXPECT_FALSE(histogram_quantile(bounds, now, now, 0.9)); // nothing observed
  // Past the last bound counts as the last bound.
  EXPECT_EQ(histogram_quantile(bounds, {}, std::vector<uint64_t>{0, 0, 0, 5}, 0.5), 0.4);
  EXPECT_FALSE(histogram_quantile(bounds, {}, std::vector<uint64_t>{1, 2}, 0.5)); // wrong size
}

} // namespace
