// The etcd client (cluster/etcd_client) against a real etcd on loopback
// (skipped where /usr/bin/etcd is missing), and against a fake gateway
// that answers garbage, too much, or nothing.

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "cluster/etcd_client.hpp"
#include "common/error.hpp"
#include "tests/support/etcd_server.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

using namespace std::chrono_literals;
using namespace tessera;
using namespace tessera::cluster;

etcd_options options_for(const std::string& url, std::chrono::milliseconds timeout = 2000ms) {
  auto ep = parse_etcd_url(url);
  EXPECT_TRUE(ep) << error_text(ep.error());
  etcd_options o;
  o.endpoints.push_back(*ep);
  o.timeout = timeout;
  return o;
}

#define NEED_ETCD()                                                                                          \
  if (!tessera::test::have_etcd()) {                                                                         \
    GTEST_SKIP() << "no " << tessera::test::etcd_binary << " (apt-get install etcd-server; scripts/install-deps.sh)"; \
  }

class EtcdClientTest : public ::testing::Test {
protected:
  void SetUp() override {
    NEED_ETCD()
    auto s = test::etcd_server::start(dir_.path() / "etcd");
    ASSERT_TRUE(s) << error_text(s.error());
    etcd_ = std::move(*s);
  }
  test::temp_dir dir_{"etcd-client-test"};
  std::unique_ptr<test::etcd_server> etcd_;
};

TEST_F(EtcdClientTest, PutsRangesAPrefixAndDeletes) {
  etcd_client c{options_for(etcd_->url())};
  const std::string binary{"\0\xff\x01 value\n", 10};
  ASSERT_FALSE(c.put("/t/a", "one"));
  ASSERT_FALSE(c.put("/t/b", binary));
  ASSERT_FALSE(c.put("/t0", "outside the prefix"));
  ASSERT_FALSE(c.put("/s/a", "another prefix"));
  auto r = c.range_prefix("/t/");
  ASSERT_TRUE(r) << error_text(r.error());
  ASSERT_EQ(r->kvs.size(), 2u);
  EXPECT_EQ(r->kvs[0].key, "/t/a");
  EXPECT_EQ(r->kvs[0].value, "one");
  EXPECT_EQ(r->kvs[1].key, "/t/b");
  EXPECT_EQ(r->kvs[1].value, binary);
  EXPECT_GT(r->revision, 0);
  auto gone = c.delete_key("/t/a");
  ASSERT_TRUE(gone) << error_text(gone.error());
  EXPECT_EQ(*gone, 1);
  auto again = c.delete_key("/t/a");
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, 0);
  r = c.range_prefix("/t/");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->kvs.size(), 1u);
  EXPECT_EQ(r->kvs[0].key, "/t/b");
  auto limited = c.range_prefix("/", 1);
  ASSERT_TRUE(limited);
  EXPECT_EQ(limited->kvs.size(), 1u);
  EXPECT_TRUE(limited->more);
}

TEST_F(EtcdClientTest, AKeyOnALeaseThatIsNotRenewedGoesWithinItsTtl) {
  etcd_client c{options_for(etcd_->url())};
  auto lease = c.grant_lease(2);
  ASSERT_TRUE(lease) << error_text(lease.error());
  ASSERT_FALSE(c.put("/l/x", "v", *lease));
  auto ttl = c.keep_alive(*lease);
  ASSERT_TRUE(ttl) << error_text(ttl.error());
  EXPECT_GE(*ttl, 1);
  auto r = c.range_prefix("/l/");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->kvs.size(), 1u);
  EXPECT_EQ(r->kvs[0].lease, *lease);
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - start < 6s) {
    r = c.range_prefix("/l/");
    ASSERT_TRUE(r);
    if (r->kvs.empty())
      break;
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(r->kvs.empty()) << "the key outlived its lease";
  EXPECT_LT(std::chrono::steady_clock::now() - start, 4s);
  ttl = c.keep_alive(*lease);
  ASSERT_TRUE(ttl) << error_text(ttl.error());
  EXPECT_EQ(*ttl, 0) << "a lapsed lease still renews";
}

