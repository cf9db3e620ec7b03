#include "tests/support/sockets.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

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

/// Holds `port` for this process's life against other test processes: an
/// exclusive lock on byte `port` of one shared file (an open-file-
/// description lock, released when the process ends, however it ends).
/// False if another process holds it. One file for every port, so the
/// reservations leave nothing behind but that file.
bool reserve_across_processes(uint16_t port) {
  // Opened once per process and kept open: closing it would drop the
  // locks. A forked child opens its own (the parent's open file
  // description, and so its locks, would be the child's too).
  static int fd = -1;
  static pid_t opened_by = 0;
  if (opened_by != ::getpid()) {
    opened_by = ::getpid();
    const auto file = std::filesystem::temp_directory_path() / "tessera-test-ports.lock";
    fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd >= 0)
      ::fchmod(fd, 0666); // every user's tests share it (best effort: the creator's umask)
  }
  if (fd < 0)
    return true; // no reservation possible here: the bind check alone
  struct flock lock {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  lock.l_start = port;
  lock.l_len = 1;
  if (::fcntl(fd, F_OFD_SETLK, &lock) == 0)
    return true;
  return errno != EAGAIN && errno != EACCES; // held by another process; else no locks here
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
