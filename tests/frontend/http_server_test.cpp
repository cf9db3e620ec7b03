#include "actors/frontend/http_server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "common/child_process.hpp"
#include "common/error.hpp"

namespace {

using namespace std::chrono_literals;
using tessera::actors::frontend::http_handler;
using tessera::actors::frontend::http_request;
using tessera::actors::frontend::http_response;
using tessera::actors::frontend::http_server;
using tessera::actors::frontend::http_server_options;

constexpr auto io_timeout = 10s;

// A thread-safe queue to hand values (responses, acknowledgements) between
// the handler, producer threads and the test, waited on with a timeout.
template <class T>
class mailbox {
public:
  void push(T value) {
    {
      std::lock_guard lock(mu_);
      items_.push_back(std::move(value));
    }
    cv_.notify_all();
  }

  std::optional<T> pop(std::chrono::milliseconds timeout = io_timeout) {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, timeout, [&] { return !items_.empty(); }))
      return std::nullopt;
    T value = std::move(items_.front());
    items_.pop_front();
    return value;
  }

private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<T> items_;
};

std::unique_ptr<http_server> start_server(http_server_options options, http_handler handler) {
  auto server = http_server::start(std::move(options), std::move(handler));
  if (!server) {
    ADD_FAILURE() << tessera::error_text(server.error());
    return nullptr;
  }
  return std::move(*server);
}

// One parsed response as a client sees it.
struct raw_response {
  int status = 0;
  std::map<std::string, std::string> headers; // lower-case names
  std::string body;                           // de-chunked
  std::vector<std::string> chunks;            // chunked responses: each chunk
};

// A blocking TCP client on raw sockets, every read bounded by a deadline.
class raw_client {
public:
  explicit raw_client(uint16_t port, int rcvbuf_bytes = 0) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (rcvbuf_bytes > 0)
      ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf_bytes, sizeof rcvbuf_bytes);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  ~raw_client() { close(); }
  raw_client(const raw_client&) = delete;
  raw_client& operator=(const raw_client&) = delete;

  [[nodiscard]] bool connected() const { return connected_; }

  bool send(std::string_view data) {
    while (!data.empty()) {
      auto n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0)
        return false;
      data.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
  }

  void close() {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = -1;
  }

  // Reads more bytes into the buffer; false on EOF, error or timeout.
  bool fill(std::chrono::steady_clock::time_point deadline) {
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0)
        return false;
      pollfd pfd{fd_, POLLIN, 0};
      int r = ::poll(&pfd, 1, static_cast<int>(left.count()));
      if (r == 0)
        return false;
      if (r < 0)
        continue;
      char buf[16384];
      auto n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) {
        eof_ = true;
        return false;
      }
      buf_.append(buf, static_cast<std::size_t>(n));
      return true;
    }
  }

  // True once `needle` was received (it stays in the buffer).
  bool wait_for(std::string_view needle, std::chrono::milliseconds timeout = io_timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (buf_.find(needle) == std::string::npos)
      if (!fill(deadline))
        return false;
    return true;
  }

  // True if the server closed the connection (EOF or reset) within
  // `timeout`; whatever arrives before is discarded.
  bool closed_by_peer(std::chrono::milliseconds timeout = io_timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!eof_) {
      buf_.clear();
      if (!fill(deadline) && !eof_)
        return false;
    }
    return true;
  }

  // Reads one whole response: Content-Length, chunked, or up to EOF.
  std::optional<raw_response> read_response(std::chrono::milliseconds timeout = io_timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    std::size_t end;
    while ((end = buf_.find("\r\n\r\n")) == std::string::npos)
      if (!fill(deadline))
        return std::nullopt;
    raw_response r;
    std::string head = buf_.substr(0, end);
    buf_.erase(0, end + 4);
    if (std::sscanf(head.c_str(), "HTTP/1.%*d %d", &r.status) != 1)
      return std::nullopt;
    std::size_t pos = head.find("\r\n");
    while (pos != std::string::npos) {
      std::size_t next = head.find("\r\n", pos + 2);
      std::string line = head.substr(pos + 2, next == std::string::npos ? std::string::npos
                                                                          : next - pos - 2);
      auto colon = line.find(':');
      std::string name = line.substr(0, colon);
      for (auto& c : name)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      std::string value = line.substr(colon + 1);
      value.erase(0, value.find_first_not_of(' '));
      r.headers[name] = value;
      pos = next;
    }
    if (r.status == 100)
      return r;
    if (r.headers.contains("content-length")) {
      auto n = std::stoul(r.headers["content-length"]);
      while (buf_.size() < n)
        if (!fill(deadline))
          return std::nullopt;
      r.body = buf_.substr(0, n);
      buf_.erase(0, n);
    } else if (auto te = r.headers.find("transfer-encoding");
               te != r.headers.end() && te->second == "chunked") {
      for (;;) {
        std::size_t eol;
        while ((eol = buf_.find("\r\n")) == std::string::npos)
          if (!fill(deadline))
            return std::nullopt;
        auto size = std::stoul(buf_.substr(0, eol), nullptr, 16);
        while (buf_.size() < eol + 2 + size + 2)
          if (!fill(deadline))
            return std::nullopt;
        if (buf_.compare(eol + 2 + size, 2, "\r\n") != 0)
          return std::nullopt;
        std::string chunk = buf_.substr(eol + 2, size);
        buf_.erase(0, eol + 2 + size + 2);
        if (size == 0)
          break;
        r.body += chunk;
        r.chunks.push_back(std::move(chunk));
      }
    } else {
      while (fill(deadline)) {
      }
      if (!eof_)
        return std::nullopt;
      r.body = std::move(buf_);
      buf_.clear();
    }
    return r;
  }

