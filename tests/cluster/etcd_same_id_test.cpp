// Two nodes cannot share an id in etcd (real etcd on loopback; skipped
// where /usr/bin/etcd is missing): a second node registering an id whose
// entry is live is refused with an error naming the id, the holder's
// address and the way out, and the holder's entry is left as it was; the
// same node started again at its own address (its previous process died
// before its lease lapsed) takes its entry over; once the holder leaves,
// the id is free. And the transaction itself: put only where absent.

#include <gtest/gtest.h>

#include "cluster/etcd_client.hpp"
#include "cluster/etcd_membership.hpp"
#include "common/error.hpp"
#include "tests/cluster/etcd_fixture.hpp"
#include "tests/support/etcd_server.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

using namespace std::chrono_literals;
using namespace tessera;
using namespace tessera::cluster;

node_spec node(const std::string& id, int port) {
  node_spec n;
  n.id = id;
  n.address = "127.0.0.1:" + std::to_string(port);
  n.roles = {"decode"};
  return n;
}

class EtcdSameIdTest : public test::etcd_fixture {
protected:
  EtcdSameIdTest() : etcd_fixture{"etcd-same-id-test", 5} {}
  static membership_events quiet() {
    return {[](const node_spec&) {}, [](const std::string&) {}};
  }
};

TEST_F(EtcdSameIdTest, PutIfAbsentWritesOnlyWhereNothingIs) {
  etcd_client c{options(node("x", 1)).etcd};
  auto lease = c.grant_lease(30);
  ASSERT_TRUE(lease) << error_text(lease.error());
  auto first = c.put_if_absent("/tessera/test/k", "one", *lease);
  ASSERT_TRUE(first) << error_text(first.error());
  EXPECT_FALSE(*first);
  auto second = c.put_if_absent("/tessera/test/k", "two", 0);
  ASSERT_TRUE(second) << error_text(second.error());
  ASSERT_TRUE(*second);
  EXPECT_EQ((*second)->value, "one");
  EXPECT_EQ((*second)->lease, *lease);
  auto r = c.range_prefix("/tessera/test/k");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->kvs.size(), 1u);
  EXPECT_EQ(r->kvs[0].value, "one"); // untouched
}

TEST_F(EtcdSameIdTest, ASecondNodeWithALiveIdIsRefusedAndTheFirstKeepsIt) {
  auto a = etcd_membership::start(options(node("dup", 15101)), quiet());
  ASSERT_TRUE(a) << error_text(a.error());
  auto b = etcd_membership::start(options(node("dup", 15102)), quiet());
  ASSERT_FALSE(b);
  const auto why = error_text(b.error());
  EXPECT_NE(why.find("node id 'dup' is already registered"), std::string::npos) << why;
  EXPECT_NE(why.find("127.0.0.1:15101"), std::string::npos) << why;
  EXPECT_NE(why.find("lease is live"), std::string::npos) << why;
  EXPECT_NE(why.find("another id"), std::string::npos) << why;
  etcd_client c{options(node("x", 1)).etcd};
  auto r = c.range_prefix("/tessera/test/dup");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->kvs.size(), 1u);
  EXPECT_NE(r->kvs[0].value.find("127.0.0.1:15101"), std::string::npos) << r->kvs[0].value;
  // Once the holder leaves (its lease revoked), the id is free.
  a->reset();
  auto b2 = etcd_membership::start(options(node("dup", 15102)), quiet());
  EXPECT_TRUE(b2) << error_text(b2.error());
}

TEST_F(EtcdSameIdTest, TheSameNodeRestartedAtItsAddressTakesItsEntryOver) {
  // A node that registered and died (SIGKILL): its lease is still live.
  etcd_client c{options(node("x", 1)).etcd};
  auto lease = c.grant_lease(30);
  ASSERT_TRUE(lease);
  ASSERT_FALSE(c.put("/tessera/test/d", node_entry_text(node("d", 15103)), *lease));
  auto again = etcd_membership::start(options(node("d", 15103)), quiet());
  ASSERT_TRUE(again) << error_text(again.error());
  // Its key now rides on the new lease: the old one ending leaves it.
  ASSERT_FALSE(c.revoke_lease(*lease));
  auto r = c.range_prefix("/tessera/test/d");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->kvs.size(), 1u);
  EXPECT_NE(r->kvs[0].lease, *lease);
}

} // namespace
