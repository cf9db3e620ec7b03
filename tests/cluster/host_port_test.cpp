#include "cluster/host_port.hpp"

#include <gtest/gtest.h>

#include "common/error.hpp"

namespace {

using namespace tessera::cluster;

std::string error_of(std::string_view v, address_family f) {
  auto r = parse_host_port(v, "key", f);
  return r ? std::string{} : tessera::error_message(r.error());
}

TEST(HostPortTest, ParsesHostsNamesAndBracketedIpv6) {
  auto a = parse_host_port("127.0.0.1:8000", "key", address_family::ipv4_only);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 8000);
  a = parse_host_port("[::1]:8000", "key", address_family::any);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->host, "::1");
  EXPECT_EQ(join_host_port(a->host, a->port), "[::1]:8000");
  EXPECT_EQ(join_host_port("localhost", 1), "localhost:1");
}

TEST(HostPortTest, ErrorsSayWhatIsAccepted) {
  EXPECT_NE(error_of("host", address_family::any).find("key must be host:port"), std::string::npos);
  EXPECT_NE(error_of("h:99999", address_family::any).find("key has a bad port: 'h:99999'"), std::string::npos);
  EXPECT_NE(error_of(":80", address_family::any).find("has no host"), std::string::npos);
  EXPECT_NE(error_of("fe80::1:80", address_family::any).find("needs brackets: [fe80::1]:80"), std::string::npos);
  EXPECT_NE(error_of("[::1]:80", address_family::ipv4_only).find("IPv4 only"), std::string::npos);
  EXPECT_NE(error_of("[::1]80", address_family::any).find("[address]:port"), std::string::npos);
}

TEST(HostPortTest, ResolvesNamesToNumericAddresses) {
  auto ips = resolve_host("localhost", address_family::ipv4_only);
  ASSERT_TRUE(ips) << tessera::error_text(ips.error());
  EXPECT_EQ(ips->front(), "127.0.0.1");
  auto none = resolve_host("no-such-host.invalid", address_family::any);
  ASSERT_FALSE(none);
  EXPECT_NE(tessera::error_message(none.error()).find("cannot resolve host 'no-such-host.invalid'"), std::string::npos);
}

} // namespace
