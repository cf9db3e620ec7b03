// The host-saturation guard of bench trace (bench/host_guard.hpp): a sim
// run whose steps took the time the model asked for is the model's; one
// whose steps overran or waited, or whose client sent late, is the host's.
#include "bench/host_guard.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bench/trace_report.hpp"

namespace tessera::bench {
namespace {

/// Two sim workers over a replay: each asked for `asked` wall seconds and
/// its steps were busy `busy` and waited `delay`.
host_guard_input two_workers(double asked, double busy, double delay) {
  host_guard_input in;
  for (const auto* w : {"prefill-0", "decode-0"}) {
    in.asked_s.before[w] = 10;
    in.asked_s.after[w] = 10 + asked;
    in.busy_s.before[w] = 20;
    in.busy_s.after[w] = 20 + busy;
    in.delay_s.before[w] = 1;
    in.delay_s.after[w] = 1 + delay;
  }
  return in;
}

TEST(HostGuardTest, StepsThatLastWhatTheModelAskedAreNotHostBound) {
  const auto v = judge_host(two_workers(30, 31, 0.5));
  EXPECT_FALSE(v.host_bound) << v.reason;
  EXPECT_NEAR(v.stretch, 31.5 / 30, 1e-9);
  ASSERT_EQ(v.workers.size(), 2u);
  EXPECT_NEAR(v.workers.at("decode-0").at("delay_s"), 0.5, 1e-9);
}

TEST(HostGuardTest, StepsThatOverranOrWaitedAreHostBound) {
  auto overran = judge_host(two_workers(30, 45, 0));
  EXPECT_TRUE(overran.host_bound);
  EXPECT_NE(overran.reason.find("1.50x"), std::string::npos) << overran.reason;
  auto waited = judge_host(two_workers(30, 30, 3));
  EXPECT_TRUE(waited.host_bound) << "time waiting to start a step is the host's too";
  EXPECT_NE(waited.reason.find("waited 10.0%"), std::string::npos) << waited.reason;
}

TEST(HostGuardTest, ALateClientIsHostBound) {
  auto in = two_workers(30, 30, 0);
  in.send_lag_p99_ms = 400;
  const auto v = judge_host(in);
  EXPECT_TRUE(v.host_bound);
  EXPECT_NE(v.reason.find("400 ms late"), std::string::npos) << v.reason;
}

TEST(HostGuardTest, AnEngineThatAsksForNoTimeIsJudgedOnlyByTheClient) {
  host_guard_input in; // a cpu engine: no tessera_sim_step_wall_seconds_total growth
  in.busy_s.before["w"] = 0;
  in.busy_s.after["w"] = 100;
  in.asked_s.before["w"] = 0;
  in.asked_s.after["w"] = 0;
  const auto v = judge_host(in);
  EXPECT_FALSE(v.host_bound);
  EXPECT_EQ(v.stretch, 0);
  EXPECT_TRUE(v.workers.empty());
}

TEST(HostGuardTest, TheTableLeavesLatencyOutOfAHostBoundRunUnlessAllowed) {
  nlohmann::json j{{"label", "run"}, {"ttft_ms_p50", 12.0}, {"ttft_ms_p90", 20.0}, {"ttft_ms_p99", 30.0}};
  EXPECT_EQ(trace_table({j}).find("host-bound"), std::string::npos);
  j["host_bound"] = true;
  EXPECT_NE(trace_table({j}).find("host-bound"), std::string::npos);
  j["host_bound_allowed"] = true;
  EXPECT_EQ(trace_table({j}).find("host-bound"), std::string::npos);
}

} // namespace
} // namespace tessera::bench