private:
  int fd_ = -1;
  bool connected_ = false;
  bool eof_ = false;
  std::string buf_;
};

// curl's whole stdout (lines joined with '\n'), or nullopt if it did not
// exit 0 within io_timeout.
std::optional<std::vector<std::string>> run_curl(std::vector<std::string> args) {
  args.insert(args.begin(), {"-s", "-S", "--max-time", "20"});
  auto child = tessera::child_process::spawn("/usr/bin/curl", args);
  if (!child) {
    ADD_FAILURE() << tessera::error_text(child.error());
    return std::nullopt;
  }
  std::vector<std::string> lines;
  while (auto line = child->read_line(io_timeout))
    lines.push_back(*line);
  auto code = child->wait(io_timeout);
  if (!code || *code != 0) {
    ADD_FAILURE() << "curl failed: " << (code ? std::to_string(*code) : "did not exit");
    return std::nullopt;
  }
  return lines;
}

bool have_curl() {
  return std::filesystem::exists("/usr/bin/curl");
}

std::string json_error(const std::string& message) {
  return R"({"error":{"message":")" + message +
         R"(","type":"invalid_request_error","param":null,"code":null}})";
}

// Echoes "METHOD TARGET|body|x-test header".
void echo_handler(http_request req, std::shared_ptr<http_response> res) {
  auto x = req.header("x-test");
  res->send(200, "text/plain",
            req.method + " " + req.target + "|" + req.body + "|" + std::string(x.value_or("-")));
}

TEST(HttpServerTest, AnswersGetFromCurl) {
  if (!have_curl())
    GTEST_SKIP() << "curl not installed";
  auto server = start_server({}, echo_handler);
  ASSERT_TRUE(server);
  auto out = run_curl({"-w", "\n%{http_code}\n", server->url() + "/v1/models?x=1"});
  ASSERT_TRUE(out);
  ASSERT_EQ(out->size(), 2u);
  EXPECT_EQ((*out)[0], "GET /v1/models?x=1||-");
  EXPECT_EQ((*out)[1], "200");
}

