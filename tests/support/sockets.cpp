#include "tests/support/sockets.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/file.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
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

/// True if 127.0.0.1:`port` can be bound now.
bool can_bind(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return false;
  auto a = loopback_address(port);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  ::close(fd);
  return ok;
}

/// The kernel's ephemeral range (ip_local_port_range): where connect()
/// and bind(port 0) take ports.
std::pair<int, int> ephemeral_range() {
  std::ifstream in{"/proc/sys/net/ipv4/ip_local_port_range"};
  int low = 32768;
  int high = 60999;
  in >> low >> high;
  return {low, high};
}

/// Holds `port` for this process's life against other test processes:
/// an exclusive flock on a file named by it (released when the process
/// ends, however it ends). False if another process holds it.
bool reserve_across_processes(uint16_t port) {
  // Made once per process, open to every user's tests (sticky, as /tmp).
  static const auto dir = [] {
    auto d = std::filesystem::temp_directory_path() / "tessera-test-ports";
    std::error_code ec;
    std::filesystem::create_directories(d, ec);
    std::filesystem::permissions(d, std::filesystem::perms::all | std::filesystem::perms::sticky_bit, ec);
    return d;
  }();
  const auto file = dir / std::to_string(port);
  int fd = ::open(file.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0)
    return true; // no reservation possible here: the bind check alone
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    return false;
  }
  return true; // fd stays open (and locked) until the process ends
}

} // namespace

uint16_t free_port() {
  // A port from the kernel's ephemeral range (bind to port 0) collides
  // with what runs beside the test: the kernel hands it to the next
  // connect() of any process (a cluster under load in a parallel test
  // opens hundreds) or bind(0) of another test process, in the seconds
  // before the node given it listens (the likely cause of a chaos test's
  // router exiting before ready, in CI). So: ports below that range, at a
  // random start, each bindable now, returned at most once per process and
  // reserved against other test processes.
  static std::mutex mu;
  static std::set<uint16_t> given;
  static std::mt19937 pick{std::random_device{}()};
  std::lock_guard lock{mu};
  static const auto range = ephemeral_range();
  const auto [low, high] = range;
  // Below the ephemeral range if there is room there, else above it.
  const int first = low > 12000 ? 10000 : high + 1;
  const int last = low > 12000 ? low - 1 : 65535;
  std::uniform_int_distribution<int> start{first, last};
  const int span = last - first + 1;
  const int from = start(pick);
  for (int i = 0; i < span; ++i) {
    const auto port = static_cast<uint16_t>(first + (from - first + i) % span);
    if (given.count(port) != 0 || !can_bind(port) || !reserve_across_processes(port))
      continue;
    given.insert(port);
    return port;
  }
  ADD_FAILURE() << "no free TCP port on 127.0.0.1 in " << first << "-" << last;
  return 0;
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
