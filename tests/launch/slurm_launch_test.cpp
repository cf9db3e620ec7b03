// `tessera launch RACK slurm start|status|stop` against a real single-host
// Slurm: the test starts munged (a generated key), slurmctld and slurmd on
// localhost from a generated slurm.conf in its own folder (SLURM_CONF), never
// the system's. A rack placing a prefill and a decode node on the
// allocation's one host (hosts from SLURM_JOB_NODELIST) runs as one job of
// three srun steps; a completion is answered, status shows the job, stop
// cancels it and every node process ends. Skipped only where the daemons
// cannot start (saying which and why). The daemons are killed at the end
// whatever happens.

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "common/child_process.hpp"
#include "tests/launch/launch_harness.hpp"
#include "tests/support/curl.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

using namespace tessera::test::launch_harness;
using tessera::child_process;
using tessera::test::run_tessera;

class SlurmLaunchTest : public ::testing::Test {
protected:
  void TearDown() override {
    if (!rack_.empty())
      (void)run_tessera("launch " + rack_.string() + " slurm stop --state-dir " + local_.string());
    for (const auto& pid : node_pids(dir_.path().string()))
      ::kill(std::stoi(pid), SIGKILL);
    // slurmd first (it ends its job steps' slurmstepd), then the controller,
    // then munged.
    for (auto* d : {&slurmd_, &slurmctld_, &munged_})
      if (*d) {
        (*d)->kill(SIGTERM);
        if (!(*d)->wait(5s))
          (*d)->kill(SIGKILL);
      }
    // Job steps' slurmstepd processes of this test's spool, if any are left.
    (void)shell("for p in /proc/[0-9]*; do grep -qa " + dir_.path().string() +
                " $p/cmdline 2>/dev/null && kill -9 ${p#/proc/} 2>/dev/null; done; true");
    ::unsetenv("SLURM_CONF");
  }

  /// Starts `cmd` through the shell with its stderr in `log`.
  std::string daemon(const std::string& name, const std::string& cmd, std::unique_ptr<child_process>& out) {
    const auto log = dir_.path() / "log" / (name + ".out");
    auto child = child_process::spawn("/bin/sh", {"-c", "exec " + cmd + " > " + log.string() + " 2>&1"},
                                      {{"SLURM_CONF=" + (dir_.path() / "slurm.conf").string()}, true});
    if (!child)
      return name + " did not start: " + tessera::error_text(child.error());
    out = std::make_unique<child_process>(std::move(*child));
    return {};
  }

  std::string exited(const std::string& name, std::unique_ptr<child_process>& d) {
    if (auto code = d->wait(1ms))
      return name + " exited (" + std::to_string(*code) + "); its output:\n" +
             read(dir_.path() / "log" / (name + ".out")) + read(dir_.path() / "log" / (name + ".log"));
    return {};
  }

