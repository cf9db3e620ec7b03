#include "cluster/net_probe.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>

#include <caf/sec.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cluster/host_port.hpp"

namespace tessera::cluster {

namespace {

caf::error bad(const std::string& what) {
  return caf::make_error(caf::sec::invalid_argument, what);
}

/// A socket closed when it goes out of scope.
class socket_fd {
public:
  explicit socket_fd(int fd) : fd_(fd) {}
  ~socket_fd() {
    if (fd_ >= 0)
      ::close(fd_);
  }
  socket_fd(const socket_fd&) = delete;
  socket_fd& operator=(const socket_fd&) = delete;
  [[nodiscard]] int get() const { return fd_; }

private:
  int fd_;
};

using addrinfo_ptr = std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)>;

caf::expected<addrinfo_ptr> lookup(const std::string& host, uint16_t port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* list = nullptr;
  const auto service = std::to_string(port);
  const int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &list);
  if (rc != 0)
    return bad("cannot resolve host '" + host + "' (" + ::gai_strerror(rc) + ")");
  return addrinfo_ptr{list, &::freeaddrinfo};
}

std::string endpoint(const std::string& host, uint16_t port) {
  return join_host_port(host, port);
}

bool is_loopback_or_any(const sockaddr* sa) {
  if (sa->sa_family == AF_INET) {
    const auto a = ntohl(reinterpret_cast<const sockaddr_in*>(sa)->sin_addr.s_addr);
    return (a >> 24) == 127 || a == INADDR_ANY;
  }
  if (sa->sa_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr;
    return IN6_IS_ADDR_LOOPBACK(&a) || IN6_IS_ADDR_UNSPECIFIED(&a);
  }
  return false;
}

bool same_ip(const sockaddr* a, const sockaddr* b) {
  if (a->sa_family != b->sa_family)
    return false;
  if (a->sa_family == AF_INET)
    return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in*>(b)->sin_addr.s_addr;
  if (a->sa_family == AF_INET6)
    return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr,
                       &reinterpret_cast<const sockaddr_in6*>(b)->sin6_addr, sizeof(in6_addr)) == 0;
  return false;
}

/// Milliseconds left until `deadline`, at least 0.
int left_ms(std::chrono::steady_clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  return static_cast<int>(std::max<int64_t>(0, left.count()));
}

/// Connects a non-blocking socket to the first address of host:port that
/// accepts before `deadline`.
caf::expected<int> connect_socket(const std::string& host, uint16_t port,
                                  std::chrono::steady_clock::time_point deadline) {
  auto list = lookup(host, port, false);
  if (!list)
    return list.error();
  std::string why = "no address";
  for (auto* a = list->get(); a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      rc = ::poll(&p, 1, left_ms(deadline));
      if (rc == 0) {
        ::close(fd);
        why = "no answer (timed out)";
        continue;
      }
      int err = 0;
      socklen_t len = sizeof(err);
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      errno = err;
      rc = err == 0 ? 0 : -1;
    }
    if (rc == 0)
      return fd;
    why = errno == ECONNREFUSED ? "connection refused (nothing listens there)" : std::strerror(errno);
    ::close(fd);
  }
  return bad(endpoint(host, port) + ": " + why);
}

} // namespace

caf::error try_listen(const std::string& host, uint16_t port) {
  auto list = lookup(host, port, true);
  if (!list)
    return list.error();
  // As the servers do: the first address that binds is the one used.
  caf::error first_failure;
  for (auto* a = list->get(); a != nullptr; a = a->ai_next) {
    socket_fd fd{::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol)};
    if (fd.get() < 0) {
      if (!first_failure)
        first_failure = bad(endpoint(host, port) + ": cannot make a socket: " + std::strerror(errno));
      continue;
    }
    const int on = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    if (::bind(fd.get(), a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd.get(), 1) == 0)
      return {};
    const int err = errno;
    std::string why;
    if (err == EADDRINUSE)
      why = "already in use by another process (stop it, or choose another port)";
    else if (err == EADDRNOTAVAIL)
      why = "not an address of this machine (use one of its addresses, or 0.0.0.0)";
    else if (err == EACCES)
      why = "needs privileges to listen there (ports below 1024 need root; choose a port above 1023)";
    else
      why = std::strerror(err);
    if (!first_failure)
      first_failure = bad(endpoint(host, port) + ": " + why);
  }
  return first_failure ? first_failure : bad(endpoint(host, port) + ": no address to listen on");
}

