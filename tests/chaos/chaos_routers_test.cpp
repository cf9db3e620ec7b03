// `tessera chaos` on a six-node cluster with two routers (front: frontend
// only; router-a, router-b; prefill; two decode nodes) of the nano test
// model, as configs/chaos/routers/cluster.toml: kill -9 of one router
// under load, and of one then (after it restarted) the other, must answer
// every request, none wrong and none lost; the same with membership
// through a real etcd (skipped where /usr/bin/etcd is missing). And a
// config that names a frontend with no router anywhere is refused.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "tests/chaos/chaos_cluster.hpp"
#include "tests/support/etcd_server.hpp"
#include "tests/support/run_tessera.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

using nlohmann::json;

/// configs/chaos/routers/cluster.toml on free ports, serving nano; with
/// `etcd_url`, membership through that etcd.
std::filesystem::path write_cluster(const std::filesystem::path& dir, const std::string& etcd_url = {}) {
  std::string extra = "kvstore_host_mb = 16\n";
  if (!etcd_url.empty())
    extra += "membership = \"etcd\"\netcd_endpoints = [\"" + etcd_url + "\"]\nmembership_ttl_s = 2\n";
  return tessera::test::write_chaos_cluster(dir, extra,
                                            {{"front", "\"frontend\""},
                                             {"router-a", "\"router\""},
                                             {"router-b", "\"router\""},
                                             {"prefill", "\"prefill\""},
                                             {"decode-a", "\"decode\""},
                                             {"decode-b", "\"decode\""}});
}

/// Runs configs/chaos/routers/`scenario` at `time_scale`: no request may be
/// wrong or lost, every event must apply, and the answers are real text
/// the harness compared with its reference.
void expect_clean(const std::string& scenario, double time_scale, const std::string& etcd_url = {}) {
  tessera::test::temp_dir dir{"tessera-chaos-routers"};
  const auto config = write_cluster(dir.path(), etcd_url);
  const auto report = dir.path() / "report.json";
  const std::string file = std::string{TESSERA_SOURCE_DIR} + "/configs/chaos/routers/" + scenario + ".toml";
  auto r = tessera::test::run_tessera("chaos --config " + config.string() + " --scenario " + file +
                                      " --time-scale " + std::to_string(time_scale) + " --grace 5 --json " +
                                      report.string() + " --svg " + (dir.path() / "t.svg").string() + " --logs " +
                                      (dir.path() / "logs").string());
  auto j = tessera::test::read_chaos_report(report);
  tessera::test::expect_clean_chaos_run(r, j, 5); // the other router places them
  size_t bytes = 0;
  for (const auto& q : j["requests"])
    bytes += q["text_bytes"].get<size_t>();
  EXPECT_GT(bytes, 0u) << r.out;
}

TEST(ChaosRoutersTest, KillOfOneOfTwoRoutersLosesNothing) {
  expect_clean("kill-router", 0.3);
}

TEST(ChaosRoutersTest, ARestartedRouterServesAloneOnceTheOtherIsKilled) {
  expect_clean("restart-router", 0.5);
}

TEST(ChaosRoutersTest, WithEtcdMembershipARestartedRouterServesAloneOnceTheOtherIsKilled) {
  if (!tessera::test::have_etcd())
    GTEST_SKIP() << "no " << tessera::test::etcd_binary << " (apt-get install etcd-server; scripts/install-deps.sh)";
  tessera::test::temp_dir dir{"tessera-chaos-routers-etcd"};
  auto etcd = tessera::test::etcd_server::start(dir.path() / "etcd");
  ASSERT_TRUE(etcd) << tessera::error_text(etcd.error());
  expect_clean("restart-router", 0.5, (*etcd)->url());
}

TEST(ChaosRoutersTest, AClusterWithoutARouterIsRefused) {
  tessera::test::temp_dir dir{"tessera-chaos-routers"};
  std::ofstream(dir.path() / "c.toml") << "model = \"/nonexistent\"\n[[node]]\nid = \"front\"\naddress = "
                                          "\"127.0.0.1:1\"\nroles = [\"frontend\"]\nhttp = \"127.0.0.1:2\"\n";
  std::ofstream(dir.path() / "s.toml") << "duration_s = 2\n";
  auto r = tessera::test::run_tessera("chaos --config " + (dir.path() / "c.toml").string() + " --scenario " +
                                      (dir.path() / "s.toml").string());
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("at least one node must have the role router"), std::string::npos) << r.out;
}

} // namespace
