#include "actors/router/router_policy.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "actors/router/router_errc.hpp"
#include "common/error.hpp"
#include "tests/router/router_test_util.hpp"

namespace {

using namespace tessera::actors;
using namespace tessera::actors::test;
using tessera::error_message;

constexpr auto both = worker_role::both;
constexpr auto decode = worker_role::decode;
constexpr auto prefill = worker_role::prefill;

router_errc code_of(const caf::error& err) {
  EXPECT_EQ(err.category(), caf::atom("router"));
  return static_cast<router_errc>(err.code());
}

bool contains(const std::string& text, std::string_view part) {
  return text.find(part) != std::string::npos;
}

// --- Session stickiness ------------------------------------------------------

class RouterPolicyStickinessTest : public ::testing::TestWithParam<std::string> {};

TEST_P(RouterPolicyStickinessTest, SameSessionKeepsItsWorkersWhileTheyAreHealthy) {
  prefix_index idx;
  std::vector<worker_load> w{make_worker(1, both), make_worker(2, both), make_worker(3, both)};
  router_options opts;
  opts.sticky_break_factor = 0; // the break by load: units_routing_test
  auto p = policy(GetParam(), opts);
  const auto first = must_route(*p, make_request(chain(4), 64, "conv-a"), w, idx);
  EXPECT_FALSE(first.sticky);
  for (int turn = 0; turn < 5; ++turn) {
    // Whatever the policy would pick now, the session stays.
    for (auto& x : w)
      x.active_decode_blocks = x.id == first.decode_worker ? 100 : 0;
    const auto d = must_route(*p, make_request(chain(4 + turn), 64 + 16 * turn, "conv-a"), w, idx);
    EXPECT_EQ(d.decode_worker, first.decode_worker);
    EXPECT_TRUE(d.sticky);
    EXPECT_TRUE(contains(d.reason, "(sticky session)")) << d.reason;
  }
  EXPECT_EQ(p->sessions(), 1u);
}

TEST_P(RouterPolicyStickinessTest, UnhealthyStickyWorkerIsReplacedAndTheMappingUpdated) {
  prefix_index idx;
  std::vector<worker_load> w{make_worker(1, both), make_worker(2, both)};
  auto p = policy(GetParam());
  const auto first = must_route(*p, make_request(chain(4), 64, "conv-a"), w, idx);
  auto& sticky = first.decode_worker == 1 ? w[0] : w[1];
  const uint64_t other = first.decode_worker == 1 ? 2 : 1;
  sticky.healthy = false;
  auto d = must_route(*p, make_request(chain(4), 64, "conv-a"), w, idx);
  EXPECT_EQ(d.decode_worker, other);
  EXPECT_FALSE(d.sticky);
  EXPECT_TRUE(contains(d.reason, "replaced")) << d.reason;
  // Back to health, the session stays on its new worker.
  sticky.healthy = true;
  d = must_route(*p, make_request(chain(4), 64, "conv-a"), w, idx);
  EXPECT_EQ(d.decode_worker, other);
  EXPECT_TRUE(d.sticky);
}

TEST_P(RouterPolicyStickinessTest, StickyWorkerAtMaxRequestsIsReplaced) {
  prefix_index idx;
  std::vector<worker_load> w{make_worker(1, both), make_worker(2, both)};
  auto p = policy(GetParam());
  const auto first = must_route(*p, make_request(chain(4), 64, "conv-a"), w, idx);
  auto& sticky = first.decode_worker == 1 ? w[0] : w[1];
  sticky.max_requests = 4;
  sticky.active_requests = 4;
  const auto d = must_route(*p, make_request(chain(4), 64, "conv-a"), w, idx);
  EXPECT_NE(d.decode_worker, first.decode_worker);
}

INSTANTIATE_TEST_SUITE_P(AllPolicies, RouterPolicyStickinessTest,
                         ::testing::Values("kv", "round-robin", "random", "least-loaded"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

TEST(RouterPolicyTest, StickyPrefillWorkerIsKeptForLongTurnsAndReplacedWhenDown) {
  prefix_index idx;
  std::vector<worker_load> w{make_worker(1, decode), make_worker(2, prefill),
                             make_worker(3, prefill, 0, 1000)};
  router_options opts;
  opts.max_local_prefill_tokens = 32;
  auto p = policy("kv", opts);
  const auto c = chain(16);
  auto d = must_route(*p, make_request(c, 128, "conv-a"), w, idx);
  EXPECT_EQ(d.prefill_worker, 2u);
  // The kv cost now prefers 3, but the session keeps 2.
  w[1].queued_prefill_tokens = 5000;
  w[2].queued_prefill_tokens = 0;
  d = must_route(*p, make_request(c, 256, "conv-a"), w, idx);
  EXPECT_EQ(d.prefill_worker, 2u);
  EXPECT_TRUE(contains(d.reason, "prefill 2 (sticky session)")) << d.reason;
  // A short turn prefills locally and keeps the prefill binding.
  d = must_route(*p, make_request(c, 20, "conv-a"), w, idx);
  EXPECT_FALSE(d.disaggregated);
  d = must_route(*p, make_request(c, 256, "conv-a"), w, idx);
  EXPECT_EQ(d.prefill_worker, 2u);
  // Prefill 2 goes down: replaced by 3, which the session then keeps.
  w[1].healthy = false;
  d = must_route(*p, make_request(c, 256, "conv-a"), w, idx);
  EXPECT_EQ(d.prefill_worker, 3u);
  w[1].healthy = true;
  w[1].queued_prefill_tokens = 0;
  w[2].queued_prefill_tokens = 5000;
  d = must_route(*p, make_request(c, 256, "conv-a"), w, idx);
  EXPECT_EQ(d.prefill_worker, 3u);
}

TEST(RouterPolicyTest, SessionTableForgetsTheLeastRecentlyRoutedSession) {
  prefix_index idx;
  const std::vector<worker_load> w{make_worker(1, both), make_worker(2, both),
                                   make_worker(3, both)};
  router_options opts;
  opts.max_sessions = 2;
  auto p = policy("round-robin", opts);
  const auto a = must_route(*p, make_request(chain(4), 64, "a"), w, idx); // 1
  must_route(*p, make_request(chain(4), 64, "b"), w, idx);                // 2
  EXPECT_TRUE(must_route(*p, make_request(chain(4), 64, "a"), w, idx).sticky);
  must_route(*p, make_request(chain(4), 64, "c"), w, idx); // forgets b
  EXPECT_EQ(p->sessions(), 2u);
  EXPECT_EQ(p->session_evictions(), 1u);
  EXPECT_TRUE(must_route(*p, make_request(chain(4), 64, "a"), w, idx).sticky);
  EXPECT_FALSE(must_route(*p, make_request(chain(4), 64, "b"), w, idx).sticky);
  EXPECT_EQ(a.decode_worker, 1u);
}

TEST(RouterPolicyTest, NoSessionIdOrZeroTableMeansNoStickiness) {
  prefix_index idx;
  const std::vector<worker_load> w{make_worker(1, both), make_worker(2, both)};
  auto p = policy("round-robin");
  EXPECT_EQ(must_route(*p, make_request(chain(4), 64), w, idx).decode_worker, 1u);
  EXPECT_EQ(must_route(*p, make_request(chain(4), 64), w, idx).decode_worker, 2u);
  EXPECT_EQ(p->sessions(), 0u);
  router_options opts;
  opts.max_sessions = 0;
  p = policy("round-robin", opts);
  EXPECT_EQ(must_route(*p, make_request(chain(4), 64, "s"), w, idx).decode_worker, 1u);
  const auto d = must_route(*p, make_request(chain(4), 64, "s"), w, idx);
  EXPECT_EQ(d.decode_worker, 2u);
  EXPECT_FALSE(d.sticky);
  EXPECT_EQ(p->sessions(), 0u);
}

TEST(RouterPolicyTest, ForgottenSessionIsRoutedAfresh) {
  prefix_index idx;
  const std::vector<worker_load> w{make_worker(1, both), make_worker(2, both)};
  auto p = policy("round-robin");
  EXPECT_EQ(must_route(*p, make_request(chain(4), 64, "s"), w, idx).decode_worker, 1u);
  p->forget_session("s");
  EXPECT_EQ(p->sessions(), 0u);
  const auto d = must_route(*p, make_request(chain(4), 64, "s"), w, idx);
  EXPECT_EQ(d.decode_worker, 2u);
  EXPECT_FALSE(d.sticky);
}

// --- Conditional disaggregation ----------------------------------------------

// The decode worker holds 2 blocks (32 tokens); the threshold is 64 tokens.
class RouterPolicyDisaggregationTest : public ::testing::Test {
protected:
  RouterPolicyDisaggregationTest() {
    f.store(1, prefix(c, 2));
    opts.max_local_prefill_tokens = 64;
  }
  route_decision route_prompt(int32_t prompt_tokens) {
    auto p = policy("kv", opts);
    return must_route(*p, make_request(c, prompt_tokens), w, f.index);
  }
  const std::vector<kv_block_hash> c = chain(16);
  fed_index f;
  router_options opts;
  std::vector<worker_load> w{make_worker(1, decode), make_worker(2, prefill)};
};

TEST_F(RouterPolicyDisaggregationTest, UncachedPartAtTheThresholdPrefillsOnTheDecodeWorker) {
  const auto d = route_prompt(96); // 96 - 32 = 64
  EXPECT_FALSE(d.disaggregated);
  EXPECT_EQ(d.decode_worker, 1u);
  EXPECT_EQ(d.prefill_worker, 1u);
  EXPECT_EQ(d.cached_blocks, 2);
  EXPECT_TRUE(contains(d.reason, "prefill local (uncached 64 <= 64 tokens)")) << d.reason;
}

TEST_F(RouterPolicyDisaggregationTest, UncachedPartBelowTheThresholdPrefillsOnTheDecodeWorker) {
  const auto d = route_prompt(95);
  EXPECT_FALSE(d.disaggregated);
  EXPECT_EQ(d.prefill_worker, 1u);
}

TEST_F(RouterPolicyDisaggregationTest, UncachedPartAboveTheThresholdPrefillsRemotely) {
  const auto d = route_prompt(97);
  EXPECT_TRUE(d.disaggregated);
  EXPECT_EQ(d.decode_worker, 1u);
  EXPECT_EQ(d.prefill_worker, 2u);
  EXPECT_EQ(d.cached_blocks, 0); // the prefill worker holds nothing
  EXPECT_TRUE(contains(d.reason, "uncached on decode 65 > 64 tokens")) << d.reason;
}

TEST_F(RouterPolicyDisaggregationTest, EveryPolicyAppliesTheSameThreshold) {
  for (auto name : router_policy_names()) {
    auto p = policy(name, opts);
    EXPECT_FALSE(must_route(*p, make_request(c, 96), w, f.index).disaggregated) << name;
    EXPECT_TRUE(must_route(*p, make_request(c, 97), w, f.index).disaggregated) << name;
  }
}

TEST_F(RouterPolicyDisaggregationTest, NoHealthyPrefillWorkerMeansLocalPrefill) {
  w[1].healthy = false;
  const auto d = route_prompt(4096);
  EXPECT_FALSE(d.disaggregated);
  EXPECT_EQ(d.prefill_worker, 1u);
  EXPECT_TRUE(contains(d.reason, "no prefill worker")) << d.reason;
}

TEST(RouterPolicyTest, AggregatedWorkersPrefillTheirOwnRequests) {
  prefix_index idx;
  const std::vector<worker_load> w{make_worker(1, both), make_worker(2, both)};
  router_options opts;
  opts.max_local_prefill_tokens = 0;
  auto p = policy("kv", opts);
  const auto d = must_route(*p, make_request(chain(64), 1024), w, idx);
  EXPECT_FALSE(d.disaggregated);
  EXPECT_EQ(d.prefill_worker, d.decode_worker);
  // Unless both workers may prefill for others.
  opts.remote_prefill_on_both = true;
  p = policy("kv", opts);
  const auto e = must_route(*p, make_request(chain(64), 1024), w, idx);
  EXPECT_TRUE(e.disaggregated);
  EXPECT_NE(e.prefill_worker, e.decode_worker);
}

// --- Errors --------------------------------------------------------------------

TEST(RouterPolicyTest, NoHealthyWorkerIsAnErrorThatSaysWhy) {
  prefix_index idx;
  std::vector<worker_load> w{make_worker(1, both), make_worker(2, decode),
                             make_worker(3, prefill)};
  w[0].healthy = false;
  w[1].max_requests = 2;
  w[1].active_requests = 2;
  for (auto name : router_policy_names()) {
    auto p = policy(name);
    auto d = p->route(make_request(chain(4), 64), w, idx);
    ASSERT_FALSE(d) << name;
    EXPECT_EQ(code_of(d.error()), router_errc::no_healthy_worker);
    EXPECT_EQ(error_message(d.error()),
              "no healthy worker can decode: 3 known, 1 unhealthy, 1 at max_requests or without KV room, "
              "1 prefill-only");
    auto none = p->route(make_request(chain(4), 64), {}, idx);
    ASSERT_FALSE(none);
    EXPECT_EQ(code_of(none.error()), router_errc::no_healthy_worker);
  }
}

TEST(RouterPolicyTest, UnhealthyWorkersAreNeverChosen) {
  fed_index f;
  const auto c = chain(8);
  f.store(2, c); // the unhealthy worker holds the whole prompt
  std::vector<worker_load> w{make_worker(1, both), make_worker(2, both), make_worker(3, both)};
  w[1].healthy = false;
  for (auto name : router_policy_names()) {
    auto p = policy(name);
    for (int i = 0; i < 20; ++i)
      EXPECT_NE(must_route(*p, make_request(c, 128), w, f.index).decode_worker, 2u) << name;
  }
}

TEST(RouterPolicyTest, UnknownPolicyNameIsAnErrorNamingTheChoices) {
  auto p = make_router_policy("fastest");
  ASSERT_FALSE(p);
  EXPECT_EQ(code_of(p.error()), router_errc::unknown_policy);
  EXPECT_EQ(error_message(p.error()),
            "unknown router policy 'fastest'; valid: kv, round-robin, random, least-loaded");
  for (auto name : router_policy_names()) {
    auto q = make_router_policy(name);
    ASSERT_TRUE(q) << name;
    EXPECT_EQ((*q)->name(), name);
  }
}

TEST(RouterPolicyTest, OutOfRangeOptionsAreRejected) {
  router_options opts;
  opts.overlap_weight = -1.0;
  auto p = make_router_policy("kv", opts);
  ASSERT_FALSE(p);
  EXPECT_EQ(code_of(p.error()), router_errc::invalid_options);
  EXPECT_TRUE(contains(error_message(p.error()), "overlap_weight")) << error_message(p.error());
  opts.overlap_weight = std::numeric_limits<double>::quiet_NaN();
  EXPECT_FALSE(make_router_policy("kv", opts));
  opts.overlap_weight = 1.0;
  opts.max_local_prefill_tokens = -1;
  p = make_router_policy("round-robin", opts);
  ASSERT_FALSE(p);
  EXPECT_EQ(code_of(p.error()), router_errc::invalid_options);
  EXPECT_TRUE(contains(error_message(p.error()), "max_local_prefill_tokens"));
}

TEST(RouterPolicyTest, InconsistentRequestIsRejected) {
  prefix_index idx;
  const std::vector<worker_load> w{make_worker(1, both)};
  auto p = policy("kv");
  route_request r = make_request(chain(4), 64);
  r.block_tokens = 0;
  auto d = p->route(r, w, idx);
  ASSERT_FALSE(d);
  EXPECT_EQ(code_of(d.error()), router_errc::invalid_request);
  r = make_request(chain(4), 64);
  r.prompt_tokens = 63; // 4 full blocks do not fit in 63 tokens
  d = p->route(r, w, idx);
  ASSERT_FALSE(d);
  EXPECT_EQ(error_message(d.error()),
            "4 block hashes for a prompt of 63 tokens holds at most 3 full blocks of 16 tokens");
  r.prompt_tokens = 0;
  r.block_hashes.clear();
  EXPECT_FALSE(p->route(r, w, idx));
}

TEST(RouterPolicyTest, DecisionDoesNotDependOnTheOrderOfWorkers) {
  fed_index f;
  const auto c = chain(8);
  f.store(2, prefix(c, 3));
  f.store(3, prefix(c, 5));
  // kv costs: 8 + 1 = 9, 5 + 2 = 7, 3 + 3 = 6, 8 + 0 = 8.
  std::vector<worker_load> w{make_worker(1, both, 1), make_worker(2, both, 2),
                             make_worker(3, both, 3), make_worker(4, both)};
  auto p = policy("kv");
  const auto d = must_route(*p, make_request(c, 128), w, f.index);
  std::reverse(w.begin(), w.end());
  const auto e = must_route(*p, make_request(c, 128), w, f.index);
  EXPECT_EQ(d.decode_worker, e.decode_worker);
  EXPECT_EQ(d.reason, e.reason);
  EXPECT_EQ(d.decode_worker, 3u);
}

TEST(RouterPolicyTest, ErrorCodeNamesAreStable) {
  EXPECT_STREQ(to_string(router_errc::no_healthy_worker), "no_healthy_worker");
  EXPECT_STREQ(to_string(router_errc::unknown_policy), "unknown_policy");
  EXPECT_STREQ(to_string(router_errc::invalid_request), "invalid_request");
  EXPECT_STREQ(to_string(router_errc::invalid_options), "invalid_options");
  EXPECT_STREQ(to_string(worker_role::both), "both");
}

} // namespace