bool is_local_host(const std::string& host) {
  auto list = lookup(host, 0, false);
  if (!list)
    return false;
  ifaddrs* ifs = nullptr;
  if (::getifaddrs(&ifs) != 0)
    ifs = nullptr;
  bool local = false;
  for (auto* a = list->get(); a != nullptr && !local; a = a->ai_next) {
    if (is_loopback_or_any(a->ai_addr)) {
      local = true;
      break;
    }
    for (auto* i = ifs; i != nullptr; i = i->ifa_next)
      if (i->ifa_addr != nullptr && same_ip(i->ifa_addr, a->ai_addr)) {
        local = true;
        break;
      }
  }
  if (ifs != nullptr)
    ::freeifaddrs(ifs);
  return local;
}

caf::error try_connect(const std::string& host, uint16_t port, std::chrono::milliseconds timeout) {
  auto fd = connect_socket(host, port, std::chrono::steady_clock::now() + timeout);
  if (!fd)
    return fd.error();
  ::close(*fd);
  return {};
}

caf::expected<http_answer> http_get(const std::string& host, uint16_t port, const std::string& path,
                                    std::chrono::milliseconds timeout) {
  constexpr size_t max_answer_bytes = size_t{1} << 20;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const std::string url = "http://" + endpoint(host, port) + path;
  // A wildcard listen address is dialled on loopback.
  const std::string dial = host == "0.0.0.0" ? "127.0.0.1" : host == "::" ? "::1" : host;
  auto fd_or = connect_socket(dial, port, deadline);
  if (!fd_or)
    return fd_or.error();
  socket_fd fd{*fd_or};
  const std::string request = "GET " + path + " HTTP/1.0\r\nHost: " + endpoint(host, port) +
                              "\r\nAccept: application/json\r\nConnection: close\r\n\r\n";
  size_t sent = 0;
  while (sent < request.size()) {
    pollfd p{fd.get(), POLLOUT, 0};
    if (::poll(&p, 1, left_ms(deadline)) <= 0)
      return bad(url + ": timed out sending the request");
    const auto n = ::send(fd.get(), request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN && errno != EINTR)
      return bad(url + ": " + std::strerror(errno));
    if (n > 0)
      sent += static_cast<size_t>(n);
  }
  std::string answer;
  char buf[8192];
  // Until the server closes, or the body has its Content-Length.
  auto complete = [&answer] {
    const auto head_end = answer.find("\r\n\r\n");
    if (head_end == std::string::npos)
      return false;
    std::string head = answer.substr(0, head_end);
    std::transform(head.begin(), head.end(), head.begin(), [](unsigned char c) { return std::tolower(c); });
    const auto at = head.find("\r\ncontent-length:");
    if (at == std::string::npos)
      return false;
    const auto length = std::strtoull(head.c_str() + at + 17, nullptr, 10);
    return answer.size() - (head_end + 4) >= length;
  };
  while (answer.size() < max_answer_bytes && !complete()) {
    pollfd p{fd.get(), POLLIN, 0};
    if (::poll(&p, 1, left_ms(deadline)) <= 0)
      return bad(url + ": timed out waiting for the answer");
    const auto n = ::recv(fd.get(), buf, sizeof(buf), 0);
    if (n == 0)
      break;
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR)
        continue;
      return bad(url + ": " + std::strerror(errno));
    }
    answer.append(buf, static_cast<size_t>(n));
  }
  // "HTTP/1.1 200 OK\r\n...\r\n\r\nbody"
  http_answer out;
  const auto space = answer.find(' ');
  const auto head_end = answer.find("\r\n\r\n");
  if (!answer.starts_with("HTTP/") || space == std::string::npos || head_end == std::string::npos)
    return bad(url + ": the answer is not HTTP");
  out.status = std::atoi(answer.c_str() + space + 1);
  out.body = answer.substr(head_end + 4);
  return out;
}

} // namespace tessera::cluster
