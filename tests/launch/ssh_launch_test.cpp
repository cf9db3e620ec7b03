// `tessera launch RACK ssh start|status|stop` against a real sshd: Debian's
// /usr/sbin/sshd started by the test on a loopback port with a throwaway
// host key and user key (AuthorizedKeysFile in the test's folder, StrictModes
// no, UsePAM no), and a three-node rack on 127.0.0.1 (frontend + router,
// prefill, decode) of a tiny model. One completion is answered over HTTP,
// status reports every node, a second start is refused, stop ends every
// process. Skipped only where sshd cannot start (not installed, cannot bind).

#include <gtest/gtest.h>

#include <pwd.h>

#include <string>

#include "common/child_process.hpp"
#include "tests/launch/launch_harness.hpp"
#include "tests/support/curl.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

using namespace tessera::test::launch_harness;
using tessera::child_process;
using tessera::test::run_tessera;

class SshLaunchTest : public ::testing::Test {
protected:
  void TearDown() override {
    if (!rack_.empty())
      (void)run_tessera("launch " + rack_.string() + " ssh stop --stop-grace 2 --state-dir " + local_.string());
    // Whatever the launcher left: no node of this test outlives it.
    for (const auto& pid : node_pids(dir_.path().string()))
      ::kill(std::stoi(pid), SIGKILL);
    if (sshd_)
      sshd_->kill(SIGKILL);
  }

  /// Starts sshd on a free loopback port; a reason to skip when it cannot.
  std::string start_sshd() {
    const std::string sshd = "/usr/sbin/sshd";
    if (!fs::exists(sshd))
      return sshd + " is not installed (Debian: openssh-server)";
    if (shell("command -v ssh && command -v scp && command -v ssh-keygen").exit_code != 0)
      return "the ssh client (ssh, scp, ssh-keygen) is not installed (Debian: openssh-client)";
    // sshd wants its privilege separation folder.
    std::error_code ec;
    fs::create_directories("/run/sshd", ec);
    const auto d = dir_.path();
    auto keys = shell("ssh-keygen -q -t ed25519 -N '' -f " + (d / "host_key").string() + " && ssh-keygen -q -t ed25519 -N '' -f " +
                      (d / "id_ed25519").string() + " && cp " + (d / "id_ed25519.pub").string() + " " +
                      (d / "authorized_keys").string());
    if (keys.exit_code != 0)
      return "ssh-keygen failed: " + keys.output;
    ssh_port_ = free_ports(1);
    std::ofstream(d / "sshd_config") << "ListenAddress 127.0.0.1\nPort " << ssh_port_ << "\nHostKey "
                                     << (d / "host_key").string() << "\nPidFile " << (d / "sshd.pid").string()
                                     << "\nAuthorizedKeysFile " << (d / "authorized_keys").string()
                                     << "\nStrictModes no\nUsePAM no\nPasswordAuthentication no\n"
                                        "KbdInteractiveAuthentication no\nPubkeyAuthentication yes\n"
                                        "PermitRootLogin prohibit-password\nSubsystem sftp internal-sftp\n"
                                        "LogLevel VERBOSE\n";
    const std::string cmd = "exec " + sshd + " -D -e -f " + (d / "sshd_config").string() + " -p " +
                            std::to_string(ssh_port_) + " 2> " + (d / "sshd.log").string();
    auto child = child_process::spawn("/bin/sh", {"-c", cmd});
    if (!child)
      return "cannot start sshd: " + tessera::error_text(child.error());
    sshd_ = std::make_unique<child_process>(std::move(*child));
    const std::string probe = "ssh -o BatchMode=yes -o StrictHostKeyChecking=accept-new -o UserKnownHostsFile=" +
                              (d / "known_hosts").string() + " -i " + (d / "id_ed25519").string() + " -p " +
                              std::to_string(ssh_port_) + " " + user() + "@127.0.0.1 true";
    std::string last;
    const bool up = wait_until(
      [&] {
        if (!sshd_->running() || sshd_->wait(1ms))
          return false;
        auto r = shell(probe, 10s);
        last = r.output;
        return r.exit_code == 0;
      },
      15s);
    if (!up)
      return "sshd did not accept a login on 127.0.0.1:" + std::to_string(ssh_port_) + "; its log:\n" +
             read(d / "sshd.log") + "\nssh said: " + last;
    return {};
  }

  static std::string user() {
    const passwd* pw = getpwuid(getuid());
    return pw != nullptr ? pw->pw_name : "root";
  }

