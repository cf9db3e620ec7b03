#include "tests/support/sockets.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <mutex>
#include <set>
#include <string>

#include <gtest/gtest.h>

namespace tessera::test {

sockaddr_in loopback_address(uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

namespace {

uint16_t bind_any_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  auto a = loopback_address(0);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

} // namespace

uint16_t free_port() {
  // The kernel may hand the port it just gave back out again on the next
  // bind: a test asking for several ports before anything listens would
  // then give two listeners one port (seen: a node's metrics and another
  // node's http). A port is returned at most once per process.
  static std::mutex mu;
  static std::set<uint16_t> given;
  std::lock_guard lock{mu};
  uint16_t port = bind_any_port();
  for (int tries = 0; given.count(port) != 0 && tries < 1000; ++tries)
    port = bind_any_port();
  given.insert(port);
  return port;
}

bool raw_send(uint16_t port, const std::vector<uint8_t>& bytes, std::chrono::milliseconds linger) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    return false;
  auto a = loopback_address(port);
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  if (ok && !bytes.empty())
    ok = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
  if (ok) {
    timeval tv{static_cast<time_t>(linger.count() / 1000),
               static_cast<suseconds_t>((linger.count() % 1000) * 1000)};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    char buf[256];
    while (::recv(fd, buf, sizeof(buf), 0) > 0) {
    }
  }
  ::close(fd);
  return ok;
}

loopback_http_server::loopback_http_server(std::function<void(int connection)> answer)
  : answer_(std::move(answer)) {
  fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  port_ = free_port();
  auto addr = loopback_address(port_);
  EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0) << "port " << port_;
  EXPECT_EQ(::listen(fd_, 8), 0) << "port " << port_;
  thread_ = std::thread{[this] { serve(); }};
}

loopback_http_server::~loopback_http_server() {
  stop_ = true;
  ::shutdown(fd_, SHUT_RDWR);
  ::close(fd_);
  thread_.join();
}

void loopback_http_server::serve() {
  while (!stop_) {
    const int c = ::accept(fd_, nullptr, nullptr);
    if (c < 0)
      return;
    char buf[4096];
    std::string head;
    while (head.find("\r\n\r\n") == std::string::npos) {
      const auto n = ::recv(c, buf, sizeof buf, 0);
      if (n <= 0)
        break;
      head.append(buf, static_cast<size_t>(n));
    }
    answer_(c);
    ::close(c);
  }
}

} // namespace tessera::test
