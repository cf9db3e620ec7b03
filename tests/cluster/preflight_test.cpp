#include "cluster/preflight.hpp"

#include <atomic>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cluster/net_probe.hpp"
#include "common/error.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

using namespace tessera::cluster;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

/// A socket listening on 127.0.0.1 (an ephemeral port) until destroyed.
class listener {
public:
  listener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    auto a = tessera::test::loopback_address(0);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    EXPECT_EQ(::listen(fd_, 8), 0);
    socklen_t len = sizeof(a);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
  }
  ~listener() { ::close(fd_); }
  [[nodiscard]] uint16_t port() const { return port_; }
  [[nodiscard]] int fd() const { return fd_; }

private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

const check_result& last(const preflight_report& r) {
  return r.results().back();
}

TEST(PreflightTest, APortInUseFailsAndAFreeOneIsOk) {
  listener busy;
  preflight_report r;
  check_listen(r, "", "--port " + std::to_string(busy.port()), "127.0.0.1", busy.port());
  EXPECT_EQ(last(r).status, check_status::failed);
  EXPECT_NE(last(r).detail.find("already in use"), std::string::npos) << last(r).detail;
  const auto port = tessera::test::free_port();
  check_listen(r, "", "--port", "127.0.0.1", port);
  EXPECT_EQ(last(r).status, check_status::ok) << last(r).detail;
  check_listen(r, "", "--port 0", "127.0.0.1", 0);
  EXPECT_EQ(last(r).status, check_status::skipped);
  // The check itself holds nothing: the port is still free afterwards.
  EXPECT_FALSE(try_listen("127.0.0.1", port));
}

TEST(PreflightTest, AnAddressOfAnotherMachineCannotBeListenedOn) {
  // 192.0.2.0/24 is TEST-NET-1: never an address of this machine.
  auto err = try_listen("192.0.2.1", tessera::test::free_port());
  ASSERT_TRUE(err);
  EXPECT_NE(tessera::error_message(err).find("not an address of this machine"), std::string::npos)
    << tessera::error_message(err);
  EXPECT_FALSE(is_local_host("192.0.2.1"));
  EXPECT_TRUE(is_local_host("127.0.0.1"));
  EXPECT_TRUE(is_local_host("localhost"));
  EXPECT_TRUE(is_local_host("0.0.0.0"));
}

TEST(PreflightTest, ADiskTierThatCanBeMadeIsOkAndNothingIsLeftBehind) {
  tessera::test::temp_dir tmp{"tessera-preflight"};
  const auto dir = tmp.path() / "cache" / "node-a";
  preflight_report r;
  check_disk_tier(r, "a", "kvstore_disk_dir", dir, uint64_t{1} << 20, "kvstore_disk_mb");
  EXPECT_EQ(last(r).status, check_status::ok) << last(r).detail;
  EXPECT_NE(last(r).detail.find("will be made"), std::string::npos) << last(r).detail;
  EXPECT_FALSE(fs::exists(tmp.path() / "cache"));
  EXPECT_TRUE(fs::is_empty(tmp.path())) << "the probe was removed";
}

// The tier is a cache: what is wrong with it is said before start, as a
// warning (the node runs on host memory), never a refusal to start.
TEST(PreflightTest, ADiskTierUnderAFileIsAWarningNamingTheFlag) {
  tessera::test::temp_dir tmp{"tessera-preflight"};
  std::ofstream(tmp.path() / "file") << "x";
  preflight_report r;
  check_disk_tier(r, "", "--kv-store-disk-dir", tmp.path() / "file" / "cache", uint64_t{1} << 20,
                  "--kv-store-disk-mb");
  EXPECT_EQ(last(r).status, check_status::warning);
  EXPECT_NE(last(r).subject.find("--kv-store-disk-dir"), std::string::npos);
  EXPECT_NE(last(r).detail.find("is not a folder"), std::string::npos) << last(r).detail;
  EXPECT_NE(last(r).detail.find("host memory only"), std::string::npos) << last(r).detail;
  check_disk_tier(r, "", "--kv-store-disk-dir", tmp.path() / "file", uint64_t{1} << 20, "--kv-store-disk-mb");
  EXPECT_EQ(last(r).status, check_status::warning);
  EXPECT_EQ(r.failures(), 0u);
  EXPECT_NE(last(r).detail.find("is a file, not a folder"), std::string::npos) << last(r).detail;
}

TEST(PreflightTest, ADiskTierNeedsRoomForItsCapacity) {
  tessera::test::temp_dir tmp{"tessera-preflight"};
  preflight_report r;
  // An exabyte: more than any test machine's disk.
  check_disk_tier(r, "", "--kv-store-disk-dir", tmp.path(), uint64_t{1} << 60, "--kv-store-disk-mb");
  EXPECT_EQ(last(r).status, check_status::warning);
  EXPECT_NE(last(r).detail.find("free space, or set --kv-store-disk-mb to at most"), std::string::npos)
    << last(r).detail;
}