  /// Starts munged, slurmctld and slurmd; a reason to skip when they cannot.
  std::string start_slurm() {
    for (const char* p : {"/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd"})
      if (!fs::exists(p))
        return std::string{p} + " is not installed (Debian: munge slurm-wlm)";
    if (shell("command -v sbatch && command -v srun && command -v squeue && command -v scancel && command -v scontrol")
          .exit_code != 0)
      return "the Slurm client commands are not installed (Debian: slurm-client)";
    const auto d = dir_.path();
    for (const char* sub : {"state", "spool", "log"})
      fs::create_directories(d / sub);
    auto key = shell("dd if=/dev/urandom bs=1 count=1024 of=" + (d / "munge.key").string() + " 2>/dev/null && chmod 400 " +
                     (d / "munge.key").string());
    if (key.exit_code != 0)
      return "cannot make a munge key: " + key.output;
    const auto sock = d / "munge.sock";
    if (auto why = daemon("munged",
                          "/usr/sbin/munged -F -f --key-file=" + (d / "munge.key").string() + " --socket=" +
                            sock.string() + " --pid-file=" + (d / "munged.pid").string() + " --log-file=" +
                            (d / "log" / "munged.log").string() + " --seed-file=" + (d / "munged.seed").string(),
                          munged_);
        !why.empty())
      return why;
    if (!wait_until([&] { return fs::exists(sock) || !exited("munged", munged_).empty(); }, 10s) || !fs::exists(sock))
      return "munged did not come up: " + exited("munged", munged_);
    const auto ports = free_ports(2);
    std::ofstream(d / "slurm.conf")
      << "ClusterName=tessera-test\nSlurmctldHost=localhost\nSlurmUser=" << user() << "\nSlurmdUser=root\n"
      << "SlurmctldPort=" << ports << "\nSlurmdPort=" << ports + 1 << "\n"
      << "AuthType=auth/munge\nCredType=cred/munge\nAuthInfo=socket=" << sock.string() << "\n"
      << "StateSaveLocation=" << (d / "state").string() << "\nSlurmdSpoolDir=" << (d / "spool").string() << "\n"
      << "SlurmctldPidFile=" << (d / "slurmctld.pid").string() << "\nSlurmdPidFile=" << (d / "slurmd.pid").string()
      << "\nSlurmctldLogFile=" << (d / "log" / "slurmctld.log").string()
      << "\nSlurmdLogFile=" << (d / "log" / "slurmd.log").string() << "\n"
      << "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nSelectType=select/cons_tres\n"
      << "SelectTypeParameters=CR_CPU\nReturnToService=2\nMpiDefault=none\nMailProg=/bin/true\n"
      << "JobAcctGatherType=jobacct_gather/none\nAccountingStorageType=accounting_storage/none\n"
      << "JobCompType=jobcomp/none\nSwitchType=switch/none\nKillWait=10\n"
      << "NodeName=localhost CPUs=2 State=UNKNOWN\n"
      << "PartitionName=test Nodes=localhost Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4\n";
    ::setenv("SLURM_CONF", (d / "slurm.conf").c_str(), 1);
    if (auto why = daemon("slurmctld", "/usr/sbin/slurmctld -D -i", slurmctld_); !why.empty())
      return why;
    if (auto why = daemon("slurmd", "/usr/sbin/slurmd -D -N localhost", slurmd_); !why.empty())
      return why;
    std::string last;
    const bool idle = wait_until(
      [&] {
        if (!exited("slurmctld", slurmctld_).empty() || !exited("slurmd", slurmd_).empty())
          return false;
        auto r = shell("sinfo -h -o %T", 10s);
        last = r.output;
        return r.exit_code == 0 && r.output.find("idle") != std::string::npos;
      },
      30s);
    if (!idle)
      return "slurmctld + slurmd did not bring localhost up (sinfo: " + last + ")\n" + exited("slurmctld", slurmctld_) +
             exited("slurmd", slurmd_) + read(d / "log" / "slurmctld.log") + read(d / "log" / "slurmd.log");
    return {};
  }

  static std::string user() {
    const char* u = std::getenv("USER");
    return u != nullptr && *u != '\0' ? u : "root";
  }

  /// A rack placing a prefill and a decode node on the allocation's one
  /// host (localhost); its HTTP port (0: no free ports).
  uint16_t write_rack() {
    const auto d = dir_.path();
    make_tiny_model(d / "model");
    make_secret(d / "cluster.secret");
    const auto http = free_ports(4);
    rack_ = d / "rack.toml";
    local_ = d / "local";
    std::ofstream(rack_) << "[rack]\nname = \"slurmtest\"\nmodel = \"" << (d / "model").string()
                         << "\"\nserved_model_name = \"tiny\"\ncluster_secret_file = \"cluster.secret\"\n"
                         << "ports_base = " << http << "\nstate_dir = \"" << (d / "shared").string()
                         << "\"\nbinary = \"" << tessera::test::tessera_binary() << "\"\n"
                         << "[cluster]\nthreads_per_worker = 1\nkv_cache_mb = 8\nmax_local_prefill_tokens = 0\n"
                         << "[placement]\nprefill = 1\ndecode = 1\n"
                         << "[slurm]\npartition = \"test\"\nnodes = 1\ngpus_per_node = 2\n";
    return http;
  }

