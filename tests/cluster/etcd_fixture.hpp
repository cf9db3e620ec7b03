// A test fixture with a real etcd on loopback (tests/support/etcd_server;
// the test skips where /usr/bin/etcd is missing) and the membership
// options of a node registered in it under /tessera/test/.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "cluster/etcd_client.hpp"
#include "cluster/etcd_membership.hpp"
#include "common/error.hpp"
#include "tests/support/etcd_server.hpp"
#include "tests/support/temp_dir.hpp"

namespace tessera::test {

class etcd_fixture : public ::testing::Test {
protected:
  /// etcd's data under a temp dir named `dir_name`; `ttl_s`: the lease TTL
  /// options() gives.
  etcd_fixture(const std::string& dir_name, int64_t ttl_s) : dir_{dir_name}, ttl_s_{ttl_s} {}

  void SetUp() override {
    if (!have_etcd())
      GTEST_SKIP() << "no " << etcd_binary << " (apt-get install etcd-server; scripts/install-deps.sh)";
    auto s = etcd_server::start(dir_.path() / "etcd");
    ASSERT_TRUE(s) << error_text(s.error());
    etcd_ = std::move(*s);
  }
  cluster::membership_options options(const cluster::node_spec& self) {
    using namespace std::chrono_literals;
    cluster::membership_options o;
    o.etcd.endpoints.push_back(*cluster::parse_etcd_url(etcd_->url()));
    o.etcd.timeout = 1000ms;
    o.prefix = "/tessera/test/";
    o.ttl_s = ttl_s_;
    o.self = self;
    return o;
  }

  temp_dir dir_;
  int64_t ttl_s_;
  std::unique_ptr<etcd_server> etcd_;
};

} // namespace tessera::test
