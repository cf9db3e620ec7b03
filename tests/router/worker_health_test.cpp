#include "actors/router/worker_health.hpp"

#include <gtest/gtest.h>

namespace {

using namespace tessera::actors;
using namespace std::chrono_literals;
using clock_type = worker_health::clock;

const clock_type::time_point t0{std::chrono::hours{1}};

health_options opts() {
  health_options o;
  o.heartbeat_timeout = 1500ms;
  o.canary_interval = 1000ms;
  o.canary_timeout = 1500ms;
  return o;
}

TEST(WorkerHealthTest, AWorkerThatJustJoinedIsHealthy) {
  worker_health h{t0};
  auto v = h.check(t0 + 100ms, opts());
  EXPECT_TRUE(v.healthy);
  EXPECT_EQ(v.reason, "");
}

TEST(WorkerHealthTest, HeartbeatsStoppingMakeItUnhealthyAfterTheTimeout) {
  worker_health h{t0};
  h.heard(t0 + 500ms);
  EXPECT_TRUE(h.check(t0 + 2000ms, opts()).healthy); // 1.5 s after the last beat
  auto v = h.check(t0 + 2100ms, opts());
  EXPECT_FALSE(v.healthy);
  EXPECT_EQ(v.reason, "no heartbeat for 1.6 s (timeout 1.5 s)");
  h.heard(t0 + 2200ms);
  EXPECT_TRUE(h.check(t0 + 2300ms, opts()).healthy) << "a heartbeat brings it back";
}

TEST(WorkerHealthTest, NodeDownIsUnhealthyUntilAHeartbeatArrives) {
  worker_health h{t0};
  h.node_down("decode", t0 + 100ms);
  auto v = h.check(t0 + 400ms, opts());
  EXPECT_FALSE(v.healthy);
  EXPECT_EQ(v.reason, "node 'decode' disconnected 0.3 s ago");
  EXPECT_FALSE(h.canary_due(t0 + 5s, opts())) << "no canary to a node that is known to be down";
  h.heard(t0 + 500ms);
  EXPECT_TRUE(h.check(t0 + 600ms, opts()).healthy);
}

TEST(WorkerHealthTest, CanariesAreDueOncePerIntervalAndOneAtATime) {
  worker_health h{t0};
  EXPECT_TRUE(h.canary_due(t0, opts())) << "the first one at once";
  h.canary_sent(7, t0);
  EXPECT_EQ(h.outstanding_canary(), 7u);
  EXPECT_FALSE(h.canary_due(t0 + 2s, opts())) << "one outstanding";
  EXPECT_TRUE(h.canary_passed(7, t0 + 20ms));
  EXPECT_EQ(h.last_canary_latency(), 20ms);
  EXPECT_FALSE(h.canary_due(t0 + 999ms, opts()));
  EXPECT_TRUE(h.canary_due(t0 + 1000ms, opts()));
  auto off = opts();
  off.canary_interval = 0ms;
  EXPECT_FALSE(h.canary_due(t0 + 10s, off)) << "interval 0 turns canaries off";
}

TEST(WorkerHealthTest, AFailedCanaryIsUnhealthyWithItsReasonUntilOnePasses) {
  worker_health h{t0};
  h.canary_sent(1, t0);
  EXPECT_FALSE(h.canary_failed(2, "someone else's", t0 + 10ms)) << "not the outstanding canary";
  EXPECT_TRUE(h.canary_failed(1, "worker decode-0 crashed: injected fault", t0 + 10ms));
  h.heard(t0 + 100ms);
  auto v = h.check(t0 + 200ms, opts());
  EXPECT_FALSE(v.healthy) << "heartbeats do not hide a failing engine";
  EXPECT_EQ(v.reason, "health canary failed: worker decode-0 crashed: injected fault");
  h.canary_sent(3, t0 + 1010ms);
  EXPECT_FALSE(h.check(t0 + 1020ms, opts()).healthy) << "still failed while the next one runs";
  EXPECT_TRUE(h.canary_passed(3, t0 + 1030ms));
  EXPECT_FALSE(h.canary_passed(3, t0 + 1040ms)) << "a result counts once";
  EXPECT_TRUE(h.check(t0 + 1040ms, opts()).healthy);
}

TEST(WorkerHealthTest, ALateCanaryIsUnhealthyAtOnceAndExpiresIntoAFailure) {
  worker_health h{t0};
  h.canary_sent(5, t0);
  h.heard(t0 + 1400ms);
  EXPECT_TRUE(h.check(t0 + 1500ms, opts()).healthy);
  EXPECT_FALSE(h.expire_canary(t0 + 1500ms, opts()));
  auto v = h.check(t0 + 1600ms, opts());
  EXPECT_FALSE(v.healthy) << "a worker that beats but does not compute";
  EXPECT_EQ(v.reason, "health canary unanswered for 1.6 s (timeout 1.5 s)");
  EXPECT_EQ(h.expire_canary(t0 + 1600ms, opts()), 5u);
  EXPECT_FALSE(h.outstanding_canary());
  EXPECT_EQ(h.check(t0 + 1600ms, opts()).reason, "health canary failed: no answer within 1.5 s");
  EXPECT_TRUE(h.canary_due(t0 + 1600ms, opts())) << "the next one can go";
  EXPECT_FALSE(h.canary_passed(5, t0 + 1700ms)) << "the expired one's late token does not count";
}

TEST(WorkerHealthTest, AHeartbeatTimeoutIsReportedBeforeACanaryTimeout) {
  worker_health h{t0};
  h.canary_sent(1, t0);
  EXPECT_EQ(h.check(t0 + 3s, opts()).reason, "no heartbeat for 3.0 s (timeout 1.5 s)");
}

// What kind of unhealthy a worker is decides whether panic routing may use
// it: only late (alive, connected, nothing failed) versus down or failed.

TEST(WorkerHealthTest, AHealthyWorkersVerdictHasNoFault) {
  worker_health h{t0};
  EXPECT_EQ(h.check(t0 + 100ms, opts()).fault, health_fault::none);
}

TEST(WorkerHealthTest, AnOverdueHeartbeatIsLateOnly) {
  worker_health h{t0};
  auto v = h.check(t0 + 1600ms, opts());
  EXPECT_FALSE(v.healthy);
  EXPECT_EQ(v.fault, health_fault::late);
  EXPECT_EQ(v.reason, "no heartbeat for 1.6 s (timeout 1.5 s)");
  h.heard(t0 + 1700ms);
  EXPECT_EQ(h.check(t0 + 1800ms, opts()).fault, health_fault::none) << "a heartbeat ends it";
}

TEST(WorkerHealthTest, AnOverdueOrExpiredCanaryIsLateOnly) {
  worker_health h{t0};
  h.canary_sent(1, t0);
  h.heard(t0 + 1500ms);
  auto v = h.check(t0 + 1600ms, opts());
  EXPECT_EQ(v.fault, health_fault::late) << v.reason;
  ASSERT_EQ(h.expire_canary(t0 + 1600ms, opts()), 1u);
  v = h.check(t0 + 1700ms, opts());
  EXPECT_FALSE(v.healthy);
  EXPECT_EQ(v.reason, "health canary failed: no answer within 1.5 s");
  EXPECT_EQ(v.fault, health_fault::late) << "no answer in time is lateness, not an error";
  h.canary_sent(2, t0 + 2600ms);
  EXPECT_TRUE(h.canary_passed(2, t0 + 2650ms));
  h.heard(t0 + 2650ms);
  EXPECT_EQ(h.check(t0 + 2700ms, opts()).fault, health_fault::none);
}

TEST(WorkerHealthTest, ACanaryTimedOutOnItsWayIsLateOnly) {
  worker_health h{t0};
  h.canary_sent(4, t0);
  EXPECT_FALSE(h.canary_timed_out(5, "not admitted: request_timeout", t0 + 1500ms)) << "not the outstanding one";
  EXPECT_TRUE(h.canary_timed_out(4, "not admitted: request_timeout", t0 + 1500ms));
  EXPECT_FALSE(h.outstanding_canary());
  h.heard(t0 + 1500ms);
  auto v = h.check(t0 + 1510ms, opts());
  EXPECT_FALSE(v.healthy);
  EXPECT_EQ(v.reason, "health canary failed: not admitted: request_timeout");
  EXPECT_EQ(v.fault, health_fault::late);
}

TEST(WorkerHealthTest, ACanaryErrorIsAFailureEvenWhileHeartbeatsAreLate) {
  worker_health h{t0};
  h.canary_sent(1, t0);
  ASSERT_TRUE(h.canary_failed(1, "engine on fire", t0 + 10ms));
  auto v = h.check(t0 + 100ms, opts());
  EXPECT_EQ(v.fault, health_fault::canary_failed);
  v = h.check(t0 + 1600ms, opts());
  EXPECT_EQ(v.fault, health_fault::canary_failed) << "late as well, but it failed: never a panic target";
  EXPECT_EQ(v.reason, "no heartbeat for 1.6 s (timeout 1.5 s); health canary failed: engine on fire");
  // A timeout after the error replaces it: the last canary decides.
  h.canary_sent(2, t0 + 1100ms);
  ASSERT_TRUE(h.canary_timed_out(2, "not admitted: request_timeout", t0 + 2600ms));
  EXPECT_EQ(h.check(t0 + 2700ms, opts()).fault, health_fault::late);
  // And an error after a timeout replaces that.
  h.canary_sent(3, t0 + 3600ms);
  ASSERT_TRUE(h.canary_failed(3, "the GPU fell off the bus", t0 + 3610ms));
  EXPECT_EQ(h.check(t0 + 3620ms, opts()).fault, health_fault::canary_failed);
}

TEST(WorkerHealthTest, NodeDownIsTheWorstFaultWhateverElseHolds) {
  worker_health h{t0};
  h.canary_sent(1, t0);
  ASSERT_TRUE(h.canary_failed(1, "engine on fire", t0 + 10ms));
  h.node_down("decode", t0 + 20ms);
  auto v = h.check(t0 + 3s, opts());
  EXPECT_EQ(v.fault, health_fault::node_down);
  EXPECT_EQ(v.reason, "node 'decode' disconnected 3.0 s ago");
  worker_health late{t0};
  late.node_down("decode", t0 + 2s);
  EXPECT_EQ(late.check(t0 + 2100ms, opts()).fault, health_fault::node_down)
    << "a killed worker is late too, but its node is down";
}

TEST(WorkerHealthTest, SetHealthMarksOnlyLateUndrainedWorkersLate) {
  worker_load w;
  set_health(w, {true, {}, health_fault::none}, false);
  EXPECT_TRUE(w.healthy);
  EXPECT_FALSE(w.late);
  set_health(w, {false, "x", health_fault::late}, false);
  EXPECT_FALSE(w.healthy);
  EXPECT_TRUE(w.late);
  set_health(w, {false, "x", health_fault::late}, true);
  EXPECT_FALSE(w.late) << "drained";
  set_health(w, {true, {}, health_fault::none}, true);
  EXPECT_FALSE(w.healthy) << "drained";
  for (auto f : {health_fault::canary_failed, health_fault::node_down}) {
    set_health(w, {false, "x", f}, false);
    EXPECT_FALSE(w.healthy);
    EXPECT_FALSE(w.late) << to_string(f);
  }
}

worker_status status(std::string name, worker_role role, bool healthy, std::string reason = {}) {
  worker_status s;
  s.name = std::move(name);
  s.node = s.name;
  s.role = role;
  s.healthy = healthy;
  s.reason = std::move(reason);
  return s;
}

TEST(ServingHealthTest, NoWorkerMeansStartingAndNotReady) {
  auto h = assess_serving({});
  EXPECT_EQ(h.status, serving_status::starting);
  EXPECT_FALSE(h.ready);
  EXPECT_EQ(h.reason, "no worker has joined yet");
}

TEST(ServingHealthTest, HealthyPrefillAndDecodeAreOk) {
  std::vector<worker_status> ws{status("p", worker_role::prefill, true), status("d", worker_role::decode, true)};
  auto h = assess_serving(ws);
  EXPECT_EQ(h.status, serving_status::ok);
  EXPECT_TRUE(h.ready);
  EXPECT_EQ(h.healthy, 2u);
  EXPECT_EQ(h.reason, "");
}

TEST(ServingHealthTest, APrefillWorkerAloneIsNoServingPath) {
  std::vector<worker_status> ws{status("p", worker_role::prefill, true),
                                status("d", worker_role::decode, false, "no heartbeat for 1.6 s (timeout 1.5 s)")};
  auto h = assess_serving(ws);
  EXPECT_EQ(h.status, serving_status::unavailable);
  EXPECT_FALSE(h.ready);
  EXPECT_EQ(h.healthy, 1u);
  EXPECT_EQ(h.reason, "no healthy worker can decode: d on node 'd' (decode): no heartbeat for 1.6 s (timeout 1.5 s)");
}

TEST(ServingHealthTest, ADecodeWorkerWithoutPrefillWorkerIsDegradedButReady) {
  // router_policy prefills on the decode worker when no prefill worker is healthy.
  std::vector<worker_status> ws{status("p", worker_role::prefill, false, "node 'p' disconnected 0.1 s ago"),
                                status("d", worker_role::decode, true)};
  auto h = assess_serving(ws);
  EXPECT_EQ(h.status, serving_status::degraded);
  EXPECT_TRUE(h.ready);
  EXPECT_EQ(h.reason, "p on node 'p' (prefill): node 'p' disconnected 0.1 s ago (no prefill worker: decode "
                      "workers prefill their own prompts)");
}

TEST(ServingHealthTest, OneHealthyAggregatedWorkerOfTwoIsDegradedButReady) {
  std::vector<worker_status> ws{status("a", worker_role::both, true),
                                status("b", worker_role::both, false, "health canary failed: boom")};
  auto h = assess_serving(ws);
  EXPECT_EQ(h.status, serving_status::degraded);
  EXPECT_TRUE(h.ready);
  EXPECT_EQ(h.reason, "b on node 'b' (both): health canary failed: boom");
}

TEST(ServingHealthTest, EveryWorkerUnhealthyIsUnavailable) {
  std::vector<worker_status> ws{status("a", worker_role::both, false, "x")};
  auto h = assess_serving(ws);
  EXPECT_EQ(h.status, serving_status::unavailable);
  EXPECT_FALSE(h.ready);
  EXPECT_STREQ(to_string(h.status), "unavailable");
}

} // namespace