TEST(HttpServerTest, PassesPostBodyAndHeadersToTheHandler) {
  if (!have_curl())
    GTEST_SKIP() << "curl not installed";
  auto server = start_server({}, echo_handler);
  ASSERT_TRUE(server);
  auto out = run_curl({"-w", "\n%{http_code}\n", "-H", "X-Test: yes", "--data-binary",
                       R"({"prompt":"hi"})", server->url() + "/v1/completions"});
  ASSERT_TRUE(out);
  ASSERT_EQ(out->size(), 2u);
  EXPECT_EQ((*out)[0], R"(POST /v1/completions|{"prompt":"hi"}|yes)");
  EXPECT_EQ((*out)[1], "200");
}

TEST(HttpServerTest, AcceptsLargeBodyUnderTheLimitFromCurlWithExpectContinue) {
  if (!have_curl())
    GTEST_SKIP() << "curl not installed";
  // curl asks "Expect: 100-continue" for large bodies and waits a second for
  // the answer unless the server gives it; --expect100-timeout makes a
  // missing 100 Continue fail the check on the time curl reports instead.
  auto path = std::filesystem::temp_directory_path() /
              ("tessera_http_body_" + std::to_string(::getpid()));
  {
    std::ofstream f(path, std::ios::binary);
    f << std::string(std::size_t{3} << 20, 'a');
  }
  std::atomic<std::size_t> body_size{0};
  auto server = start_server({.max_body_bytes = std::size_t{4} << 20},
                             [&](http_request req, std::shared_ptr<http_response> res) {
                               body_size = req.body.size();
                               res->send(200, "text/plain", "ok");
                             });
  ASSERT_TRUE(server);
  auto out = run_curl({"-w", "\n%{http_code}\n", "-H", "Expect: 100-continue",
                       "--expect100-timeout", "30", "--data-binary", "@" + path.string(),
                       server->url() + "/big"});
  std::filesystem::remove(path);
  ASSERT_TRUE(out);
  ASSERT_EQ(out->size(), 2u);
  EXPECT_EQ((*out)[1], "200");
  EXPECT_EQ(body_size.load(), std::size_t{3} << 20);
}

TEST(HttpServerTest, KeepsTheConnectionAliveForASecondRequest) {
  mailbox<std::string> remotes;
  auto server = start_server({}, [&](http_request req, std::shared_ptr<http_response> res) {
    remotes.push(req.remote);
    res->send(200, "text/plain", "answer to " + req.target);
  });
  ASSERT_TRUE(server);
  raw_client client(server->port());
  ASSERT_TRUE(client.connected());
  ASSERT_TRUE(client.send("GET /one HTTP/1.1\r\nHost: t\r\n\r\n"));
  auto first = client.read_response();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->body, "answer to /one");
  EXPECT_FALSE(first->headers.contains("connection"));
  ASSERT_TRUE(client.send("GET /two HTTP/1.1\r\nHost: t\r\n\r\n"));
  auto second = client.read_response();
  ASSERT_TRUE(second);
  EXPECT_EQ(second->status, 200);
  EXPECT_EQ(second->body, "answer to /two");
  auto r1 = remotes.pop();
  auto r2 = remotes.pop();
  ASSERT_TRUE(r1 && r2);
  EXPECT_EQ(*r1, *r2); // same client port: one connection
}

