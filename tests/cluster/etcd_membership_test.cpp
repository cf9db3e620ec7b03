// Membership through a real etcd on loopback (skipped where /usr/bin/etcd
// is missing): nodes see each other join and leave, a lapsed lease drops a
// node within its TTL, a forged or broken entry is ignored, and a node
// survives an etcd restart.

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

#include "cluster/etcd_membership.hpp"
#include "common/error.hpp"
#include "tests/cluster/etcd_fixture.hpp"
#include "tests/support/etcd_server.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

using namespace std::chrono_literals;
using namespace tessera;
using namespace tessera::cluster;

/// What one node's membership reported, waitable.
class recorder {
public:
  membership_events events() {
    return {[this](const node_spec& n) {
              std::lock_guard lock{mu_};
              members_.insert(n.id);
              log_.push_back("+" + n.id + "@" + n.address);
              cv_.notify_all();
            },
            [this](const std::string& id) {
              std::lock_guard lock{mu_};
              members_.erase(id);
              log_.push_back("-" + id);
              cv_.notify_all();
            }};
  }
  /// Waits until `id` is a member (or not, with `present` false).
  bool wait(const std::string& id, bool present, std::chrono::milliseconds timeout) {
    std::unique_lock lock{mu_};
    return cv_.wait_for(lock, timeout, [&] { return members_.contains(id) == present; });
  }
  std::vector<std::string> log() {
    std::lock_guard lock{mu_};
    return log_;
  }

private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::set<std::string> members_;
  std::vector<std::string> log_;
};

node_spec node(const std::string& id, uint16_t port, std::vector<std::string> roles = {"decode"}) {
  node_spec n;
  n.id = id;
  n.address = "127.0.0.1:" + std::to_string(port);
  n.roles = std::move(roles);
  return n;
}

class EtcdMembershipTest : public test::etcd_fixture {
protected:
  EtcdMembershipTest() : etcd_fixture{"etcd-membership-test", 2} {}
};

TEST_F(EtcdMembershipTest, NodesSeeEachOtherJoinAndAStoppedOneLeaveAtOnce) {
  recorder ra, rb;
  auto a = etcd_membership::start(options(node("a", 15001)), ra.events());
  ASSERT_TRUE(a) << error_text(a.error());
  auto b = etcd_membership::start(options(node("b", 15002)), rb.events());
  ASSERT_TRUE(b) << error_text(b.error());
  EXPECT_TRUE(ra.wait("b", true, 5s));
  EXPECT_TRUE(rb.wait("a", true, 5s));
  ASSERT_EQ((*a)->members().size(), 1u);
  EXPECT_EQ((*a)->members()[0].address, "127.0.0.1:15002");
  // Renewals keep them there well past the TTL.
  std::this_thread::sleep_for(3s);
  EXPECT_EQ((*a)->members().size(), 1u);
  const auto start = std::chrono::steady_clock::now();
  b->reset(); // revokes its lease
  EXPECT_TRUE(ra.wait("b", false, 5s));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s) << "a revoked lease should drop the node at once";
  for (const auto& line : ra.log())
    EXPECT_NE(line, "+a@127.0.0.1:15001") << "a node reported itself";
}

TEST_F(EtcdMembershipTest, ANodeWhoseLeaseLapsesIsDroppedWithinItsTtlAndComesBackWithANewOne) {
  recorder ra;
  auto a = etcd_membership::start(options(node("a", 15001)), ra.events());
  ASSERT_TRUE(a) << error_text(a.error());
  // A node that registered and then stood still (its process was killed).
  etcd_client c{options(node("x", 1)).etcd};
  auto lease = c.grant_lease(2);
  ASSERT_TRUE(lease);
  ASSERT_FALSE(c.put("/tessera/test/ghost", node_entry_text(node("ghost", 15009)), *lease));
  ASSERT_TRUE(ra.wait("ghost", true, 5s));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(ra.wait("ghost", false, 6s));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 4s) << "dropped later than its TTL (2 s) allows";
  // Restarted: a new lease, the same key.
  auto again = c.grant_lease(30);
  ASSERT_TRUE(again);
  ASSERT_FALSE(c.put("/tessera/test/ghost", node_entry_text(node("ghost", 15009)), *again));
  EXPECT_TRUE(ra.wait("ghost", true, 5s));
}