TEST_F(EtcdClientTest, RevokingALeaseDeletesItsKeysAtOnce) {
  etcd_client c{options_for(etcd_->url())};
  auto lease = c.grant_lease(60);
  ASSERT_TRUE(lease);
  ASSERT_FALSE(c.put("/r/x", "v", *lease));
  ASSERT_FALSE(c.revoke_lease(*lease));
  auto r = c.range_prefix("/r/");
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->kvs.empty());
  EXPECT_FALSE(c.revoke_lease(*lease)) << "revoking an ended lease is no error";
  EXPECT_TRUE(c.put("/r/y", "v", 12345)) << "a put on a lease etcd does not know must fail";
}

TEST_F(EtcdClientTest, AWatchSeesPutsAndDeletesInOrder) {
  etcd_client c{options_for(etcd_->url())};
  ASSERT_FALSE(c.put("/w/before", "old"));
  auto r = c.range_prefix("/w/");
  ASSERT_TRUE(r);
  auto w = etcd_watch::open(options_for(etcd_->url()), "/w/", r->revision + 1);
  ASSERT_TRUE(w) << error_text(w.error());
  auto quiet = (*w)->next(200ms);
  ASSERT_TRUE(quiet) << error_text(quiet.error());
  EXPECT_TRUE(quiet->empty());
  ASSERT_FALSE(c.put("/w/a", "1"));
  ASSERT_FALSE(c.put("/x/a", "not watched"));
  ASSERT_FALSE(c.put("/w/a", "2"));
  ASSERT_TRUE(c.delete_key("/w/before"));
  std::vector<etcd_event> seen;
  for (int i = 0; i < 20 && seen.size() < 3; ++i) {
    auto evs = (*w)->next(200ms);
    ASSERT_TRUE(evs) << error_text(evs.error());
    seen.insert(seen.end(), evs->begin(), evs->end());
  }
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0].type, etcd_event::kind::put);
  EXPECT_EQ(seen[0].kv.key, "/w/a");
  EXPECT_EQ(seen[0].kv.value, "1");
  EXPECT_EQ(seen[1].kv.value, "2");
  EXPECT_EQ(seen[2].type, etcd_event::kind::del);
  EXPECT_EQ(seen[2].kv.key, "/w/before");
}

TEST_F(EtcdClientTest, AWatchEndsWithAnErrorWhenEtcdDiesAndCallsWorkAfterItsRestart) {
  auto w = etcd_watch::open(options_for(etcd_->url()), "/d/", 0);
  ASSERT_TRUE(w) << error_text(w.error());
  const uint16_t port = etcd_->port();
  etcd_->kill();
  caf::expected<std::vector<etcd_event>> evs = std::vector<etcd_event>{};
  for (int i = 0; i < 20 && evs; ++i)
    evs = (*w)->next(100ms);
  EXPECT_FALSE(evs) << "a watch on a dead etcd reports nothing wrong";
  etcd_client c{options_for(etcd_->url(), 500ms)};
  auto down = c.range_prefix("/d/");
  ASSERT_FALSE(down);
  EXPECT_NE(error_message(down.error()).find(etcd_->url()), std::string::npos) << error_message(down.error());
  auto s = test::etcd_server::start(dir_.path() / "etcd", port);
  ASSERT_TRUE(s) << error_text(s.error());
  etcd_ = std::move(*s);
  EXPECT_FALSE(c.put("/d/x", "back"));
}

TEST(EtcdClientUnitTest, ParsesOnlyPlainHttpUrls) {
  auto ok = parse_etcd_url("http://127.0.0.1:2379/");
  ASSERT_TRUE(ok) << error_text(ok.error());
  EXPECT_EQ(ok->host, "127.0.0.1");
  EXPECT_EQ(ok->port, 2379);
  EXPECT_TRUE(parse_etcd_url("http://[::1]:2379"));
  for (const char* bad : {"https://127.0.0.1:2379", "127.0.0.1:2379", "http://127.0.0.1", "http://127.0.0.1:0",
                          "http://127.0.0.1:2379/v3", "http://user@127.0.0.1:2379", "http://:2379",
                          "http://127.0.0.1:99999"}) {
    auto e = parse_etcd_url(bad);
    EXPECT_FALSE(e) << bad;
    if (!e) {
      EXPECT_NE(error_message(e.error()).find("etcd endpoint"), std::string::npos) << error_message(e.error());
    }
  }
  EXPECT_TRUE(is_loopback_host("127.0.0.1"));
  EXPECT_TRUE(is_loopback_host("localhost"));
  EXPECT_FALSE(is_loopback_host("10.0.0.1"));
}