TEST(HttpServerTest, AnswersPipelinedRequestsInOrder) {
  std::atomic<bool> first_answered{false};
  std::atomic<bool> second_saw_first_answered{false};
  std::mutex responders_mu;
  std::vector<std::jthread> responders; // guarded by responders_mu; joined last
  auto server = start_server({}, [&](http_request req, std::shared_ptr<http_response> res) {
    if (req.target == "/one") {
      // Answered later, from another thread: the second request must wait.
      std::lock_guard lock(responders_mu);
      responders.emplace_back([res, &first_answered] {
        first_answered = true;
        res->send(200, "text/plain", "first");
      });
    } else {
      second_saw_first_answered = first_answered.load();
      res->send(200, "text/plain", "second");
    }
  });
  ASSERT_TRUE(server);
  raw_client client(server->port());
  ASSERT_TRUE(client.send("GET /one HTTP/1.1\r\nHost: t\r\n\r\n"
                          "GET /two HTTP/1.1\r\nHost: t\r\n\r\n"));
  auto a = client.read_response();
  auto b = client.read_response();
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->body, "first");
  EXPECT_EQ(b->body, "second");
  EXPECT_TRUE(second_saw_first_answered);
}

TEST(HttpServerTest, RejectsABodyOverTheLimitWith413AndCloses) {
  std::atomic<int> calls{0};
  auto server = start_server({.max_body_bytes = std::size_t{1} << 20},
                             [&](http_request, std::shared_ptr<http_response> res) {
                               ++calls;
                               res->send(200, "text/plain", "should not happen");
                             });
  ASSERT_TRUE(server);
  raw_client client(server->port());
  ASSERT_TRUE(client.connected());
  const std::size_t size = std::size_t{2} << 20;
  ASSERT_TRUE(client.send("POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Length: " +
                          std::to_string(size) + "\r\n\r\n"));
  // The body goes out from another thread while this one reads the answer;
  // the server may stop reading it, so its send may fail.
  std::thread writer([&client, size] { client.send(std::string(size, 'x')); });
  auto r = client.read_response();
  writer.join();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_EQ(r->headers["content-type"], "application/json");
  EXPECT_EQ(r->headers["connection"], "close");
  EXPECT_EQ(r->body, json_error("request body is larger than 1048576 bytes"));
  EXPECT_TRUE(client.closed_by_peer());
  EXPECT_EQ(calls.load(), 0);
}

TEST(HttpServerTest, RefusesAnOversizedContentLengthBeforeAnyBodyArrives) {
  auto server = start_server({.max_body_bytes = 1000}, echo_handler);
  ASSERT_TRUE(server);
  raw_client client(server->port());
  // Only the header: the 413 must not wait for the body.
  ASSERT_TRUE(client.send("POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 1001\r\n\r\n"));
  auto r = client.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_EQ(r->body, json_error("request body is larger than 1000 bytes"));
  EXPECT_TRUE(client.closed_by_peer());
}

TEST(HttpServerTest, RejectsAChunkedBodyOverTheLimit) {
  auto server = start_server({.max_body_bytes = 1000}, echo_handler);
  ASSERT_TRUE(server);
  raw_client client(server->port());
  std::string chunk(600, 'y');
  ASSERT_TRUE(client.send("POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
                          "258\r\n" + chunk + "\r\n258\r\n" + chunk + "\r\n0\r\n\r\n"));
  auto r = client.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_TRUE(client.closed_by_peer());
}

TEST(HttpServerTest, AcceptsAChunkedBodyUnderTheLimit) {
  auto server = start_server({}, echo_handler);
  ASSERT_TRUE(server);
  raw_client client(server->port());
  ASSERT_TRUE(client.send("POST /c HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
                          "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"));
  auto r = client.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "POST /c|hello world|-");
}

