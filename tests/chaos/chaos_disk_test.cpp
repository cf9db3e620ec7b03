// `tessera chaos` with disk I/O errors in the kv stores (chaos/disk_faults.hpp):
// a four-node nano cluster whose stores have a 1 MiB host tier over a disk
// tier on a tmpfs the harness mounts; the disks of both decode nodes fill
// up (ENOSPC) under load, one frees again. Every request must be answered
// right, none lost, and the stores must have logged the failed writes (so
// the fault was real: blocks spilled and the disk refused them). Skipped
// where mount() is not permitted (not root, or a restricted container).
// And the scenario checks: a disk event on a node without a disk tier is
// refused before anything starts.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tests/chaos/chaos_cluster.hpp"
#include "tests/support/run_tessera.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

using nlohmann::json;

/// A nano cluster like configs/chaos/disk/cluster.toml on free ports;
/// `disk_dir` empty: no disk tier.
std::filesystem::path write_cluster(const std::filesystem::path& dir, const std::string& disk_dir) {
  std::string extra = "kvstore_host_mb = 1\n";
  if (!disk_dir.empty())
    extra += "kvstore_disk_dir = \"" + disk_dir + "\"\nkvstore_disk_mb = 24\n";
  return tessera::test::write_chaos_cluster(dir, extra,
                                            {{"front", "\"frontend\", \"router\""},
                                             {"prefill", "\"prefill\""},
                                             {"decode-a", "\"decode\""},
                                             {"decode-b", "\"decode\""}});
}

/// More load than the shipped scenario's short version: enough blocks per
/// decode node (4 KiB each for nano) to overflow a 1 MiB host tier.
const char* scenario_text = R"(description = "disk full on both decode nodes' kv stores"
duration_s = 7
grace_s = 10
seed = 3
[load]
rate = 8
prompt_tokens = [16, 64]
max_tokens = 256
[[event]]
at_s = 2
action = "disk-full"
node = "decode-a"
[[event]]
at_s = 2
action = "disk-full"
node = "decode-b"
[[event]]
at_s = 5
action = "disk-heal"
node = "decode-b"
)";

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in{p};
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(ChaosDiskTest, FullStoreDisksCostNoRequestAndTheStoresLogTheFailedWrites) {
  tessera::test::temp_dir dir{"tessera-chaos-disk"};
  const auto config = write_cluster(dir.path(), (dir.path() / "disks").string());
  std::ofstream(dir.path() / "s.toml") << scenario_text;
  const auto report = dir.path() / "report.json";
  const auto logs = dir.path() / "logs";
  auto r = tessera::test::run_tessera("chaos --config " + config.string() + " --scenario " +
                                      (dir.path() / "s.toml").string() + " --json " + report.string() + " --logs " +
                                      logs.string());
  if (r.out.find("cannot mount a tmpfs") != std::string::npos)
    GTEST_SKIP() << "mount() is not permitted here (needs CAP_SYS_ADMIN): " << r.out;
  auto j = tessera::test::read_chaos_report(report);
  ASSERT_TRUE(j.is_object()) << r.out;
  const auto& t = j["totals"];
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_GT(t["sent"].get<int>(), 20) << r.out;
  EXPECT_EQ(t["wrong"], 0) << r.out;
  EXPECT_EQ(t["lost"], 0) << r.out;
  EXPECT_EQ(t["failed"], 0) << r.out;
  ASSERT_EQ(j["events"].size(), 3u) << r.out;
  for (const auto& e : j["events"])
    EXPECT_EQ(e["error"], "") << e.dump() << "\n" << r.out;
  // The fault was real: a store wrote to its disk, the disk refused.
  const auto a = slurp(logs / "decode-a.log") + slurp(logs / "decode-b.log");
  EXPECT_NE(a.find("a write to the disk tier failed"), std::string::npos) << a.substr(0, 4000);
  EXPECT_NE(a.find("No space left on device"), std::string::npos) << a.substr(0, 4000);
  // The harness unmounted its tmpfs: the directories are plain again.
  std::error_code ec;
  EXPECT_TRUE(std::filesystem::remove_all(dir.path() / "disks", ec) > 0 || !ec) << ec.message();
}

TEST(ChaosDiskTest, ADiskEventOnANodeWithoutADiskTierIsRefused) {
  tessera::test::temp_dir dir{"tessera-chaos-disk"};
  const auto config = write_cluster(dir.path(), "");
  std::ofstream(dir.path() / "s.toml") << "duration_s = 2\n[[event]]\nat_s = 1\naction = \"disk-full\"\nnode = "
                                          "\"decode-a\"\n";
  auto r = tessera::test::run_tessera("chaos --config " + config.string() + " --scenario " +
                                      (dir.path() / "s.toml").string());
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("node decode-a has no kv store disk tier"), std::string::npos) << r.out;
}

} // namespace