TEST(EtcdClientUnitTest, Base64RoundTripsAndRefusesWhatIsNot) {
  for (std::string s : {std::string{}, std::string{"a"}, std::string{"ab"}, std::string{"abc"},
                        std::string{"\0\xff\xfe\x80", 4}}) {
    auto back = detail::base64_decode(detail::base64_encode(s));
    ASSERT_TRUE(back);
    EXPECT_EQ(*back, s);
  }
  EXPECT_EQ(detail::base64_encode("/t/a"), "L3QvYQ==");
  for (const char* bad : {"L3QvYQ=", "L3Qv!Q==", "L=QvYQ==", "L3QvY=Q=", "===="})
    EXPECT_FALSE(detail::base64_decode(bad)) << bad;
  EXPECT_EQ(etcd_prefix_end("/a/"), "/a0");
  EXPECT_EQ(etcd_prefix_end(std::string{"a\xff", 2}), "b");
}

TEST(EtcdClientUnitTest, AWatchLineThatIsNotAWatchResponseIsAnError) {
  EXPECT_FALSE(detail::parse_watch_line("not json"));
  EXPECT_FALSE(detail::parse_watch_line("[1,2]"));
  EXPECT_FALSE(detail::parse_watch_line(R"({"error":{"grpc_code":14,"message":"unavailable"}})"));
  EXPECT_FALSE(detail::parse_watch_line(R"({"result":{"canceled":true}})"));
  EXPECT_FALSE(detail::parse_watch_line(R"({"result":{"compact_revision":"7"}})"));
  EXPECT_FALSE(detail::parse_watch_line(R"({"result":{"events":{}}})"));
  EXPECT_FALSE(detail::parse_watch_line(R"({"result":{"events":[{"kv":{"key":"!!"}}]}})"));
  EXPECT_FALSE(detail::parse_watch_line(R"({"result":{"events":[{"type":"BOOM","kv":{"key":"YQ=="}}]}})"));
  EXPECT_FALSE(detail::parse_watch_line(R"({"result":{"events":[{"kv":{"key":"YQ==","mod_revision":"x"}}]}})"));
  auto ok = detail::parse_watch_line(R"({"result":{"events":[{"type":"DELETE","kv":{"key":"YQ=="}}]}})");
  ASSERT_TRUE(ok) << error_text(ok.error());
  ASSERT_EQ(ok->size(), 1u);
  EXPECT_EQ((*ok)[0].type, etcd_event::kind::del);
  EXPECT_EQ((*ok)[0].kv.key, "a");
}

/// A fake gateway on loopback: answers every connection with `reply`
/// and then `more` `repeat` times, after reading the request.
class fake_gateway {
public:
  explicit fake_gateway(std::string reply, std::string more = {}, size_t repeat = 0)
    : server_{[this, reply = std::move(reply), more = std::move(more), repeat](int c) {
        bool sent = ::send(c, reply.data(), reply.size(), MSG_NOSIGNAL) >= 0;
        for (size_t i = 0; sent && i < repeat && !server_.stopping(); ++i)
          sent = ::send(c, more.data(), more.size(), MSG_NOSIGNAL) >= 0;
        ::shutdown(c, SHUT_WR);
        char buf[4096];
        while (::recv(c, buf, sizeof buf, 0) > 0) {
        }
      }} {}
  std::string url() const { return "http://127.0.0.1:" + std::to_string(server_.port()); }

private:
  test::loopback_http_server server_;
};