TEST(PreflightTest, DiskTiersSharingADiskNeedRoomTogether) {
  tessera::test::temp_dir tmp{"tessera-preflight"};
  preflight_report r;
  check_shared_disks(r, {{"a", tmp.path() / "a", uint64_t{1} << 20}}, "kvstore_disk_mb");
  EXPECT_TRUE(r.results().empty()) << "one tier on a disk: nothing more to check";
  check_shared_disks(r, {{"a", tmp.path() / "a", uint64_t{1} << 20}, {"b", tmp.path() / "b", uint64_t{1} << 20}},
                     "kvstore_disk_mb");
  ASSERT_EQ(r.results().size(), 1u);
  EXPECT_EQ(last(r).status, check_status::ok) << last(r).detail;
  EXPECT_NE(last(r).detail.find("nodes a, b: 2 MiB together"), std::string::npos) << last(r).detail;
  check_shared_disks(r, {{"a", tmp.path() / "a", uint64_t{1} << 59}, {"b", tmp.path() / "b", uint64_t{1} << 59}},
                     "kvstore_disk_mb");
  EXPECT_EQ(last(r).status, check_status::warning);
  EXPECT_NE(last(r).detail.find("the disk tiers of nodes a, b share it"), std::string::npos) << last(r).detail;
  EXPECT_NE(last(r).detail.find("lower kvstore_disk_mb to at most"), std::string::npos) << last(r).detail;
}

TEST(PreflightTest, ASecretOthersCanReadFailsWithTheFix) {
  tessera::test::temp_dir tmp{"tessera-preflight"};
  const auto file = tmp.path() / "c.secret";
  std::ofstream(file) << "0123456789abcdef0123456789abcdef\n";
  fs::permissions(file, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read,
                  fs::perm_options::replace);
  preflight_report r;
  check_secret_file(r, "", "cluster_secret_file", file);
  EXPECT_EQ(last(r).status, check_status::failed);
  EXPECT_NE(last(r).detail.find("chmod 600"), std::string::npos) << last(r).detail;
  fs::permissions(file, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::replace);
  check_secret_file(r, "", "cluster_secret_file", file);
  EXPECT_EQ(last(r).status, check_status::ok) << last(r).detail;
  check_secret_file(r, "", "cluster_secret_file", tmp.path() / "missing.secret");
  EXPECT_EQ(last(r).status, check_status::failed);
  EXPECT_NE(last(r).detail.find("head -c 32 /dev/urandom"), std::string::npos) << last(r).detail;
}

TEST(PreflightTest, TheReportListsEveryProblemAsTextAndJson) {
  preflight_report r;
  r.ok("", "config", "c.toml", "3 nodes");
  r.fail("a", "port", "address 127.0.0.1:1", "already in use");
  r.warn("", "disk", "--kv-store-disk-dir /x", "unused");
  r.fail("", "model", "--model /m", "/m does not exist");
  EXPECT_EQ(r.failures(), 2u);
  EXPECT_EQ(r.warnings(), 1u);
  const auto text = r.problems_text("tessera serve");
  EXPECT_NE(text.find("tessera serve: 2 problems found before start (and 1 warning):"), std::string::npos) << text;
  EXPECT_NE(text.find("  - node 'a': address 127.0.0.1:1: already in use\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  - --model /m: /m does not exist\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  - warning: --kv-store-disk-dir /x: unused\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("3 nodes"), std::string::npos) << "only problems";
  const auto table = r.table_text();
  EXPECT_NE(table.find("1 ok, 1 warnings, 2 failed, 0 skipped"), std::string::npos) << table;
  auto j = nlohmann::json::parse(r.json_text());
  EXPECT_EQ(j["ok"], false);
  EXPECT_EQ(j["failures"], 2);
  ASSERT_EQ(j["checks"].size(), 4u);
  EXPECT_EQ(j["checks"][1]["node"], "a");
  EXPECT_EQ(j["checks"][1]["status"], "failed");
  EXPECT_TRUE(preflight_report{}.problems_text("x").empty());
}

TEST(PreflightTest, ConnectsAndGetsOverHttp) {
  listener server;
  std::atomic<bool> served{false};
  std::thread t{[&] {
    const int c = ::accept(server.fd(), nullptr, nullptr);
    char buf[1024];
    (void) ::recv(c, buf, sizeof(buf), 0);
    const std::string answer = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 15\r\n\r\n"
                               "{\"status\":\"ok\"}";
    (void) ::send(c, answer.data(), answer.size(), MSG_NOSIGNAL);
    served = true;
    // Keeps the connection open: the client stops at Content-Length.
    std::this_thread::sleep_for(200ms);
    ::close(c);
  }};
  auto got = http_get("127.0.0.1", server.port(), "/health", 2s);
  t.join();
  ASSERT_TRUE(got) << tessera::error_text(got.error());
  EXPECT_EQ(got->status, 200);
  EXPECT_EQ(got->body, "{\"status\":\"ok\"}");
  EXPECT_FALSE(try_connect("127.0.0.1", server.port(), 1s)) << "a listening port accepts";
  const auto closed = tessera::test::free_port();
  auto err = try_connect("127.0.0.1", closed, 1s);
  ASSERT_TRUE(err);
  EXPECT_NE(tessera::error_message(err).find("connection refused"), std::string::npos) << tessera::error_message(err);
}

} // namespace