TEST(HttpServerTest, RejectsAMalformedRequestLineWith400) {
  std::atomic<int> calls{0};
  auto server = start_server({}, [&](http_request, std::shared_ptr<http_response> res) {
    ++calls;
    res->send(200, "text/plain", "");
  });
  ASSERT_TRUE(server);
  raw_client client(server->port());
  ASSERT_TRUE(client.send("this is not http\r\n\r\n"));
  auto r = client.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(r->headers["content-type"], "application/json");
  EXPECT_EQ(r->body.rfind(R"({"error":{"message":"malformed HTTP request: )", 0), 0u) << r->body;
  EXPECT_NE(r->body.find(R"("type":"invalid_request_error","param":null,"code":null}})"),
            std::string::npos)
    << r->body;
  EXPECT_TRUE(client.closed_by_peer());
  EXPECT_EQ(calls.load(), 0);
}

TEST(HttpServerTest, RejectsAnOversizedHeaderWith431) {
  auto server = start_server({.max_header_bytes = 1024}, echo_handler);
  ASSERT_TRUE(server);
  raw_client client(server->port());
  ASSERT_TRUE(client.send("GET / HTTP/1.1\r\nHost: t\r\nX-Big: " + std::string(2048, 'z') +
                          "\r\n\r\n"));
  auto r = client.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 431);
  EXPECT_EQ(r->body, json_error("request header is larger than 1024 bytes"));
}

TEST(HttpServerTest, SendsOneHundredContinueBeforeTheBody) {
  auto server = start_server({}, echo_handler);
  ASSERT_TRUE(server);
  raw_client client(server->port());
  ASSERT_TRUE(client.send(
    "POST /e HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n"));
  auto cont = client.read_response();
  ASSERT_TRUE(cont);
  EXPECT_EQ(cont->status, 100);
  ASSERT_TRUE(client.send("hello"));
  auto r = client.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "POST /e|hello|-");
}

TEST(HttpServerTest, StreamsServerSentEventsWrittenFromAnotherThreadInOrder) {
  if (!have_curl())
    GTEST_SKIP() << "curl not installed";
  constexpr int events = 10;
  mailbox<int> seen; // the test saw event i; the producer may write i + 1
  mailbox<std::shared_ptr<http_response>> streams;
  auto server = start_server({}, [&](http_request, std::shared_ptr<http_response> res) {
    res->start_stream(200, "text/event-stream");
    streams.push(res);
  });
  ASSERT_TRUE(server);
  // Joined on every exit (jthread), failed assertions included.
  std::jthread producer([&] {
    auto res = streams.pop();
    ASSERT_TRUE(res);
    for (int i = 0; i < events; ++i) {
      ASSERT_TRUE((*res)->write("data: " + std::to_string(i) + "\n\n"));
      // Lockstep: event i must reach curl before i + 1 exists, so nothing
      // here can pass by buffering the whole stream.
      ASSERT_TRUE(seen.pop()) << "curl did not see event " << i;
    }
    ASSERT_TRUE((*res)->write("data: [DONE]\n\n"));
    (*res)->finish();
  });
  auto child = tessera::child_process::spawn(
    "/usr/bin/curl", {"-s", "-N", "--max-time", "20", "-D", "/dev/stdout", server->url() + "/s"});
  ASSERT_TRUE(child) << tessera::error_text(child.error());
  std::map<std::string, std::string> headers;
  for (;;) {
    auto line = child->read_line(io_timeout);
    ASSERT_TRUE(line) << tessera::error_text(line.error());
    if (*line == "\r")
      break;
    auto colon = line->find(':');
    if (colon != std::string::npos) {
      std::string name = line->substr(0, colon);
      for (auto& c : name)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      headers[name] = line->substr(colon + 2, line->size() - colon - 3);
    }
  }
  EXPECT_EQ(headers["content-type"], "text/event-stream");
  EXPECT_EQ(headers["cache-control"], "no-cache");
  EXPECT_EQ(headers["transfer-encoding"], "chunked");
  for (int i = 0; i < events; ++i) {
    auto data = child->read_line(io_timeout);
    ASSERT_TRUE(data) << tessera::error_text(data.error());
    EXPECT_EQ(*data, "data: " + std::to_string(i));
    auto blank = child->read_line(io_timeout);
    ASSERT_TRUE(blank);
    EXPECT_EQ(*blank, "");
    seen.push(i);
  }
  auto done = child->read_line(io_timeout);
  ASSERT_TRUE(done);
  EXPECT_EQ(*done, "data: [DONE]");
  auto code = child->wait(io_timeout);
  ASSERT_TRUE(code);
  EXPECT_EQ(*code, 0);
  producer.join();
}

