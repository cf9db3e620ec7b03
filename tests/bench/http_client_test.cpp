// The load generator's URL parsing (the client itself is exercised end to
// end by tests/cli/bench_serve_test.cpp).
#include "bench/http_client.hpp"

#include <gtest/gtest.h>

#include "common/error.hpp"

namespace {

using tessera::bench::parse_http_url;

TEST(HttpClientTest, ParsesHostPortAndPrefix) {
  auto ep = parse_http_url("http://127.0.0.1:8000");
  ASSERT_TRUE(ep);
  EXPECT_EQ(ep->host, "127.0.0.1");
  EXPECT_EQ(ep->port, 8000);
  EXPECT_EQ(ep->base_path, "");
  ep = parse_http_url("http://gateway/tessera/");
  ASSERT_TRUE(ep);
  EXPECT_EQ(ep->host, "gateway");
  EXPECT_EQ(ep->port, 80);
  EXPECT_EQ(ep->base_path, "/tessera");
  ep = parse_http_url("http://[::1]:9000/");
  ASSERT_TRUE(ep);
  EXPECT_EQ(ep->host, "::1");
  EXPECT_EQ(ep->port, 9000);
}

TEST(HttpClientTest, RejectsWhatItCannotUseNamingTheProblem) {
  auto https = parse_http_url("https://x:443");
  ASSERT_FALSE(https);
  EXPECT_NE(tessera::error_text(https.error()).find("https is not supported"), std::string::npos);
  for (const char* bad : {"x:80", "http://", "http://:80", "http://h:0", "http://h:65536", "http://h:8o",
                          "http://h:", "http://[::1"}) {
    auto r = parse_http_url(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(tessera::error_text(r.error()).find(bad), std::string::npos) << tessera::error_text(r.error());
  }
}

} // namespace
