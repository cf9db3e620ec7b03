// The transport benchmark's JSON, table and chart from hand-made results:
// every documented key is there, keyed by transport and batch size, with
// null (not 0) where a measurement is missing.
#include <algorithm>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bench/transport_bench.hpp"
#include "bench/transport_report.hpp"
#include "transport/ucx/ucx_transport.hpp"

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

TEST(TransportReportTest, TheNodeSetUpIsASecondReferenceWithItsOwnRatios) {
  // Two rounds, ours 1 MiB at 2.0 and 4.0 GB/s; the plain tag_bw reference
  // 8.0 GB/s in both (ratios 0.25, 0.5), the node set-up's tag_bw 2.5 and
  // 4.0 (ratios 0.8, 1.0): each reference keeps its own figures and ratios.
  transport_bench_results r;
  r.probe = transport_probe_defaults(true);
  r.selections = default_transport_selections();
  auto gb_s = [](double v) {
    perftest_result x;
    x.bandwidth_mib_s = v * 1e9 / (1 << 20);
    return x;
  };
  const double ours[] = {2.0, 4.0}, node[] = {2.5, 4.0};
  for (int i = 0; i < 2; ++i) {
    transport_round round;
    transport_probe_result t;
    t.rtt_us_p50 = 20;
    t.block_gb_s = {{1048576, ours[i]}};
    round.tessera["tcp"] = t;
    perftest_figures plain, n;
    plain.tls = n.tls = "tcp";
    plain.tag_bw[1048576] = gb_s(8.0);
    n.tag_bw[1048576] = gb_s(node[i]);
    perftest_result lat;
    lat.latency_us_p50 = 10; // one-way: a 20 us round trip
    n.tag_lat = lat;
    n.commands = {"UCX_TLS=tcp UCX_NET_DEVICES=lo ucx_perftest 127.0.0.1 -p PORT -t tag_bw -e"};
    round.perftest["tcp"] = plain;
    round.perftest_node["tcp"] = n;
    r.rounds.push_back(round);
  }
  summarize_rounds(r);
  auto j = nlohmann::json::parse(transport_json(r));
  const auto& node_pt = j["ucx_perftest_node_setup"];
  EXPECT_NEAR(node_pt["tag_bw_gb_s"]["tcp"]["1048576"].get<double>(), 3.25, 1e-3);
  EXPECT_TRUE(node_pt["ucp_put_bw_gb_s"]["tcp"]["1048576"].is_null()) << "not run: null, not 0";
  EXPECT_EQ(node_pt["commands"].size(), 1u);
  EXPECT_NEAR(j["ucx_perftest"]["tag_bw_gb_s"]["tcp"]["1048576"].get<double>(), 8.0, 1e-3)
    << "the plain reference is unchanged";
  EXPECT_NEAR(j["block_vs_tag_bw"]["tcp"]["1048576"].get<double>(), 3.0 / 8.0, 1e-3);
  EXPECT_NEAR(j["block_vs_node_tag_bw"]["tcp"]["1048576"].get<double>(), 3.0 / 3.25, 1e-3);
  EXPECT_DOUBLE_EQ(j["rtt_vs_node_perftest"]["tcp"].get<double>(), 1);
  EXPECT_NEAR(j["paired"]["block_vs_tag_bw"]["tcp"]["1048576"].get<double>(), 0.375, 1e-9);
  EXPECT_NEAR(j["paired_node_setup"]["block_vs_tag_bw"]["tcp"]["1048576"].get<double>(), 0.9,
              1e-9);
  EXPECT_TRUE(j["paired_node_setup"]["block_vs_put_bw"]["tcp"]["1048576"].is_null());
  ASSERT_EQ(j["per_round"].size(), 2u);
  EXPECT_NEAR(j["per_round"][0]["block_vs_node_tag_bw"]["tcp"]["1048576"].get<double>(), 0.8,
              1e-9);
  EXPECT_FALSE(j["per_round"][0]["ucx_perftest_node_setup"].contains("commands"));
  // The table: the node reference (median 3.25) and our ratio to it.
  auto t = transport_table(r);
  EXPECT_NE(t.find("/node"), std::string::npos) << t;
  EXPECT_NE(t.find(" 3.25 "), std::string::npos) << t;
  EXPECT_NE(t.find(" 0.92\n"), std::string::npos) << t; // 3.0 / 3.25, the last column
  EXPECT_NE(t.find("1 MiB - / 0.90"), std::string::npos) << t; // the paired node line
}

TEST(TransportReportTest, ANodeSetUpMatchesWhatANodesContextRuns) {
  const auto selections = default_transport_selections();
  auto of = [&](const std::string& key) {
    return *std::find_if(selections.begin(), selections.end(),
                         [&](const transport_selection& s) { return s.key == key; });
  };
  auto tcp = node_perftest_setup(of("tcp"));
  EXPECT_EQ(tcp.tls, "tcp");
  EXPECT_TRUE(tcp.error_handling);
  EXPECT_FALSE(tcp.put_bw);
  EXPECT_NE(std::find(tcp.env.begin(), tcp.env.end(), "UCX_NET_DEVICES=lo"), tcp.env.end());
  const tessera::transport::ucx_options node;
  EXPECT_NE(std::find(tcp.env.begin(), tcp.env.end(),
                      "UCX_TCP_RX_SEG_SIZE=" + std::to_string(node.tcp_rx_seg_bytes)),
            tcp.env.end());
  for (const char* key : {"shm", "shm_err_peer"}) {
    auto shm = node_perftest_setup(of(key));
    EXPECT_EQ(shm.tls, "sm,self") << key;
    EXPECT_FALSE(shm.error_handling) << key;
    EXPECT_TRUE(shm.put_bw) << key;
  }
  auto plain = plain_perftest_setup(of("tcp"));
  EXPECT_EQ(plain.tls, "tcp");
  EXPECT_TRUE(plain.env.empty());
  EXPECT_FALSE(plain.error_handling);
  EXPECT_TRUE(plain.put_bw);
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
