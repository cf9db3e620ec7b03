// Reading ucx_perftest's output: the final row's numbers, and clear errors
// when there is none.
#include <string>

#include <gtest/gtest.h>

#include "bench/ucx_perftest_runner.hpp"
#include "common/error.hpp"

namespace {

using tessera::bench::parse_perftest_output;

// A tag_bw run as ucx_perftest 1.13 prints it (UCX_TLS=tcp, 64 KiB).
const std::string tag_bw_output =
  "+--------------+--------------+------------------------------+---------------------+-----------------------+\n"
  "|              |              |       overhead (usec)        |   bandwidth (MB/s)  |  message rate (msg/s) |\n"
  "+--------------+--------------+----------+---------+---------+----------+----------+-----------+-----------+\n"
  "|    Stage     | # iterations | 50.0%ile | average | overall |  average |  overall |  average  |  overall  |\n"
  "+--------------+--------------+----------+---------+---------+----------+----------+-----------+-----------+\n"
  "[thread 0]              1313      3.518   764.672   764.672       81.73      81.73        1308        1308\n"
  "Final:                  2000      3.548   760.340   763.184       82.20      81.89        1315        1310\n";

TEST(UcxPerftestRunnerTest, ReadsTheFinalRow) {
  auto r = parse_perftest_output(tag_bw_output);
  ASSERT_TRUE(r) << tessera::error_text(r.error());
  EXPECT_EQ(r->iterations, 2000u);
  EXPECT_DOUBLE_EQ(r->latency_us_p50, 3.548);
  EXPECT_DOUBLE_EQ(r->latency_us_avg, 763.184);
  EXPECT_DOUBLE_EQ(r->bandwidth_mib_s, 81.89);
  EXPECT_DOUBLE_EQ(r->msgs_per_s, 1310);
}

TEST(UcxPerftestRunnerTest, ReadsInfiniteColumns) {
  // Seen under CPU contention: the last interval's average over no time.
  auto r = parse_perftest_output(
    "Final:                  1024      0.171       inf  5590.976        0.00     178.86           0         179\n");
  ASSERT_TRUE(r) << tessera::error_text(r.error());
  EXPECT_DOUBLE_EQ(r->latency_us_avg, 5590.976);
  EXPECT_DOUBLE_EQ(r->bandwidth_mib_s, 178.86);
}

TEST(UcxPerftestRunnerTest, ConvertsMebibytesToGigabytes) {
  tessera::bench::perftest_result r;
  r.bandwidth_mib_s = 1000;
  EXPECT_NEAR(r.bandwidth_gb_s(), 1.048576, 1e-12);
}

TEST(UcxPerftestRunnerTest, RejectsOutputWithoutAFinalRow) {
  auto r = parse_perftest_output("Waiting for connection...\n[thread 0] 1 2 3 4 5 6 7 8\n");
  ASSERT_FALSE(r);
  EXPECT_NE(tessera::error_text(r.error()).find("no 'Final:' row"), std::string::npos);
}

TEST(UcxPerftestRunnerTest, RejectsATruncatedFinalRow) {
  auto r = parse_perftest_output("Final:   2000   3.5   760.3\n");
  ASSERT_FALSE(r);
  EXPECT_NE(tessera::error_text(r.error()).find("eight numbers"), std::string::npos);
}

TEST(UcxPerftestRunnerTest, PrintsTheClientCommand) {
  const tessera::bench::perftest_spec s{
    .test = "ucp_put_bw", .size_bytes = 1048576, .iterations = 2048, .warmup = 10, .tls = "sm,self,tcp"};
  EXPECT_EQ(tessera::bench::perftest_client_command(s, 13337),
            "UCX_TLS=sm,self,tcp ucx_perftest 127.0.0.1 -p 13337 -t ucp_put_bw -s 1048576 -n 2048 -w 10");
  EXPECT_EQ(tessera::bench::perftest_client_command(s, 0),
            "UCX_TLS=sm,self,tcp ucx_perftest 127.0.0.1 -p PORT -t ucp_put_bw -s 1048576 -n 2048 -w 10");
}

TEST(UcxPerftestRunnerTest, TheCommandCarriesTheEnvironmentAndErrorHandling) {
  const tessera::bench::perftest_spec s{.test = "tag_bw",
                                        .size_bytes = 65536,
                                        .iterations = 100,
                                        .warmup = 8,
                                        .tls = "tcp",
                                        .env = {"UCX_NET_DEVICES=lo", "UCX_TCP_TX_SEG_SIZE=65536"},
                                        .error_handling = true};
  EXPECT_EQ(tessera::bench::perftest_client_command(s, 0),
            "UCX_TLS=tcp UCX_NET_DEVICES=lo UCX_TCP_TX_SEG_SIZE=65536 ucx_perftest 127.0.0.1 "
            "-p PORT -t tag_bw -s 65536 -n 100 -w 8 -e");
}

TEST(UcxPerftestRunnerTest, RunsInANodesSetUpWhereInstalled) {
  // ucx_perftest with -e over tcp on lo only, with the node's segment
  // sizes, completes; the same with a device that does not exist fails
  // (so the environment reaches ucx_perftest).
  const auto program = tessera::bench::find_ucx_perftest();
  if (program.empty())
    GTEST_SKIP() << "ucx_perftest not installed (Debian: ucx-utils)";
  tessera::bench::perftest_spec s{.test = "tag_bw",
                                  .size_bytes = 65536,
                                  .iterations = 64,
                                  .warmup = 4,
                                  .tls = "tcp",
                                  .env = {"UCX_NET_DEVICES=lo", "UCX_TCP_TX_SEG_SIZE=65536",
                                          "UCX_TCP_RX_SEG_SIZE=262144"},
                                  .error_handling = true};
  auto r = tessera::bench::run_perftest(program, s);
  ASSERT_TRUE(r) << tessera::error_text(r.error());
  EXPECT_EQ(r->iterations, 64u);
  EXPECT_GT(r->bandwidth_gb_s(), 0);
  s.env.front() = "UCX_NET_DEVICES=tessera_none0";
  s.timeout = std::chrono::milliseconds{20000};
  EXPECT_FALSE(tessera::bench::run_perftest(program, s)) << "no interface: no run";
}

} // namespace