std::string http_reply(const std::string& body, const std::string& status = "200 OK") {
  return "HTTP/1.1 " + status + "\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

TEST(EtcdClientUnitTest, AMalformedGatewayAnswerIsAnErrorNamingTheEndpoint) {
  struct bad_case {
    std::string reply;
    std::string expect;
  };
  const std::vector<bad_case> cases{
    {http_reply("not{json"), "not JSON"},
    {http_reply("[1]"), "not a JSON object"},
    {http_reply(R"({"header":{"revision":"many"}})"), "revision"},
    {http_reply(R"({"header":{"revision":"3"},"kvs":[{"key":"%%%"}]})"), "base64"},
    {http_reply(R"({"header":{"revision":"3"},"kvs":{}})"), "not an array"},
    {http_reply(R"({"error":"boom","message":"etcdserver: boom","code":2})", "500 Internal Server Error"),
     "etcdserver: boom"},
    {"garbage that is not HTTP\r\n\r\n", "reply"},
    {"HTTP/1.1 200 OK\r\nX: " + std::string(64 << 10, 'h') + "\r\n\r\n", "reply"},
  };
  for (const auto& k : cases) {
    fake_gateway g{k.reply};
    etcd_client c{options_for(g.url())};
    auto r = c.range_prefix("/x/");
    ASSERT_FALSE(r) << k.expect;
    const auto text = error_message(r.error());
    EXPECT_NE(text.find(g.url()), std::string::npos) << text;
    EXPECT_NE(text.find(k.expect), std::string::npos) << text;
  }
}

TEST(EtcdClientUnitTest, AHugeReplyIsRefusedWithoutReadingItAll) {
  const std::string chunk(64 << 10, ' ');
  fake_gateway g{"HTTP/1.1 200 OK\r\nContent-Length: 1073741824\r\n\r\n" + chunk};
  auto o = options_for(g.url());
  o.max_reply_bytes = 1 << 20;
  etcd_client c{o};
  auto r = c.range_prefix("/x/");
  ASSERT_FALSE(r);
  EXPECT_NE(error_message(r.error()).find("over 1048576 bytes"), std::string::npos) << error_message(r.error());
}

TEST(EtcdClientUnitTest, AWatchLineOverTheBoundIsAnError) {
  // A chunked stream whose one line never ends.
  std::string chunk = "10000\r\n" + std::string(0x10000, 'x') + "\r\n";
  fake_gateway g{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", chunk, 40};
  auto o = options_for(g.url());
  o.max_reply_bytes = 1 << 20;
  auto w = etcd_watch::open(o, "/x/", 0);
  ASSERT_TRUE(w) << error_text(w.error());
  caf::expected<std::vector<etcd_event>> evs = std::vector<etcd_event>{};
  for (int i = 0; i < 50 && evs; ++i)
    evs = (*w)->next(100ms);
  ASSERT_FALSE(evs);
  EXPECT_NE(error_message(evs.error()).find("1048576 bytes"), std::string::npos) << error_message(evs.error());
}

TEST(EtcdClientUnitTest, AGatewayThatNeverAnswersTimesOut) {
  // Listens, accepts (the kernel does), never answers.
  const uint16_t port = test::free_port();
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  auto addr = test::loopback_address(port);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 8), 0);
  etcd_client c{options_for("http://127.0.0.1:" + std::to_string(port), 300ms)};
  const auto start = std::chrono::steady_clock::now();
  auto r = c.range_prefix("/x/");
  const auto took = std::chrono::steady_clock::now() - start;
  ::close(fd);
  ASSERT_FALSE(r);
  EXPECT_LT(took, 2s);
  EXPECT_NE(error_message(r.error()).find("timed out"), std::string::npos) << error_message(r.error());
}

TEST(EtcdClientUnitTest, ACallTriesTheNextEndpointWhenOneIsDown) {
  NEED_ETCD()
  test::temp_dir dir{"etcd-client-test"};
  auto s = test::etcd_server::start(dir.path() / "etcd");
  ASSERT_TRUE(s) << error_text(s.error());
  auto o = options_for("http://127.0.0.1:" + std::to_string(test::free_port()), 500ms);
  o.endpoints.push_back(*parse_etcd_url((*s)->url()));
  etcd_client c{o};
  EXPECT_FALSE(c.put("/n/x", "v"));
  EXPECT_EQ(c.endpoint().url, (*s)->url());
}

} // namespace
