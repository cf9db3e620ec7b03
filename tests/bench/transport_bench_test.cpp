// `tessera bench transport --quick` end to end: two processes, every JSON
// key present with positive numbers. Never asserts on speed (STYLE.md).
#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>

#include "bench/ucx_perftest_runner.hpp"
#include "tests/support/run_tessera.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

using tessera::test::run_result;
using tessera::test::run_tessera;

bool positive(const nlohmann::json& v) {
  return v.is_number() && v.get<double>() > 0;
}

TEST(TransportBenchTest, QuickRunReportsEveryTransportAndSize) {
  tessera::test::temp_dir dir{"tessera-bench-transport"};
  const auto json_path = (dir.path() / "transport.json").string();
  const auto svg_path = (dir.path() / "transport.svg").string();
  auto r = run_tessera("bench transport --quick --json " + json_path + " --svg " + svg_path);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("KV block batches"), std::string::npos) << r.out;
  auto j = nlohmann::json::parse(std::ifstream{json_path});
  for (const char* t : {"tcp", "shm", "shm_err_peer"}) {
    EXPECT_TRUE(positive(j["rtt_us_p50"][t])) << t;
    EXPECT_TRUE(positive(j["rtt_us_p99"][t])) << t;
    EXPECT_GE(j["rtt_us_p99"][t].get<double>(), j["rtt_us_p50"][t].get<double>()) << t;
    EXPECT_TRUE(positive(j["msgs_per_s"][t])) << t;
    for (const char* size : {"65536", "1048576", "16777216"}) {
      EXPECT_TRUE(positive(j["block_gb_s"][t][size])) << t << " " << size;
      EXPECT_TRUE(positive(j["block_gb_s_one_block"][t][size])) << t << " " << size;
    }
  }
  // ucx_perftest's columns: numbers where it ran, or a reason where not.
  const auto& pt = j["ucx_perftest"];
  const bool installed = !tessera::bench::find_ucx_perftest().empty();
  EXPECT_EQ(pt["available"].get<bool>(), installed);
  if (installed && pt["errors"].empty()) {
    for (const char* key : {"tcp", "shm"}) {
      EXPECT_TRUE(positive(pt["rtt_us_p50"][key])) << key;
      EXPECT_TRUE(positive(pt["msgs_per_s"][key])) << key;
      for (const char* size : {"65536", "1048576", "16777216"}) {
        EXPECT_TRUE(positive(pt["tag_bw_gb_s"][key][size])) << key << " " << size;
        EXPECT_TRUE(positive(pt["ucp_put_bw_gb_s"][key][size])) << key << " " << size;
      }
    }
  } else if (!installed) {
    EXPECT_NE(pt["note"].get<std::string>().find("not found"), std::string::npos);
  }
  // ucx_perftest in a node's set-up, run beside it: tag_bw at every size,
  // ucp_put_bw over shm only (a node's tcp context has no RMA lanes).
  const auto& node = j["ucx_perftest_node_setup"];
  EXPECT_EQ(node["available"].get<bool>(), installed);
  if (installed && node["errors"].empty()) {
    for (const char* key : {"tcp", "shm"}) {
      EXPECT_TRUE(positive(node["rtt_us_p50"][key])) << key;
      for (const char* size : {"65536", "1048576", "16777216"}) {
        EXPECT_TRUE(positive(node["tag_bw_gb_s"][key][size])) << key << " " << size;
        EXPECT_EQ(positive(node["ucp_put_bw_gb_s"][key][size]), std::string{key} == "shm")
          << key << " " << size;
        EXPECT_TRUE(positive(j["paired_node_setup"]["block_vs_tag_bw"][key][size]))
          << key << " " << size;
      }
    }
    bool tcp_node_command = false;
    for (const auto& c : node["commands"])
      tcp_node_command |= c.get<std::string>().find("UCX_NET_DEVICES=lo") != std::string::npos
                          && c.get<std::string>().ends_with(" -e");
    EXPECT_TRUE(tcp_node_command) << node["commands"].dump();
  }
  EXPECT_NE(r.out.find("/node"), std::string::npos) << r.out;
  std::ifstream svg{svg_path};
  std::string first;
  std::getline(svg, first);
  EXPECT_EQ(first.rfind("<svg", 0), 0u);
}

// A batch is timed to transfer()'s done by default, or to a message the
// peer sends from on_blocks_arrived: both finish every batch (a batch whose
// ack never came would time the phase out) and say which in the JSON.
TEST(TransportBenchTest, BatchesAreTimedToDoneOrToThePeersAck) {
  tessera::test::temp_dir dir{"tessera-bench-transport-until"};
  for (const char* until : {"done", "peer-ack"}) {
    const auto json_path = (dir.path() / (std::string{until} + ".json")).string();
    auto r = run_tessera(std::string{"bench transport --quick --grants --transports tcp,shm "
                                     "--no-perftest --until "}
                         + until + " --json " + json_path);
    ASSERT_EQ(r.exit_code, 0) << until << "\n" << r.out;
    EXPECT_NE(r.out.find(std::string{until} == "done" ? "-> its done" : "-> the peer's ack"),
              std::string::npos)
      << r.out;
    auto j = nlohmann::json::parse(std::ifstream{json_path});
    EXPECT_EQ(j["config"]["until"], until);
    for (const char* t : {"tcp", "shm"})
      for (const char* size : {"65536", "1048576", "16777216"})
        EXPECT_TRUE(positive(j["block_gb_s"][t][size])) << until << " " << t << " " << size;
  }
  auto bad = run_tessera("bench transport --quick --until later");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.out.find("--until"), std::string::npos) << bad.out;
}

} // namespace