TEST(HttpServerTest, ServesAStreamToAnHttp10ClientUntilClose) {
  auto server = start_server({}, [](http_request, std::shared_ptr<http_response> res) {
    res->start_stream(200, "text/plain");
    res->write("ab");
    res->write("cd");
    res->finish();
  });
  ASSERT_TRUE(server);
  raw_client client(server->port());
  ASSERT_TRUE(client.send("GET / HTTP/1.0\r\n\r\n"));
  auto r = client.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->headers["connection"], "close");
  EXPECT_FALSE(r->headers.contains("transfer-encoding"));
  EXPECT_EQ(r->body, "abcd");
}

TEST(HttpServerTest, NotifiesOnCloseWhenTheClientDisconnectsMidStream) {
  mailbox<std::shared_ptr<http_response>> responses;
  std::promise<void> closed;
  auto closed_future = closed.get_future();
  auto server = start_server({}, [&](http_request, std::shared_ptr<http_response> res) {
    res->on_close([&closed] { closed.set_value(); });
    res->start_stream(200, "text/event-stream");
    res->write("data: first\n\n");
    responses.push(res);
  });
  ASSERT_TRUE(server);
  raw_client client(server->port());
  ASSERT_TRUE(client.send("POST /v1/completions HTTP/1.1\r\nHost: t\r\n\r\n"));
  ASSERT_TRUE(client.wait_for("data: first"));
  auto res = responses.pop();
  ASSERT_TRUE(res);
  EXPECT_FALSE((*res)->closed());
  // Nothing is being written now: only the server's read can notice.
  client.close();
  ASSERT_EQ(closed_future.wait_for(1s), std::future_status::ready);
  EXPECT_TRUE((*res)->closed());
  EXPECT_FALSE((*res)->write("data: late\n\n"));
  // Registered after the close: runs at once, here.
  bool late = false;
  (*res)->on_close([&late] { late = true; });
  EXPECT_TRUE(late);
}

TEST(HttpServerTest, DoesNotRunOnCloseAfterTheResponseCompleted) {
  std::atomic<int> closes{0};
  auto server = start_server({}, [&](http_request, std::shared_ptr<http_response> res) {
    res->on_close([&closes] { ++closes; });
    res->send(200, "text/plain", "done");
  });
  ASSERT_TRUE(server);
  {
    raw_client client(server->port());
    ASSERT_TRUE(client.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n"));
    ASSERT_TRUE(client.read_response());
  }
  server->stop();
  EXPECT_EQ(closes.load(), 0);
}

TEST(HttpServerTest, ClosesASlowReaderWhenItsQueueOverflows) {
  mailbox<std::shared_ptr<http_response>> responses;
  std::promise<void> closed;
  auto closed_future = closed.get_future();
  auto server = start_server({.max_queued_bytes = 256 << 10},
                             [&](http_request, std::shared_ptr<http_response> res) {
                               res->on_close([&closed] { closed.set_value(); });
                               res->start_stream(200, "text/event-stream");
                               responses.push(res);
                             });
  ASSERT_TRUE(server);
  raw_client client(server->port(), 4096); // and never reads
  ASSERT_TRUE(client.send("GET /s HTTP/1.1\r\nHost: t\r\n\r\n"));
  auto res = responses.pop();
  ASSERT_TRUE(res);
  const std::string chunk(16 << 10, 'q');
  std::size_t total = 0;
  const std::size_t give_up = std::size_t{256} << 20;
  while (total < give_up && (*res)->write(chunk))
    total += chunk.size();
  // Bounded: the socket buffers plus the queue cap, far below give_up.
  EXPECT_LT(total, give_up);
  EXPECT_EQ(closed_future.wait_for(io_timeout), std::future_status::ready);
  EXPECT_TRUE((*res)->closed());
}

TEST(HttpServerTest, AnswersADroppedResponseWith500) {
  auto server = start_server({}, [](http_request, std::shared_ptr<http_response>) {});
  ASSERT_TRUE(server);
  raw_client client(server->port());
  ASSERT_TRUE(client.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n"));
  auto r = client.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 500);
  EXPECT_NE(r->body.find(R"("type":"server_error")"), std::string::npos) << r->body;
  // The connection stays usable.
  ASSERT_TRUE(client.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n"));
  auto again = client.read_response();
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 500);
}

TEST(HttpServerTest, AnswersAThrowingHandlerWith500AndKeepsServing) {
  auto server = start_server({}, [](http_request req, std::shared_ptr<http_response> res) {
    if (req.target == "/throw")
      throw std::runtime_error("handler bug");
    res->send(200, "text/plain", "fine");
  });
  ASSERT_TRUE(server);
  raw_client client(server->port());
  ASSERT_TRUE(client.send("GET /throw HTTP/1.1\r\nHost: t\r\n\r\n"));
  auto r = client.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 500);
  EXPECT_NE(r->body.find("internal error in the request handler"), std::string::npos) << r->body;
  EXPECT_EQ(r->body.find("handler bug"), std::string::npos) << "leaks the exception text";
  ASSERT_TRUE(client.send("GET /ok HTTP/1.1\r\nHost: t\r\n\r\n"));
  auto ok = client.read_response();
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->body, "fine");
}

