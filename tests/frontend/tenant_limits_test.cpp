// Per-tenant limits in model units (actors/frontend/tenant_limits.hpp): the
// bucket refills continuously, a request's output is held at admission and
// what it did not use comes back at release, output beyond a hold is
// charged as it comes and may take the balance below zero, max_concurrent counts requests in flight, refusals
// say when to retry, a reloaded key file drops tenants without breaking the
// counts of their requests in flight, and a request too big for the bucket
// is refused for good. The request priority is capped by the tenant's.

#include <gtest/gtest.h>

#include <chrono>
#include <limits>

#include "actors/frontend/openai_request.hpp"
#include "actors/frontend/tenant_limits.hpp"

namespace {

using namespace std::chrono_literals;
using tessera::actors::frontend::max_request_priority;
using tessera::actors::frontend::request_priority;
using tessera::actors::frontend::tenant_limit;
using tessera::actors::frontend::tenant_limit_kind;
using tessera::actors::frontend::tenant_limits;

const auto t0 = tenant_limits::clock::time_point{} + 1000s;

// a = 1 unit per input token, b = 2 per output token, c = 10 per request.
tenant_limits table() { return tenant_limits{{.per_input_token = 1, .per_output_token = 2, .per_request = 10}}; }

TEST(TenantLimitsTest, AdmitsFromAFullBucketAndRefusesWhatIsLeftOver) {
  auto t = table();
  const tenant_limit lim{.units_per_minute = 600, .max_concurrent = {}};
  auto a = t.admit("alice", lim, 500, t0);
  EXPECT_TRUE(a.admitted);
  EXPECT_DOUBLE_EQ(a.balance, 100);
  auto b = t.admit("alice", lim, 200, t0);
  EXPECT_FALSE(b.admitted);
  EXPECT_EQ(b.limit, tenant_limit_kind::units);
  // 100 units missing at 10 units/s.
  EXPECT_DOUBLE_EQ(b.retry_after_s, 10.0);
  // Nothing was taken by the refusal.
  EXPECT_DOUBLE_EQ(*t.balance("alice", t0), 100);
  EXPECT_EQ(t.in_flight("alice"), 1);
}

TEST(TenantLimitsTest, RefillsContinuouslyUpToTheCapacity) {
  auto t = table();
  const tenant_limit lim{.units_per_minute = 600, .max_concurrent = {}};
  ASSERT_TRUE(t.admit("alice", lim, 600, t0).admitted);
  EXPECT_DOUBLE_EQ(*t.balance("alice", t0 + 500ms), 5);
  EXPECT_DOUBLE_EQ(*t.balance("alice", t0 + 30s), 300);
  EXPECT_FALSE(t.admit("alice", lim, 301, t0 + 30s).admitted);
  EXPECT_TRUE(t.admit("alice", lim, 301, t0 + 30100ms).admitted);
  // Never above the capacity, however long it waits.
  EXPECT_DOUBLE_EQ(*t.balance("alice", t0 + 1h), 600);
}

TEST(TenantLimitsTest, OutputTokensAreChargedAndMayTakeTheBalanceNegative) {
  auto t = table();
  const tenant_limit lim{.units_per_minute = 60, .max_concurrent = {}};
  ASSERT_TRUE(t.admit("alice", lim, 50, t0).admitted);
  t.charge_output("alice", 20, 0, t0); // 40 units at b = 2
  EXPECT_DOUBLE_EQ(*t.balance("alice", t0), -30);
  // The next admission of 10 waits for 40 units at 1 unit/s.
  auto r = t.admit("alice", lim, 10, t0);
  ASSERT_FALSE(r.admitted);
  EXPECT_EQ(r.limit, tenant_limit_kind::units);
  EXPECT_DOUBLE_EQ(r.retry_after_s, 40.0);
  EXPECT_TRUE(t.admit("alice", lim, 10, t0 + 40s).admitted);
  // Charges for tenants it does not know, or of no tokens, change nothing.
  t.charge_output("bob", 1000, 0, t0);
  t.charge_output("alice", -5, 0, t0 + 40s);
  EXPECT_DOUBLE_EQ(*t.balance("alice", t0 + 40s), 0);
}

TEST(TenantLimitsTest, OutputTokensAreChargedForTheContextTheyRead) {
  // b = 2, d = 0.01: a token after 1000 tokens of context costs 12 units,
  // one after 10 costs 2.1.
  tenant_limits t{{.per_input_token = 1, .per_output_token = 2, .per_request = 10, .per_context_token = 0.01}};
  const tenant_limit lim{.units_per_minute = 6000, .max_concurrent = {}};
  ASSERT_TRUE(t.admit("long", lim, 0, t0).admitted);
  ASSERT_TRUE(t.admit("short", lim, 0, t0).admitted);
  t.charge_output("long", 4, 1000, t0);  // 4 * 2 + 0.01 * (4000 + 6)
  t.charge_output("short", 4, 10, t0);   // 4 * 2 + 0.01 * (40 + 6)
  EXPECT_NEAR(*t.balance("long", t0), 6000 - 48.06, 1e-9);
  EXPECT_NEAR(*t.balance("short", t0), 6000 - 8.46, 1e-9);
  // Charged in pieces, the same total as at once.
  ASSERT_TRUE(t.admit("pieces", lim, 0, t0).admitted);
  t.charge_output("pieces", 1, 1000, t0);
  t.charge_output("pieces", 3, 1001, t0);
  EXPECT_NEAR(*t.balance("pieces", t0), *t.balance("long", t0), 1e-9);
}

TEST(TenantLimitsTest, TheOutputIsHeldAtAdmissionAndWhatWasNotUsedComesBack) {
  auto t = table();
  const tenant_limit lim{.units_per_minute = 600, .max_concurrent = {}};
  // 100 to admit, 200 held (100 output tokens at b = 2).
  auto a = t.admit("alice", lim, 100, t0, 200);
  ASSERT_TRUE(a.admitted);
  EXPECT_DOUBLE_EQ(a.held, 200);
  EXPECT_DOUBLE_EQ(a.balance, 300);
  // 30 tokens come: charged to the hold, not again to the balance.
  double held = a.held;
  t.charge_output("alice", 30, 100, t0, &held);
  EXPECT_DOUBLE_EQ(held, 140);
  EXPECT_DOUBLE_EQ(*t.balance("alice", t0), 300);
  // It ends there: the 140 it did not use come back.
  t.release("alice", held, t0);
  EXPECT_DOUBLE_EQ(*t.balance("alice", t0), 440);
  EXPECT_EQ(t.in_flight("alice"), 0);
  // Never above the capacity.
  ASSERT_TRUE(t.admit("alice", lim, 0, t0 + 1h, 100).admitted);
  t.release("alice", 100, t0 + 1h);
  EXPECT_DOUBLE_EQ(*t.balance("alice", t0 + 1h), 600);
}

TEST(TenantLimitsTest, OutputBeyondItsHoldIsChargedToTheBalance) {
  auto t = table();
  const tenant_limit lim{.units_per_minute = 600, .max_concurrent = {}};
  auto a = t.admit("alice", lim, 0, t0, 20);
  ASSERT_TRUE(a.admitted);
  double held = a.held;
  t.charge_output("alice", 25, 0, t0, &held); // 50 units: 20 held, 30 more
  EXPECT_DOUBLE_EQ(held, 0);
  EXPECT_DOUBLE_EQ(*t.balance("alice", t0), 550);
  t.release("alice", held, t0);
  EXPECT_DOUBLE_EQ(*t.balance("alice", t0), 550);
}

TEST(TenantLimitsTest, AFloodOfQueuedRequestsIsAdmittedAtTheRateNotBeyondIt) {
  // The bug this guards: with only the prompt charged at admission, a
  // tenant whose requests queue (no output yet) got 60 of these in at once
  // from a bucket of 600; holding their output admits 10.
  auto t = table();
  const tenant_limit lim{.units_per_minute = 600, .max_concurrent = {}};
  int admitted = 0;
  for (int i = 0; i < 100; ++i)
    admitted += t.admit("flood", lim, 10, t0, 50).admitted ? 1 : 0;
  EXPECT_EQ(admitted, 10);
  // One more fits every 6 s of refill.
  EXPECT_FALSE(t.admit("flood", lim, 10, t0 + 5900ms, 50).admitted);
  EXPECT_TRUE(t.admit("flood", lim, 10, t0 + 6s, 50).admitted);
}

TEST(TenantLimitsTest, AHoldIsCappedSoThatEveryAdmissionThatFitsCanGoIn) {
  auto t = table();
  const tenant_limit lim{.units_per_minute = 600, .max_concurrent = {}};
  // A max_tokens worth more than the bucket holds what is left of it.
  auto a = t.admit("alice", lim, 100, t0, 1e9);
  ASSERT_TRUE(a.admitted);
  EXPECT_DOUBLE_EQ(a.held, 500);
  EXPECT_DOUBLE_EQ(a.balance, 0);
  t.release("alice", a.held, t0);
  // A refusal says when the admission and the hold fit, and the error
  // names the hold.
  ASSERT_TRUE(t.admit("alice", lim, 300, t0).admitted);
  auto r = t.admit("alice", lim, 100, t0, 400);
  ASSERT_FALSE(r.admitted);
  EXPECT_EQ(r.limit, tenant_limit_kind::units);
  EXPECT_DOUBLE_EQ(r.held, 400);
  // The first gave back its 500 unused: 500 there, 300 of them taken.
  EXPECT_DOUBLE_EQ(r.retry_after_s, 30.0); // 500 wanted, 200 there, 10 a second
  auto e = tessera::actors::frontend::tenant_refusal_error("alice", lim, r, 100);
  EXPECT_NE(e.message.find("costs 100 units to admit and holds 400 more for its max_tokens of output"),
            std::string::npos)
    << e.message;
  // A NaN or negative hold holds nothing; a tenant without a bucket holds
  // nothing either.
  EXPECT_DOUBLE_EQ(t.admit("bob", lim, 0, t0, std::numeric_limits<double>::quiet_NaN()).held, 0);
  EXPECT_DOUBLE_EQ(t.admit("carol", lim, 0, t0, -5).held, 0);
  EXPECT_DOUBLE_EQ(t.admit("dave", {}, 0, t0, 50).held, 0);
}

TEST(TenantLimitsTest, MaxConcurrentCountsRequestsInFlightUntilReleased) {
  auto t = table();
  const tenant_limit lim{.units_per_minute = {}, .max_concurrent = 2};
  EXPECT_TRUE(t.admit("alice", lim, 1e9, t0).admitted); // no bucket: units are free
  EXPECT_TRUE(t.admit("alice", lim, 1, t0).admitted);
  auto r = t.admit("alice", lim, 1, t0);
  EXPECT_FALSE(r.admitted);
  EXPECT_EQ(r.limit, tenant_limit_kind::concurrency);
  EXPECT_DOUBLE_EQ(r.retry_after_s, 1.0);
  // Another tenant has its own count.
  EXPECT_TRUE(t.admit("bob", lim, 1, t0).admitted);
  t.release("alice");
  EXPECT_EQ(t.in_flight("alice"), 1);
  EXPECT_TRUE(t.admit("alice", lim, 1, t0).admitted);
  // Releases beyond the admissions do not make room for more.
  for (int i = 0; i < 5; ++i)
    t.release("alice");
  EXPECT_EQ(t.in_flight("alice"), 0);
  EXPECT_TRUE(t.admit("alice", lim, 1, t0).admitted);
  EXPECT_TRUE(t.admit("alice", lim, 1, t0).admitted);
  EXPECT_FALSE(t.admit("alice", lim, 1, t0).admitted);
}

TEST(TenantLimitsTest, ConcurrencyRefusalTakesNoUnits) {
  auto t = table();
  const tenant_limit lim{.units_per_minute = 100, .max_concurrent = 1};
  ASSERT_TRUE(t.admit("alice", lim, 30, t0).admitted);
  EXPECT_FALSE(t.admit("alice", lim, 30, t0).admitted);
  EXPECT_DOUBLE_EQ(*t.balance("alice", t0), 70);
}

TEST(TenantLimitsTest, ARequestOverTheCapacityNeverFits) {
  auto t = table();
  const tenant_limit lim{.units_per_minute = 100, .max_concurrent = 4};
  auto r = t.admit("alice", lim, 100.5, t0);
  EXPECT_FALSE(r.admitted);
  EXPECT_EQ(r.limit, tenant_limit_kind::never_fits);
  EXPECT_DOUBLE_EQ(r.retry_after_s, 0);
  // Not even with a full bucket an hour later; exactly the capacity fits.
  EXPECT_EQ(t.admit("alice", lim, 100.5, t0 + 1h).limit, tenant_limit_kind::never_fits);
  EXPECT_TRUE(t.admit("alice", lim, 100, t0 + 1h).admitted);
  // A cost that is not a number never fits either.
  EXPECT_EQ(t.admit("alice", lim, std::numeric_limits<double>::quiet_NaN(), t0 + 1h).limit,
            tenant_limit_kind::never_fits);
  EXPECT_EQ(t.in_flight("alice"), 1);
}

TEST(TenantLimitsTest, AReloadedLimitReplacesTheOldOne) {
  auto t = table();
  ASSERT_TRUE(t.admit("alice", {.units_per_minute = 1000, .max_concurrent = {}}, 100, t0).admitted);
  // The file now says 60/min: the balance (900) is cut to the new capacity.
  auto r = t.admit("alice", {.units_per_minute = 60, .max_concurrent = {}}, 50, t0);
  EXPECT_TRUE(r.admitted);
  EXPECT_DOUBLE_EQ(r.balance, 10);
  // Unlimited now: no bucket; limited again: a full one.
  EXPECT_TRUE(t.admit("alice", {}, 1e6, t0).admitted);
  EXPECT_FALSE(t.balance("alice", t0).has_value());
  EXPECT_DOUBLE_EQ(t.admit("alice", {.units_per_minute = 60, .max_concurrent = {}}, 0, t0).balance, 60);
}

TEST(TenantLimitsTest, AReloadDropsTenantsButKeepsTheCountsOfTheirRequestsInFlight) {
  auto t = table();
  const tenant_limit lim{.units_per_minute = 600, .max_concurrent = 1};
  ASSERT_TRUE(t.admit("alice", lim, 100, t0).admitted);
  ASSERT_TRUE(t.admit("bob", lim, 100, t0).admitted);
  t.release("bob");
  EXPECT_EQ(t.size(), 2u);
  t.forget_absent({"carol"});
  // bob had nothing in flight: gone; alice stays until her release.
  EXPECT_EQ(t.size(), 1u);
  EXPECT_EQ(t.in_flight("alice"), 1);
  EXPECT_EQ(t.in_flight("bob"), 0);
  t.release("alice");
  EXPECT_EQ(t.size(), 0u);
  // A late release or charge for a forgotten tenant is harmless.
  t.release("alice");
  t.charge_output("alice", 10, 0, t0);
  EXPECT_EQ(t.size(), 0u);
}

TEST(TenantLimitsTest, ATenantNamedAgainBeforeItsLastReleaseKeepsItsCount) {
  auto t = table();
  const tenant_limit lim{.units_per_minute = {}, .max_concurrent = 1};
  ASSERT_TRUE(t.admit("alice", lim, 1, t0).admitted);
  t.forget_absent({});
  // The file names her again: her request in flight still counts.
  EXPECT_FALSE(t.admit("alice", lim, 1, t0).admitted);
  t.forget_absent({"alice"});
  t.release("alice");
  EXPECT_EQ(t.size(), 1u); // not dropped any more: kept
  EXPECT_TRUE(t.admit("alice", lim, 1, t0).admitted);
}

TEST(TenantLimitsTest, RefusalsBecomeErrorsThatNameTheLimitAndWhenToRetry) {
  using tessera::actors::frontend::retry_after_header_s;
  using tessera::actors::frontend::tenant_refusal_error;
  auto t = table();
  const tenant_limit lim{.units_per_minute = 600, .max_concurrent = 1};
  ASSERT_TRUE(t.admit("alice", lim, 590, t0).admitted);
  t.release("alice");
  auto units = t.admit("alice", lim, 100, t0);
  ASSERT_EQ(units.limit, tenant_limit_kind::units);
  EXPECT_DOUBLE_EQ(units.retry_after_s, 9.0);
  EXPECT_EQ(retry_after_header_s(units), 9);
  auto e = tenant_refusal_error("alice", lim, units, 100);
  EXPECT_EQ(e.status, 429);
  EXPECT_EQ(e.type, "rate_limit_error");
  EXPECT_EQ(e.code, "rate_limit_exceeded");
  EXPECT_NE(e.message.find("tenant 'alice' is over its rate limit of 600 model units per minute"),
            std::string::npos)
    << e.message;
  EXPECT_NE(e.message.find("retry in 9 s"), std::string::npos) << e.message;
  // A fraction of a second rounds up to a whole one.
  auto soon = t.admit("alice", lim, 10.5, t0);
  EXPECT_EQ(retry_after_header_s(soon), 1);

  ASSERT_TRUE(t.admit("alice", lim, 1, t0 + 1h).admitted);
  auto busy = t.admit("alice", lim, 1, t0 + 1h);
  EXPECT_EQ(retry_after_header_s(busy), 1);
  auto c = tenant_refusal_error("alice", lim, busy, 1);
  EXPECT_EQ(c.status, 429);
  EXPECT_NE(c.message.find("max_concurrent"), std::string::npos) << c.message;

  auto huge = t.admit("alice", lim, 601, t0 + 1h);
  auto n = tenant_refusal_error("alice", lim, huge, 601);
  EXPECT_EQ(n.status, 400);
  EXPECT_EQ(n.code, "request_exceeds_rate_limit");
  EXPECT_NE(n.message.find("can never be admitted"), std::string::npos) << n.message;
}

TEST(TenantLimitsTest, RequestPriorityIsCappedByTheTenants) {
  // Without keys: the body's value as given, 0 without one.
  EXPECT_EQ(request_priority(std::nullopt, std::nullopt), 0);
  EXPECT_EQ(request_priority(7, std::nullopt), 7);
  EXPECT_EQ(request_priority(-3, std::nullopt), -3);
  // With a tenant: its own priority by default, never above it.
  EXPECT_EQ(request_priority(std::nullopt, 10), 10);
  EXPECT_EQ(request_priority(5, 10), 5);
  EXPECT_EQ(request_priority(50, 10), 10);
  EXPECT_EQ(request_priority(-50, 10), -50);
  EXPECT_EQ(request_priority(3, -2), -2);
  // No request reaches the router's health canaries.
  EXPECT_EQ(request_priority(std::nullopt, std::numeric_limits<int32_t>::max()), max_request_priority);
  EXPECT_LT(request_priority(std::nullopt, std::numeric_limits<int32_t>::max()),
            std::numeric_limits<int32_t>::max()); // canary_priority
  EXPECT_EQ(request_priority(std::nullopt, std::numeric_limits<int32_t>::min()), -max_request_priority);
}

TEST(TenantLimitsTest, ThePriorityFieldIsARangeCheckedInteger) {
  using namespace tessera::actors::frontend;
  auto parse = [](const std::string& priority) {
    return parse_request(api_kind::completion,
                         R"({"model": "m", "prompt": "hi", "priority": )" + priority + "}");
  };
  auto ok = parse("5");
  ASSERT_TRUE(std::holds_alternative<api_request>(ok));
  EXPECT_EQ(std::get<api_request>(ok).priority, 5);
  EXPECT_EQ(std::get<api_request>(parse("-1000000")).priority, -1000000);
  EXPECT_FALSE(std::get<api_request>(parse("null")).priority.has_value());
  for (const auto* bad : {"1000001", "-1000001", "2147483647", "1.5", "\"9\"", "true", "[1]"}) {
    auto r = parse(bad);
    ASSERT_TRUE(std::holds_alternative<api_error>(r)) << bad;
    EXPECT_EQ(std::get<api_error>(r).status, 400) << bad;
    EXPECT_EQ(std::get<api_error>(r).param, "priority") << bad;
  }
}

} // namespace