  void write_rack() {
    const auto d = dir_.path();
    make_tiny_model(d / "model");
    make_secret(d / "cluster.secret");
    http_port_ = free_ports(4);
    ASSERT_NE(http_port_, 0);
    rack_ = d / "rack.toml";
    local_ = d / "local";
    std::ofstream(rack_) << "[rack]\nname = \"sshtest\"\nmodel = \"" << (d / "model").string()
                         << "\"\nserved_model_name = \"tiny\"\ncluster_secret_file = \"cluster.secret\"\n"
                         << "ports_base = " << http_port_ << "\nstate_dir = \"" << (d / "host").string()
                         << "\"\nbinary = \"" << tessera::test::tessera_binary() << "\"\n"
                         << "ssh_options = [\"-o\", \"UserKnownHostsFile=" << (d / "known_hosts").string()
                         << "\", \"-o\", \"StrictHostKeyChecking=accept-new\"]\n"
                         << "[cluster]\nthreads_per_worker = 1\nkv_cache_mb = 8\nmax_local_prefill_tokens = 0\n"
                         << "[[host]]\nname = \"local\"\naddress = \"127.0.0.1\"\nssh = \"" << user()
                         << "@127.0.0.1\"\nssh_port = " << ssh_port_ << "\nssh_identity = \"id_ed25519\"\n"
                         << "roles = [\"frontend\", \"prefill\", \"decode\"]\n";
  }

  std::string launch(const std::string& action, const std::string& extra = "") {
    auto r = run_tessera("launch " + rack_.string() + " ssh " + action + " --state-dir " + local_.string() + " " + extra);
    last_exit_ = r.exit_code;
    return r.out;
  }

  tessera::test::temp_dir dir_{"tessera-ssh-launch"};
  std::unique_ptr<child_process> sshd_;
  uint16_t ssh_port_ = 0;
  uint16_t http_port_ = 0;
  fs::path rack_;
  fs::path local_;
  int last_exit_ = -1;
};

TEST_F(SshLaunchTest, AThreeNodeRackStartsAnswersAndStops) {
  if (auto why = start_sshd(); !why.empty())
    GTEST_SKIP() << "no sshd for this test: " << why;
  write_rack();
  auto out = launch("start", "--timeout 60");
  ASSERT_EQ(last_exit_, 0) << out;
  EXPECT_NE(out.find("rack sshtest is ready: http://127.0.0.1:" + std::to_string(http_port_)), std::string::npos)
    << out;
  const auto pids = node_pids((dir_.path() / "host" / "cluster.toml").string());
  EXPECT_EQ(pids.size(), 3u);
  // The nodes really run the config the launcher copied over ssh.
  EXPECT_NE(read(dir_.path() / "host" / "cluster.toml").find("id = \"decode-0\""), std::string::npos);

  auto reply = tessera::test::http_post_json("http://127.0.0.1:" + std::to_string(http_port_) + "/v1/completions",
                                             R"({"model": "tiny", "prompt": "hello", "max_tokens": 4})");
  EXPECT_EQ(reply.status, 200) << reply.body;
  EXPECT_NE(reply.body.find("\"choices\""), std::string::npos) << reply.body;

  out = launch("status");
  EXPECT_EQ(last_exit_, 0) << out;
  for (const char* id : {"front", "prefill-0", "decode-0"})
    EXPECT_NE(out.find(std::string{"node "} + id + " on host local: running (pid "), std::string::npos) << out;
  EXPECT_NE(out.find("/health: 200"), std::string::npos) << out;

  // A second start must not start a second cluster over the first.
  out = launch("start", "--timeout 10");
  EXPECT_NE(last_exit_, 0) << out;
  EXPECT_NE(out.find("is already running"), std::string::npos) << out;

  out = launch("stop");
  EXPECT_EQ(last_exit_, 0) << out;
  for (const char* id : {"front", "prefill-0", "decode-0"})
    EXPECT_NE(out.find(std::string{"node "} + id + ": stopped"), std::string::npos) << out;
  for (const auto& pid : pids)
    EXPECT_TRUE(wait_until([&] { return !pid_alive(pid); }, 10s)) << "node pid " << pid << " still runs";
  EXPECT_TRUE(node_pids(dir_.path().string()).empty());

  out = launch("status");
  EXPECT_EQ(last_exit_, 3) << out;
  EXPECT_NE(out.find("node front on host local: stopped"), std::string::npos) << out;
}

TEST_F(SshLaunchTest, ANodeThatCannotStartIsNamedWithItsLog) {
  if (auto why = start_sshd(); !why.empty())
    GTEST_SKIP() << "no sshd for this test: " << why;
  write_rack();
  // The decode node's port is taken: it exits, and start says which node
  // and why, from its log.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  auto addr = tessera::test::loopback_address(static_cast<uint16_t>(http_port_ + 3));
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  auto out = launch("start", "--timeout 30");
  close(fd);
  EXPECT_EQ(last_exit_, 1) << out;
  EXPECT_NE(out.find("node decode-0 on host local is not running"), std::string::npos) << out;
  EXPECT_NE(out.find("decode-0.log"), std::string::npos) << out;
}

} // namespace