TEST(HttpServerTest, ClosesAConnectionIdleLongerThanTheTimeout) {
  auto server = start_server({.idle_timeout = 100ms}, echo_handler);
  ASSERT_TRUE(server);
  raw_client silent(server->port());
  EXPECT_TRUE(silent.closed_by_peer());
  raw_client after_response(server->port());
  ASSERT_TRUE(after_response.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n"));
  ASSERT_TRUE(after_response.read_response());
  EXPECT_TRUE(after_response.closed_by_peer());
}

// Each of 64 raw clients opens a stream; one producer thread writes all of
// them round-robin; every client must get its own events, complete, in order.
void serve_concurrent_streams(int threads) {
  constexpr int clients = 64;
  constexpr int events = 20;
  mailbox<std::pair<int, std::shared_ptr<http_response>>> opened;
  auto server = start_server({.threads = threads},
                             [&](http_request req, std::shared_ptr<http_response> res) {
                               res->start_stream(200, "text/event-stream");
                               opened.push({std::stoi(req.target.substr(3)), res});
                             });
  ASSERT_TRUE(server);
  std::vector<std::future<std::optional<raw_response>>> results;
  for (int c = 0; c < clients; ++c) {
    results.push_back(std::async(std::launch::async, [port = server->port(), c] {
      raw_client client(port);
      if (!client.send("GET /s/" + std::to_string(c) + " HTTP/1.1\r\nHost: t\r\n\r\n"))
        return std::optional<raw_response>{};
      return client.read_response(30s);
    }));
  }
  std::vector<std::pair<int, std::shared_ptr<http_response>>> streams;
  for (int c = 0; c < clients; ++c) {
    auto s = opened.pop(30s);
    ASSERT_TRUE(s) << "only " << c << " of " << clients << " streams opened";
    streams.push_back(std::move(*s));
  }
  std::thread producer([&streams] {
    for (int i = 0; i < events; ++i)
      for (auto& [c, res] : streams)
        res->write("data: " + std::to_string(c) + " " + std::to_string(i) + "\n\n");
    for (auto& [c, res] : streams)
      res->finish();
  });
  producer.join();
  for (int c = 0; c < clients; ++c) {
    auto r = results[static_cast<std::size_t>(c)].get();
    ASSERT_TRUE(r) << "client " << c << " got no complete response";
    std::string expected;
    for (int i = 0; i < events; ++i)
      expected += "data: " + std::to_string(c) + " " + std::to_string(i) + "\n\n";
    EXPECT_EQ(r->body, expected) << "client " << c;
  }
}

TEST(HttpServerTest, ServesSixtyFourConcurrentStreamsOnOneThread) {
  serve_concurrent_streams(1);
}

TEST(HttpServerTest, ServesSixtyFourConcurrentStreamsOnTwoThreads) {
  serve_concurrent_streams(2);
}

TEST(HttpServerTest, StopReturnsPromptlyWithOpenStreams) {
  constexpr int clients = 8;
  mailbox<std::shared_ptr<http_response>> opened;
  std::atomic<int> closes{0};
  auto server = start_server({.threads = 2},
                             [&](http_request, std::shared_ptr<http_response> res) {
                               res->on_close([&closes] { ++closes; });
                               res->start_stream(200, "text/event-stream");
                               res->write("data: open\n\n");
                               opened.push(res);
                             });
  ASSERT_TRUE(server);
  std::vector<std::unique_ptr<raw_client>> sockets;
  for (int c = 0; c < clients; ++c) {
    sockets.push_back(std::make_unique<raw_client>(server->port()));
    ASSERT_TRUE(sockets.back()->send("GET / HTTP/1.1\r\nHost: t\r\n\r\n"));
  }
  std::vector<std::shared_ptr<http_response>> streams;
  for (int c = 0; c < clients; ++c) {
    auto s = opened.pop();
    ASSERT_TRUE(s);
    streams.push_back(*s);
  }
  auto stopped = std::async(std::launch::async, [&server] { server->stop(); });
  ASSERT_EQ(stopped.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(closes.load(), clients);
  for (auto& s : streams)
    EXPECT_FALSE(s->write("data: after stop\n\n"));
  for (auto& sock : sockets)
    EXPECT_TRUE(sock->closed_by_peer());
  // The responses may outlive the server itself.
  server.reset();
  for (auto& s : streams)
    s->finish();
  streams.clear();
}

TEST(HttpServerTest, StopWritesWhatIsAlreadyQueuedBeforeItCloses) {
  // A response queued whole just before the server stops (a stream's last
  // chunk and [DONE] as a drain ends): larger than the socket buffers, so
  // most of it is still in the outbox when stop() begins.
  const std::string body(8 << 20, 'x');
  mailbox<bool> answered;
  auto server = start_server({}, [&](http_request, std::shared_ptr<http_response> res) {
    res->send(200, "text/plain", body);
    answered.push(true);
  });
  ASSERT_TRUE(server);
  raw_client client(server->port(), 64 << 10);
  ASSERT_TRUE(client.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n"));
  ASSERT_TRUE(answered.pop());
  auto stopped = std::async(std::launch::async, [&server] { server->stop(); });
  auto r = client.read_response();
  ASSERT_TRUE(r) << "the response was cut by the stop";
  EXPECT_EQ(r->body.size(), body.size());
  ASSERT_EQ(stopped.wait_for(5s), std::future_status::ready);
}

TEST(HttpServerTest, ReportsAnAddressInUseNamingHostAndPort) {
  auto first = start_server({}, echo_handler);
  ASSERT_TRUE(first);
  auto second = http_server::start({.port = first->port()}, echo_handler);
  ASSERT_FALSE(second);
  auto text = tessera::error_text(second.error());
  EXPECT_NE(text.find("127.0.0.1:" + std::to_string(first->port())), std::string::npos) << text;
  EXPECT_NE(text.find("in use"), std::string::npos) << text;
}

TEST(HttpServerTest, ReportsTheBoundPortAndUrl) {
  auto server = start_server({}, echo_handler);
  ASSERT_TRUE(server);
  EXPECT_NE(server->port(), 0);
  EXPECT_EQ(server->url(), "http://127.0.0.1:" + std::to_string(server->port()));
}

} // namespace
