// `tessera launch ... --dry-run`: the plan and every command for the shipped
// example racks, against golden files (tests/launch/golden/; the dry run's
// temporary folder is replaced by <dry-run dir>). Regenerate them with
// TESSERA_UPDATE_GOLDEN=1 after a deliberate change. A dry run needs no
// binary on the hosts and leaves nothing behind; a bad rack or argument
// exits with a message.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "common/error.hpp"
#include "launch/command.hpp"
#include "tests/support/run_tessera.hpp"

namespace {

namespace fs = std::filesystem;
using tessera::test::run_tessera;

const std::string source_dir = TESSERA_SOURCE_DIR;

std::string read(const fs::path& f) {
  std::ifstream in(f, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// The dry run's output with its temporary folder as <dry-run dir>; the
/// folder itself must be gone.
std::string normalised(std::string out) {
  const std::string marker = "files go to ";
  const auto at = out.find(marker);
  if (at == std::string::npos)
    return out;
  const auto end = out.find(')', at);
  const std::string dir = out.substr(at + marker.size(), end - at - marker.size());
  EXPECT_TRUE(dir.starts_with(fs::temp_directory_path().string())) << dir;
  EXPECT_FALSE(fs::exists(dir)) << "the dry run left " << dir << " behind";
  for (auto pos = out.find(dir); pos != std::string::npos; pos = out.find(dir, pos))
    out.replace(pos, dir.size(), "<dry-run dir>");
  return out;
}

void expect_golden(const std::string& args, const std::string& golden) {
  auto r = run_tessera("launch " + args);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto got = normalised(r.out);
  const fs::path file = source_dir + "/tests/launch/golden/" + golden;
  if (std::getenv("TESSERA_UPDATE_GOLDEN") != nullptr)
    std::ofstream(file, std::ios::binary) << got;
  EXPECT_EQ(got, read(file)) << "tessera launch " << args << " differs from " << file.string()
                             << " (TESSERA_UPDATE_GOLDEN=1 rewrites it)";
}

class LaunchCliTest : public ::testing::Test {
protected:
  void SetUp() override {
    // Relative paths in the output, as a user in a checkout sees them.
    fs::current_path(source_dir);
  }
};

TEST_F(LaunchCliTest, SshStartDryRunMatchesGolden) {
  expect_golden("configs/racks/example-4host.toml ssh start --dry-run", "example-4host-ssh-start.txt");
}

TEST_F(LaunchCliTest, SshStopAndStatusDryRunsMatchGolden) {
  expect_golden("configs/racks/example-4host.toml ssh stop --dry-run", "example-4host-ssh-stop.txt");
  expect_golden("configs/racks/example-4host.toml ssh status --dry-run", "example-4host-ssh-status.txt");
}

TEST_F(LaunchCliTest, SlurmStartDryRunMatchesGolden) {
  expect_golden("configs/racks/example-4host.toml slurm start --dry-run", "example-4host-slurm-start.txt");
  expect_golden("configs/racks/example-slurm-placement.toml slurm start --dry-run --binary /opt/t/tessera",
                "example-slurm-placement-start.txt");
}

TEST_F(LaunchCliTest, TheScriptWrapsTheSubcommand) {
  auto r = tessera::launch::run_command({"/usr/bin/env", "TESSERA_BIN=" + tessera::test::tessera_binary(),
                                         "scripts/launch.sh", "configs/racks/example-4host.toml", "ssh", "start",
                                         "--dry-run"},
                                        std::chrono::seconds{30});
  ASSERT_TRUE(r) << tessera::error_text(r.error());
  ASSERT_EQ(r->exit_code, 0) << r->output;
  EXPECT_EQ(normalised(r->output), read(source_dir + "/tests/launch/golden/example-4host-ssh-start.txt"));
  r = tessera::launch::run_command({"scripts/launch.sh", "configs/racks/example-4host.toml"}, std::chrono::seconds{30});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->exit_code, 2) << r->output;
  EXPECT_NE(r->output.find("usage: scripts/launch.sh"), std::string::npos) << r->output;
}

TEST_F(LaunchCliTest, ADryStopShowsTheRecordedJob) {
  const fs::path dir = fs::temp_directory_path() / "tessera-launch-cli-dryjob";
  fs::create_directories(dir);
  std::ofstream(dir / "job_id") << "4711\n";
  auto r = run_tessera("launch configs/racks/example-4host.toml slurm stop --dry-run --state-dir " + dir.string());
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("+ scancel 4711\n"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(dir / "job_id")) << "a dry run removed the job id";
  fs::remove_all(dir);
}

TEST_F(LaunchCliTest, ADryRunNeedsNoSecretBinaryOrHosts) {
  // The rack's secret does not exist, no host resolves, no tessera there:
  // a dry run does not care.
  ASSERT_FALSE(fs::exists(source_dir + "/configs/racks/lab.secret"));
  auto r = run_tessera("launch configs/racks/example-4host.toml ssh start --dry-run --binary /nowhere/tessera");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("nohup /nowhere/tessera node --config /var/tmp/tessera-lab/cluster.toml --node front"),
            std::string::npos)
    << r.out;
}

TEST_F(LaunchCliTest, ABadRackExitsTwoNamingTheLineAndKey) {
  const fs::path dir = fs::temp_directory_path() / "tessera-launch-cli-test";
  fs::create_directories(dir);
  std::ofstream(dir / "bad.toml") << "[rack]\nname = \"x\"\nports_base = 7\n";
  auto r = run_tessera("launch " + (dir / "bad.toml").string() + " ssh start --dry-run");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find((dir / "bad.toml").string() + ":3: 'rack.ports_base' must be an integer"), std::string::npos)
    << r.out;
  r = run_tessera("launch " + (dir / "missing.toml").string() + " ssh start --dry-run");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("cannot read the rack file"), std::string::npos) << r.out;
  fs::remove_all(dir);
}

TEST_F(LaunchCliTest, BadArgumentsAreRefused) {
  auto r = run_tessera("launch configs/racks/example-4host.toml rsh start --dry-run");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("rsh"), std::string::npos) << r.out;
  r = run_tessera("launch configs/racks/example-4host.toml ssh restart --dry-run");
  EXPECT_NE(r.exit_code, 0);
  r = run_tessera("launch configs/racks/example-4host.toml ssh start --dry-run --binary '-oProxyCommand=x'");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  // ssh needs hosts; a placement rack has them only inside a Slurm job.
  r = run_tessera("launch configs/racks/example-slurm-placement.toml ssh start --dry-run");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("ssh needs [[host]] tables"), std::string::npos) << r.out;
}

TEST_F(LaunchCliTest, StopWithoutAStartedSlurmJobSaysSo) {
  const fs::path dir = fs::temp_directory_path() / "tessera-launch-cli-nojob";
  fs::remove_all(dir);
  auto r = run_tessera("launch configs/racks/example-4host.toml slurm stop --state-dir " + dir.string());
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("no Slurm job recorded in " + dir.string() + "/job_id"), std::string::npos) << r.out;
  fs::create_directories(dir);
  std::ofstream(dir / "job_id") << "12; rm -rf /\n";
  r = run_tessera("launch configs/racks/example-4host.toml slurm stop --state-dir " + dir.string());
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("not a Slurm job id"), std::string::npos) << r.out;
  fs::remove_all(dir);
}

} // namespace
