// `tessera chaos` on a four-node cluster (front, prefill, two decode nodes)
// of the nano test model: each shipped scenario (configs/chaos/) run short
// (a fifth of its times, 4 s of load) must answer every request, none
// wrong and none lost, with every event applied; and a harness told to
// expect another model's answers must call them wrong and fail (it can).
//
// The grace is not scaled with the scenario: it is how long the client
// waits for a byte, and what it must cover is the frontend's own recovery,
// whose timers no scenario scales (a stream whose chunk or request was
// dropped is probed after 1.5 s, moved after two answers 0.5 s apart or a
// 2 s gap, and computed again elsewhere). A grace of 3 s lost 1-2 of 18
// requests in 4 of 12 drop runs beside a busy loop: the client gave up
// while the stream was being moved.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include <nlohmann/json.hpp>

#include "tests/chaos/chaos_cluster.hpp"
#include "tests/support/run_tessera.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/test_model.hpp"

namespace {

using nlohmann::json;

/// A cluster config like configs/chaos/cluster.toml on free ports, serving
/// the nano test model.
std::filesystem::path write_cluster(const std::filesystem::path& dir) {
  return tessera::test::write_chaos_cluster(dir, "kvstore_host_mb = 16\n",
                                            {{"front", "\"frontend\", \"router\""},
                                             {"prefill", "\"prefill\""},
                                             {"decode-a", "\"decode\""},
                                             {"decode-b", "\"decode\""}});
}

/// Seconds the harness waits for answers after the load (the header).
constexpr int grace_s = 10;

/// Runs `scenario` short and returns its JSON report (null if none).
json run_scenario(const std::string& scenario, int& exit_code, std::string& out) {
  tessera::test::temp_dir dir{"tessera-chaos-test"};
  const auto config = write_cluster(dir.path());
  const auto report = dir.path() / "report.json";
  const std::string file = std::string{TESSERA_SOURCE_DIR} + "/configs/chaos/" + scenario + ".toml";
  auto r = tessera::test::run_tessera("chaos --config " + config.string() + " --scenario " + file +
                                      " --time-scale 0.2 --grace " + std::to_string(grace_s) + " --json " +
                                      report.string() + " --svg " + (dir.path() / "t.svg").string() + " --logs " +
                                      (dir.path() / "logs").string());
  exit_code = r.exit_code;
  out = r.out;
  auto j = tessera::test::read_chaos_report(report);
  if (j.is_null())
    return nullptr;
  if (std::filesystem::file_size(dir.path() / "t.svg") == 0)
    return nullptr;
  return j;
}

/// Runs `scenario` short: no request may be wrong or lost, and every
/// event must apply.
void expect_clean(const std::string& scenario) {
  int code = -1;
  std::string out;
  auto j = run_scenario(scenario, code, out);
  ASSERT_TRUE(j.is_object()) << out;
  const auto& t = j["totals"];
  // Exit 1 exactly when a request was wrong or lost.
  EXPECT_EQ(code, t["wrong"] == 0 && t["lost"] == 0 ? 0 : 1) << out;
  EXPECT_GT(t["sent"].get<int>(), 5) << out;
  EXPECT_GT(t["completed"].get<int>(), 0) << out;
  EXPECT_EQ(t["wrong"], 0) << out;
  EXPECT_EQ(t["lost"], 0) << out;
  ASSERT_FALSE(j["events"].empty()) << out;
  for (const auto& e : j["events"])
    EXPECT_EQ(e["error"], "") << e.dump() << "\n" << out;
  // The answers are real text, compared with the reference.
  size_t bytes = 0;
  for (const auto& r : j["requests"])
    bytes += r["text_bytes"].get<size_t>();
  EXPECT_GT(bytes, 0u) << out;
}

TEST(ChaosCliTest, KillOfOneOfTwoDecodeNodesLosesNothing) {
  expect_clean("kill-decode");
}

TEST(ChaosCliTest, KillOfTheOnlyPrefillNodeLosesNothing) {
  expect_clean("kill-prefill");
}

TEST(ChaosCliTest, TermAndRestartOfADecodeNodeLosesNothing) {
  expect_clean("term-restart");
}

TEST(ChaosCliTest, ARestartedFrontendNodeLosesNothing) {
  expect_clean("restart-front");
}

TEST(ChaosCliTest, AHungDecodeNodeLosesNothing) {
  expect_clean("hung-node");
}

TEST(ChaosCliTest, OnePercentMessageDropIsNeverWrong) {
  expect_clean("drop-1pct");
}

TEST(ChaosCliTest, FiftyMillisecondDelaysAreNeverWrong) {
  expect_clean("delay-50ms");
}

TEST(ChaosCliTest, DuplicatedAndReorderedMessagesAreNeverWrong) {
  expect_clean("dup-reorder");
}

TEST(ChaosCliTest, AHealedPartitionIsNeverWrong) {
  expect_clean("partition");
}

TEST(ChaosCliTest, AnswersThatDifferFromTheReferenceAreWrongAndFailTheRun) {
  tessera::test::temp_dir dir{"tessera-chaos-test"};
  const auto config = write_cluster(dir.path());
  std::ofstream(dir.path() / "s.toml") << "duration_s = 2\ngrace_s = 5\n[load]\nrate = 4\nmax_tokens = 8\n";
  // The nodes serve nano (seed 1); the harness expects nano of seed 2.
  const auto other = tessera::test::test_model_dir("nano", tessera::engine::dtype::bf16, 2);
  const auto report = dir.path() / "r.json";
  auto r = tessera::test::run_tessera("chaos --config " + config.string() + " --scenario " +
                                      (dir.path() / "s.toml").string() + " --reference-model " + other.string() +
                                      " --json " + report.string() + " --logs " + (dir.path() / "logs").string());
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("FAIL: requests were wrong or lost"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("wrong: differs from byte"), std::string::npos) << r.out;
  auto j = tessera::test::read_chaos_report(report);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_GT(j["totals"]["wrong"].get<int>(), 0) << r.out;
  EXPECT_EQ(j["totals"]["wrong"], j["totals"]["sent"]) << r.out;
}

TEST(ChaosCliTest, AnUnknownNodeInTheScenarioIsRefusedBeforeAnythingStarts) {
  tessera::test::temp_dir dir{"tessera-chaos-test"};
  const auto config = write_cluster(dir.path());
  std::ofstream(dir.path() / "s.toml")
    << "duration_s = 2\n[[event]]\nat_s = 1\naction = \"kill\"\nnode = \"decode-c\"\n";
  auto r = tessera::test::run_tessera("chaos --config " + config.string() + " --scenario " +
                                      (dir.path() / "s.toml").string());
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("'decode-c' is not a node of the cluster; did you mean 'decode-a'?"), std::string::npos)
    << r.out;
  EXPECT_EQ(r.out.find("starting"), std::string::npos) << r.out;
}