  std::string launch(const std::string& action, const std::string& extra = "") {
    auto r = run_tessera("launch " + rack_.string() + " slurm " + action + " --state-dir " + local_.string() + " " +
                         extra);
    last_exit_ = r.exit_code;
    return r.out;
  }

  tessera::test::temp_dir dir_{"tessera-slurm-launch"};
  std::unique_ptr<child_process> munged_, slurmctld_, slurmd_;
  fs::path rack_;
  fs::path local_;
  int last_exit_ = -1;
};

TEST_F(SlurmLaunchTest, AThreeNodeClusterRunsAsOneJob) {
  if (getuid() != 0)
    GTEST_SKIP() << "slurmd runs job steps as their user and must run as root; this test runs as uid " << getuid();
  if (auto why = start_slurm(); !why.empty())
    GTEST_SKIP() << "no Slurm for this test: " << why;
  const auto d = dir_.path();
  const auto http = write_rack();
  ASSERT_NE(http, 0);
  auto out = launch("start", "--timeout 60");
  ASSERT_EQ(last_exit_, 0) << out << "\nslurmctld:\n" << read(d / "log" / "slurmctld.log");
  EXPECT_NE(out.find("rack slurmtest is ready: http://localhost:" + std::to_string(http)), std::string::npos) << out;
  EXPECT_EQ(node_pids((d / "shared").string()).size(), 3u);

  auto reply = tessera::test::http_post_json("http://localhost:" + std::to_string(http) + "/v1/completions",
                                             R"({"model": "tiny", "prompt": "hello", "max_tokens": 4})");
  EXPECT_EQ(reply.status, 200) << reply.body;
  EXPECT_NE(reply.body.find("\"choices\""), std::string::npos) << reply.body;

  out = launch("status");
  EXPECT_EQ(last_exit_, 0) << out;
  EXPECT_NE(out.find(" RUNNING "), std::string::npos) << out;
  EXPECT_NE(out.find("/health: 200"), std::string::npos) << out;

  // A second start must not submit a second cluster over the first.
  out = launch("start", "--timeout 10");
  EXPECT_EQ(last_exit_, 1) << out;
  EXPECT_NE(out.find("is RUNNING: stop it first"), std::string::npos) << out;

  out = launch("stop");
  EXPECT_EQ(last_exit_, 0) << out;
  EXPECT_NE(out.find("cancelled"), std::string::npos) << out;
  EXPECT_TRUE(wait_until([&] { return node_pids((d / "shared").string()).empty(); }, 20s))
    << "node processes outlived scancel";
  out = launch("status");
  EXPECT_NE(last_exit_, 0) << out;
}

TEST_F(SlurmLaunchTest, ANodeThatCannotStartIsNamedAndTheJobCancelled) {
  if (getuid() != 0)
    GTEST_SKIP() << "slurmd runs job steps as their user and must run as root; this test runs as uid " << getuid();
  if (auto why = start_slurm(); !why.empty())
    GTEST_SKIP() << "no Slurm for this test: " << why;
  const auto http = write_rack();
  ASSERT_NE(http, 0);
  // The decode node's transport port is taken: its step ends at once.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  auto addr = tessera::test::loopback_address(static_cast<uint16_t>(http + 3));
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  auto out = launch("start", "--timeout 40");
  close(fd);
  EXPECT_EQ(last_exit_, 1) << out;
  EXPECT_NE(out.find("node decode-0 (job "), std::string::npos) << out;
  EXPECT_NE(out.find("cannot listen"), std::string::npos) << out;
  EXPECT_NE(out.find("was cancelled"), std::string::npos) << out;
  EXPECT_TRUE(wait_until([&] { return node_pids((dir_.path() / "shared").string()).empty(); }, 20s))
    << "node processes outlived the cancelled job";
}

} // namespace
