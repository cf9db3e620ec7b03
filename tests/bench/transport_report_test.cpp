// The transport benchmark's JSON, table and chart from hand-made results:
// every documented key is there, keyed by transport and batch size, with
// null (not 0) where a measurement is missing.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bench/transport_bench.hpp"
#include "bench/transport_report.hpp"

namespace {

using namespace tessera::bench;

transport_bench_results sample_results() {
  transport_bench_results r;
  r.probe = transport_probe_defaults(true);
  r.selections = default_transport_selections();
  transport_probe_result tcp;
  tcp.rtt_us_p50 = 20;
  tcp.rtt_us_p99 = 40;
  tcp.msgs_per_s = 300000;
  tcp.control_frame_bytes = 128;
  tcp.block_gb_s = {{65536, 0.5}, {1048576, 1.8}, {16777216, 2.7}};
  tcp.one_block_gb_s = {{65536, 0.5}, {1048576, 1.9}, {16777216, 2.8}};
  // Two rounds: the reported figures are per-figure medians (here the mean
  // of the two), a transport that failed in every round is null.
  transport_round a, b;
  a.tessera["tcp"] = tcp;
  tcp.rtt_us_p50 = 30;
  tcp.block_gb_s[1048576] = 2.2;
  b.tessera["tcp"] = tcp;
  a.errors["shm"] = "bench: round trips: no answer within 20000 ms";
  b.errors["shm"] = "bench: peer exited";
  perftest_figures p;
  p.tls = "tcp";
  perftest_result lat;
  lat.latency_us_p50 = 5; // one-way
  p.tag_lat = lat;
  perftest_result bw;
  bw.bandwidth_mib_s = 2861.02; // 3.0 GB/s
  p.tag_bw[1048576] = bw;
  p.put_bw[1048576] = bw;
  a.perftest["tcp"] = p;
  b.perftest["tcp"] = p;
  r.rounds = {a, b};
  summarize_rounds(r);
  return r;
}

TEST(TransportReportTest, JsonHasEveryKeyByTransportAndSize) {
  auto j = nlohmann::json::parse(transport_json(sample_results()));
  for (const char* k : {"rtt_us_p50", "rtt_us_p99", "msgs_per_s"})
    for (const char* t : {"tcp", "shm", "shm_err_peer"})
      EXPECT_TRUE(j[k].contains(t)) << k << "." << t;
  EXPECT_DOUBLE_EQ(j["rtt_us_p50"]["tcp"].get<double>(), 25);
  EXPECT_DOUBLE_EQ(j["msgs_per_s"]["tcp"].get<double>(), 300000);
  EXPECT_DOUBLE_EQ(j["block_gb_s"]["tcp"]["1048576"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(j["block_gb_s_one_block"]["tcp"]["16777216"].get<double>(), 2.8);
  for (const char* size : {"65536", "1048576", "16777216"})
    EXPECT_TRUE(j["block_gb_s"]["shm"][size].is_null()) << "a failed transport is null, not 0";
  EXPECT_EQ(j["errors"]["shm"], "round 1: bench: round trips: no answer within 20000 ms; "
                                 "round 2: bench: peer exited");
  EXPECT_EQ(j["transports"]["shm_err_peer"]["ucx_tls"], "sm,self,tcp");
  EXPECT_EQ(j["transports"]["shm_err_peer"]["peer_error_handling"], true);
}

TEST(TransportReportTest, PerftestIsInTheSameShapeWithRoundTripsDoubled) {
  auto j = nlohmann::json::parse(transport_json(sample_results()));
  const auto& pt = j["ucx_perftest"];
  EXPECT_DOUBLE_EQ(pt["tag_lat_us"]["tcp"].get<double>(), 5);
  EXPECT_DOUBLE_EQ(pt["rtt_us_p50"]["tcp"].get<double>(), 10);
  EXPECT_NEAR(pt["tag_bw_gb_s"]["tcp"]["1048576"].get<double>(), 3.0, 1e-3);
  EXPECT_NEAR(pt["ucp_put_bw_gb_s"]["tcp"]["1048576"].get<double>(), 3.0, 1e-3);
  EXPECT_TRUE(pt["tag_bw_gb_s"]["tcp"]["65536"].is_null());
  // Ours over theirs: 25 us vs a 10 us round trip; 2.0 vs 3.0 GB/s.
  EXPECT_DOUBLE_EQ(j["rtt_vs_perftest"]["tcp"].get<double>(), 2.5);
  EXPECT_NEAR(j["block_vs_put_bw"]["tcp"]["1048576"].get<double>(), 2.0 / 3.0, 1e-3);
}

TEST(TransportReportTest, EachRoundIsKeptBesideTheMedians) {
  auto j = nlohmann::json::parse(transport_json(sample_results()));
  EXPECT_EQ(j["rounds"], 2);
  ASSERT_EQ(j["per_round"].size(), 2u);
  EXPECT_DOUBLE_EQ(j["per_round"][0]["rtt_us_p50"]["tcp"].get<double>(), 20);
  EXPECT_DOUBLE_EQ(j["per_round"][1]["block_gb_s"]["tcp"]["1048576"].get<double>(), 2.2);
  EXPECT_EQ(j["per_round"][1]["errors"]["shm"], "bench: peer exited");
}

TEST(TransportReportTest, PairedRatiosAreMediansOfEachRoundsOwnRatio) {
  // Round trips (ours / perftest's): 10/10, 20/5, 30/30 us. The ratio of
  // the medians is 20/10 = 2; each round's own ratios are 1, 4, 1.
  transport_bench_results r;
  r.probe = transport_probe_defaults(true);
  r.selections = default_transport_selections();
  const double ours[] = {10, 20, 30}, theirs[] = {10, 5, 30};
  for (int i = 0; i < 3; ++i) {
    transport_round round;
    transport_probe_result t;
    t.rtt_us_p50 = ours[i];
    t.block_gb_s = {{1048576, ours[i]}};
    round.tessera["tcp"] = t;
    perftest_figures p;
    p.tls = "tcp";
    perftest_result lat;
    lat.latency_us_p50 = theirs[i] / 2; // one-way
    p.tag_lat = lat;
    perftest_result bw;
    bw.bandwidth_mib_s = theirs[i] * 1e9 / (1 << 20);
    p.tag_bw[1048576] = bw;
    round.perftest["tcp"] = p;
    r.rounds.push_back(round);
  }
  summarize_rounds(r);
  auto j = nlohmann::json::parse(transport_json(r));
  EXPECT_DOUBLE_EQ(j["rtt_vs_perftest"]["tcp"].get<double>(), 2);
  EXPECT_DOUBLE_EQ(j["paired"]["rtt_vs_perftest"]["tcp"].get<double>(), 1);
  EXPECT_NEAR(j["paired"]["block_vs_tag_bw"]["tcp"]["1048576"].get<double>(), 1, 1e-9);
  EXPECT_TRUE(j["paired"]["block_vs_put_bw"]["tcp"]["1048576"].is_null());
  EXPECT_TRUE(j["paired"]["rtt_vs_perftest"]["shm"].is_null());
  auto t = transport_table(r);
  EXPECT_NE(t.find("Paired"), std::string::npos) << t;
}

TEST(TransportReportTest, TableHasARowPerTransportAndSize) {
  auto t = transport_table(sample_results());
  EXPECT_NE(t.find("shm (err peer)"), std::string::npos);
  EXPECT_NE(t.find("16 MiB"), std::string::npos);
  EXPECT_NE(t.find("shm failed: round 1: bench: round trips"), std::string::npos) << t;
  EXPECT_NE(t.find(" 0.67 "), std::string::npos) << t; // tcp 1 MiB over put_bw
  EXPECT_NE(t.find("1.80-2.20"), std::string::npos) << t; // its range over the rounds
}

TEST(TransportReportTest, ChartHasAGroupPerTransportAndSize) {
  auto c = transport_chart(sample_results());
  EXPECT_EQ(c.groups.size(), 9u);
  ASSERT_EQ(c.values.size(), c.series.size());
  for (const auto& v : c.values)
    EXPECT_EQ(v.size(), c.groups.size());
  auto svg = render_svg(c);
  EXPECT_NE(svg.find("tcp 1 MiB"), std::string::npos);
  EXPECT_NE(svg.find("ucx_perftest ucp_put_bw"), std::string::npos);
}

} // namespace