TEST(ChaosCliTest, ANodeThatCannotStartIsNamedWithTheEndOfItsLog) {
  // decode-b's transport address is a port something else listens on: its
  // preflight refuses to start, and what it said must reach the harness's
  // error (the log folder of a test run is gone after it).
  tessera::test::temp_dir dir{"tessera-chaos-test"};
  const auto config = write_cluster(dir.path());
  tessera::test::loopback_http_server squatter{[](int) {}};
  auto text = tessera::test::read_text(config);
  const std::regex decode_b{R"((id = "decode-b"\naddress = "127\.0\.0\.1:)\d+)"};
  std::smatch m;
  ASSERT_TRUE(std::regex_search(text, m, decode_b)) << text;
  text = m.prefix().str() + m[1].str() + std::to_string(squatter.port()) + m.suffix().str();
  std::ofstream(config, std::ios::trunc) << text;
  std::ofstream(dir.path() / "s.toml") << "duration_s = 2\n[load]\nrate = 2\nmax_tokens = 4\n";
  auto r = tessera::test::run_tessera("chaos --config " + config.string() + " --scenario " +
                                      (dir.path() / "s.toml").string() + " --logs " + (dir.path() / "logs").string());
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("node decode-b did not say it is ready"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the end of its log"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("address 127.0.0.1:" + std::to_string(squatter.port())), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cannot listen"), std::string::npos) << r.out;
}

} // namespace