TEST_F(EtcdMembershipTest, ForgedOrBrokenEntriesAreIgnored) {
  recorder ra;
  auto a = etcd_membership::start(options(node("a", 15001)), ra.events());
  ASSERT_TRUE(a) << error_text(a.error());
  etcd_client c{options(node("x", 1)).etcd};
  ASSERT_FALSE(c.put("/tessera/test/liar", node_entry_text(node("someone-else", 15003))));
  ASSERT_FALSE(c.put("/tessera/test/bad-address", "id = \"bad-address\"\naddress = \"[::1]:5\"\nroles = [\"decode\"]"));
  ASSERT_FALSE(c.put("/tessera/test/bad-role", "id = \"bad-role\"\naddress = \"127.0.0.1:5\"\nroles = [\"root\"]"));
  ASSERT_FALSE(c.put("/tessera/test/extra", "id = \"extra\"\naddress = \"127.0.0.1:6\"\nroles = [\"decode\"]\nx = 1"));
  ASSERT_FALSE(c.put("/tessera/test/junk", std::string(1 << 20, '\x01')));
  ASSERT_FALSE(c.put("/tessera/test/good", node_entry_text(node("good", 15004))));
  ASSERT_TRUE(ra.wait("good", true, 5s));
  for (const char* id : {"liar", "someone-else", "bad-address", "bad-role", "extra", "junk"})
    EXPECT_FALSE(ra.wait(id, true, 10ms)) << id << " was taken in";
  // A valid entry that turns bad leaves.
  ASSERT_FALSE(c.put("/tessera/test/good", "id = \"good\"\naddress = \"nowhere\"\nroles = [\"decode\"]"));
  EXPECT_TRUE(ra.wait("good", false, 5s));
}

TEST_F(EtcdMembershipTest, AKeyDeletedByHandIsPutBack) {
  recorder ra;
  auto a = etcd_membership::start(options(node("a", 15001)), ra.events());
  ASSERT_TRUE(a) << error_text(a.error());
  etcd_client c{options(node("x", 1)).etcd};
  ASSERT_TRUE(c.delete_key("/tessera/test/a"));
  bool back = false;
  for (int i = 0; i < 50 && !back; ++i) {
    std::this_thread::sleep_for(100ms);
    auto r = c.range_prefix("/tessera/test/a");
    back = r && r->kvs.size() == 1;
  }
  EXPECT_TRUE(back) << "a node whose key was deleted did not put it back";
}

TEST_F(EtcdMembershipTest, NodesGoOnThroughAnEtcdRestart) {
  recorder ra;
  auto a = etcd_membership::start(options(node("a", 15001)), ra.events());
  ASSERT_TRUE(a) << error_text(a.error());
  const uint16_t port = etcd_->port();
  etcd_->kill();
  std::this_thread::sleep_for(1s);
  auto s = test::etcd_server::start(dir_.path() / "etcd", port);
  ASSERT_TRUE(s) << error_text(s.error());
  etcd_ = std::move(*s);
  // The watch is open again: a node registering now is seen.
  recorder rb;
  auto b = etcd_membership::start(options(node("b", 15002)), rb.events());
  ASSERT_TRUE(b) << error_text(b.error());
  EXPECT_TRUE(ra.wait("b", true, 8s));
  EXPECT_TRUE(rb.wait("a", true, 8s)) << "a's registration did not survive the restart";
}

TEST_F(EtcdMembershipTest, StartFailsClearlyWithoutEtcd) {
  auto o = options(node("a", 15001));
  o.etcd.endpoints = {*parse_etcd_url("http://127.0.0.1:" + std::to_string(test::free_port()))};
  recorder r;
  auto m = etcd_membership::start(o, r.events());
  ASSERT_FALSE(m);
  EXPECT_NE(error_message(m.error()).find("connect"), std::string::npos) << error_message(m.error());
}

} // namespace
