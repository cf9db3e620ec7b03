// The front door's TCP side: the listener thread polling every handshake
// in progress, and the blocking client.

#include "transport/ucx/ucx_front_door.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <list>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include "common/error.hpp"
#include "transport/transport_errc.hpp"
#include "transport/ucx/ucx_same_host.hpp"
#include "transport/ucx/ucx_support.hpp"

namespace tessera::transport::detail {

namespace {

using clock = std::chrono::steady_clock;

constexpr size_t length_bytes = 4;

std::string address_of(const sockaddr_in& sa) {
  sockaddr_storage ss{};
  std::memcpy(&ss, &sa, sizeof(sa));
  return to_string(ss);
}

std::vector<std::byte> framed(const std::vector<std::byte>& body) {
  std::vector<std::byte> out(length_bytes + body.size());
  auto n = static_cast<uint32_t>(body.size());
  std::memcpy(out.data(), &n, length_bytes);
  if (!body.empty())
    std::memcpy(out.data() + length_bytes, body.data(), body.size());
  return out;
}

/// Takes one complete frame off the front of `in`, if there is one.
/// Sets `oversize` when the declared length is over the limit.
std::optional<std::vector<std::byte>> take_frame(std::vector<std::byte>& in, bool& oversize) {
  if (in.size() < length_bytes)
    return std::nullopt;
  uint32_t n = 0;
  std::memcpy(&n, in.data(), length_bytes);
  if (n > max_handshake_message_bytes) {
    oversize = true;
    return std::nullopt;
  }
  if (in.size() < length_bytes + n)
    return std::nullopt;
  std::vector<std::byte> body(in.begin() + length_bytes, in.begin() + length_bytes + n);
  in.erase(in.begin(), in.begin() + length_bytes + n);
  return body;
}

void set_nonblocking(int fd) {
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL, 0) | O_NONBLOCK);
}

/// One connection's server-side handshake.
struct pending {
  int fd = -1;
  std::string from;
  clock::time_point deadline;
  handshake hs;
  uint64_t my_session = 0;
  std::vector<std::byte> in;
  std::vector<std::byte> out; // still to write
  bool finish_after_write = false;
  /// Whether the peer sent anything yet (a connection closed before its
  /// first byte is a port probe: tessera check, a load balancer).
  bool heard = false;
  /// Came through the same-host socket (its credentials checked).
  bool same_host = false;
};

/// Listens on the same-host socket of `sa`; -1 (logged) if it cannot.
int listen_same_host(const sockaddr_in& sa) {
  sockaddr_un un{};
  auto len = same_host_socket(sa, un);
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0 || ::bind(fd, reinterpret_cast<const sockaddr*>(&un), len) != 0
      || ::listen(fd, 128) != 0) {
    spdlog::warn("ucx: no same-host door at {} ({}): same-host peers use the TCP door and "
                 "grants",
                 same_host_socket_name(sa), std::strerror(errno));
    if (fd >= 0)
      ::close(fd);
    return -1;
  }
  return fd;
}

} // namespace

caf::expected<std::unique_ptr<front_door>> front_door::listen(const sockaddr_in& sa,
                                                             front_door_options options) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return make_transport_error(transport_errc::unavailable,
                                std::string{"front door: socket: "} + std::strerror(errno));
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof(sa)) != 0) {
    auto e = errno;
    ::close(fd);
    return make_transport_error(e == EADDRINUSE ? transport_errc::address_in_use
                                                : transport_errc::peer_unreachable,
                                "front door: cannot listen on " + address_of(sa) + ": "
                                  + std::strerror(e));
  }
  if (::listen(fd, 128) != 0) {
    auto e = errno;
    ::close(fd);
    return make_transport_error(transport_errc::peer_unreachable,
                                std::string{"front door: listen: "} + std::strerror(e));
  }
  sockaddr_in bound{};
  socklen_t len = sizeof(bound);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  set_nonblocking(fd);
  int unix_fd = -1;
  if (!options.same_host_address.empty()) {
    auto named = sa;
    named.sin_port = bound.sin_port;
    unix_fd = listen_same_host(named);
  }
  return std::unique_ptr<front_door>(
    new front_door(fd, unix_fd, ntohs(bound.sin_port), std::move(options)));
}

front_door::front_door(int fd, int unix_fd, uint16_t port, front_door_options options)
    : fd_(fd), unix_fd_(unix_fd), stop_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)), port_(port),
      opts_(std::move(options)) {
  thread_ = std::thread{[this] { run(); }};
}

front_door::~front_door() {
  uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(stop_fd_, &one, sizeof(one));
  thread_.join();
  ::close(fd_);
  if (unix_fd_ >= 0)
    ::close(unix_fd_);
  ::close(stop_fd_);
}

void front_door::run() {
  std::list<pending> conns;
  auto reject = [&](pending& c, handshake_failure why, const std::string& what) {
    if (opts_.on_reject)
      opts_.on_reject(why, c.from, what);
    ::close(c.fd);
    c.fd = -1;
  };
  for (;;) {
    // Expired handshakes first.
    auto now = clock::now();
    for (auto& c : conns)
      if (c.fd >= 0 && now >= c.deadline)
        reject(c, handshake_failure::timeout, "no complete handshake within "
                                                + std::to_string(opts_.handshake_timeout.count())
                                                + " ms");
    conns.remove_if([](const pending& c) { return c.fd < 0; });

    std::vector<pollfd> fds;
    fds.push_back({stop_fd_, POLLIN, 0});
    fds.push_back({fd_, POLLIN, 0});
    fds.push_back({unix_fd_, POLLIN, 0}); // poll() skips a negative fd
    for (auto& c : conns)
      fds.push_back({c.fd, static_cast<short>(c.out.empty() ? POLLIN : POLLOUT), 0});
    int wait_ms = 1000;
    for (auto& c : conns)
      wait_ms = std::min<int>(
        wait_ms, static_cast<int>(std::max<long long>(
                   0, std::chrono::ceil<std::chrono::milliseconds>(c.deadline - now).count())));
    if (::poll(fds.data(), fds.size(), wait_ms) < 0 && errno != EINTR)
      break;
    if (fds[0].revents & POLLIN)
      break;
    // Connections accepted below were not polled this round: only the
    // first `polled` have an entry in fds.
    const size_t polled = conns.size();
    auto accept_all = [&](int listen_fd, bool same_host) {
      for (;;) {
        sockaddr_storage peer{};
        socklen_t len = sizeof(peer);
        int c = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&peer), &len,
                          SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (c < 0)
          break;
        std::string from = same_host ? "same-host door" : to_string(peer);
        if (conns.size() >= opts_.max_pending) {
          if (opts_.on_reject)
            opts_.on_reject(handshake_failure::refused, from,
                            "too many handshakes in progress ("
                              + std::to_string(opts_.max_pending) + ")");
          ::close(c);
          continue;
        }
        auto offered = opts_.worker_address;
        if (same_host) {
          // The kernel's word on who connected, before reading a byte.
          auto cred = credentials_of(c);
          auto why_not = cred ? why_not_same_host(*cred) : error_message(cred.error());
          if (cred)
            from += " (" + describe(*cred) + ")";
          if (!why_not.empty()) {
            if (opts_.on_reject)
              opts_.on_reject(handshake_failure::refused, from,
                              "not the same host and uid: " + why_not);
            ::close(c);
            continue;
          }
          offered = pack_worker_addresses(opts_.worker_address, opts_.same_host_address);
        } else {
          int one = 1;
          ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        }
        auto session = random_session();
        pending p{c, from, clock::now() + opts_.handshake_timeout,
                  handshake{handshake::role::server, opts_.secret,
                            handshake_offer{opts_.id, std::move(offered), session}},
                  session, {}, {}, false};
        p.same_host = same_host;
        conns.push_back(std::move(p));
      }
    };
    if (fds[1].revents & POLLIN)
      accept_all(fd_, false);
    if (fds[2].revents & POLLIN)
      accept_all(unix_fd_, true);
    size_t i = 0;
    for (auto& c : conns) {
      if (i == polled)
        break;
      auto& pfd = fds[3 + i++];
      if (c.fd < 0 || pfd.revents == 0)
        continue;
      if (!c.out.empty()) {
        auto n = ::send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
          reject(c, handshake_failure::closed, "the peer closed the connection");
          continue;
        }
        if (n > 0)
          c.out.erase(c.out.begin(), c.out.begin() + n);
        if (c.out.empty() && c.finish_after_write) {
          // Done: the UCX endpoints carry everything from here on.
          ::close(c.fd);
          c.fd = -1;
        }
        continue;
      }
      std::byte buf[4096];
      auto n = ::recv(c.fd, buf, sizeof(buf), 0);
      if (n == 0 && !c.heard) { // a port probe: closed without a word, nothing to report
        ::close(c.fd);
        c.fd = -1;
        continue;
      }
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
        reject(c, handshake_failure::closed, "the peer closed the connection mid-handshake");
        continue;
      }
      if (n < 0)
        continue;
      c.heard = true;
      c.in.insert(c.in.end(), buf, buf + n);
      bool oversize = false;
      while (c.fd >= 0 && c.out.empty()) {
        auto body = take_frame(c.in, oversize);
        if (oversize) {
          reject(c, handshake_failure::oversize, "a declared handshake message over "
                                                   + std::to_string(max_handshake_message_bytes)
                                                   + " bytes");
          break;
        }
        if (!body)
          break;
        auto reply = c.hs.on_message(*body);
        if (!reply) {
          reject(c, c.hs.failure(), error_message(reply.error()));
          break;
        }
        if (c.hs.done()) {
          auto peer = c.hs.peer();
          if (c.same_host
              && !unpack_worker_addresses(c.hs.peer().worker_address, peer.worker_address,
                                          peer.same_host_address)) {
            reject(c, handshake_failure::malformed,
                   "a same-host handshake without both worker addresses");
            break;
          }
          if (!opts_.on_peer || !opts_.on_peer(peer, c.my_session, c.from)) {
            reject(c, handshake_failure::refused, "refused by this node");
            break;
          }
          c.finish_after_write = true;
        }
        c.out = framed(*reply);
      }
    }
    conns.remove_if([](const pending& c) { return c.fd < 0; });
  }
  for (auto& c : conns)
    if (c.fd >= 0)
      ::close(c.fd);
}

namespace {

/// The client side over a stream socket of `family` to `sa`: connects,
/// (same-host) checks the listener's credentials, runs the handshake.
caf::expected<handshake_peer> client_handshake(int family, const sockaddr* sa, socklen_t sa_len,
                                               const std::string& where, bool same_host,
                                               const std::string& secret, handshake_offer me,
                                               std::chrono::milliseconds timeout,
                                               handshake_failure* why) {
  auto refused = [why](handshake_failure f, const std::string& text) {
    if (why != nullptr)
      *why = f;
    return make_transport_error(transport_errc::unauthenticated, text);
  };
  const auto deadline = clock::now() + timeout;
  int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return make_transport_error(transport_errc::unavailable,
                                std::string{"front door: socket: "} + std::strerror(errno));
  struct closer {
    int fd;
    ~closer() { ::close(fd); }
  } guard{fd};
  if (family == AF_INET) {
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  auto wait = [&](short events) -> caf::error {
    for (;;) {
      auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - clock::now()).count();
      if (left <= 0)
        return make_transport_error(transport_errc::timeout,
                                    "connect to " + where + ": no handshake within "
                                      + std::to_string(timeout.count()) + " ms");
      pollfd p{fd, events, 0};
      int r = ::poll(&p, 1, static_cast<int>(left));
      if (r > 0)
        return {};
      if (r < 0 && errno != EINTR)
        return make_transport_error(transport_errc::peer_unreachable,
                                    "connect to " + where + ": " + std::strerror(errno));
    }
  };
  if (::connect(fd, sa, sa_len) != 0) {
    if (errno != EINPROGRESS)
      return make_transport_error(transport_errc::peer_unreachable,
                                  "connect to " + where + ": " + std::strerror(errno));
    if (auto err = wait(POLLOUT))
      return err;
    int soerr = 0;
    socklen_t len = sizeof(soerr);
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len);
    if (soerr != 0)
      return make_transport_error(transport_errc::peer_unreachable,
                                  "connect to " + where + ": " + std::strerror(soerr));
  }
  auto send_all = [&](const std::vector<std::byte>& body) -> caf::error {
    auto out = framed(body);
    size_t off = 0;
    while (off < out.size()) {
      auto n = ::send(fd, out.data() + off, out.size() - off, MSG_NOSIGNAL);
      if (n > 0) {
        off += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
        return make_transport_error(transport_errc::peer_unreachable,
                                    "connect to " + where + ": the peer closed the connection");
      if (auto err = wait(POLLOUT))
        return err;
    }
    return {};
  };
  std::vector<std::byte> in;
  auto recv_frame = [&]() -> caf::expected<std::vector<std::byte>> {
    for (;;) {
      bool oversize = false;
      if (auto body = take_frame(in, oversize))
        return std::move(*body);
      if (oversize)
        return refused(handshake_failure::oversize,
                       "handshake oversize: the server at " + where + " declared an oversized message");
      if (auto err = wait(POLLIN))
        return err;
      std::byte buf[4096];
      auto n = ::recv(fd, buf, sizeof(buf), 0);
      if (n == 0)
        return refused(handshake_failure::closed, "handshake closed: the node at " + where
                                                    + " closed the connection (wrong cluster secret?)");
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
        return make_transport_error(transport_errc::peer_unreachable,
                                    "connect to " + where + ": " + std::strerror(errno));
      if (n > 0)
        in.insert(in.end(), buf, buf + n);
    }
  };
  if (same_host) {
    // Whoever holds the name must be a process we would trust with our
    // memory anyway: a squatter of another uid learns nothing of ours.
    auto cred = credentials_of(fd);
    if (!cred)
      return refused(handshake_failure::refused, error_message(cred.error()));
    if (auto why_not = why_not_same_host(*cred); !why_not.empty())
      return refused(handshake_failure::refused, "the same-host door " + where + " is held by "
                                                   + describe(*cred)
                                                   + ", not the same host and uid: " + why_not);
  }
  handshake hs{handshake::role::client, secret, std::move(me)};
  if (auto err = send_all(hs.start()))
    return err;
  while (!hs.done()) {
    auto body = recv_frame();
    if (!body)
      return body.error();
    auto reply = hs.on_message(*body);
    if (!reply)
      return refused(hs.failure(), "node at " + where + ": " + error_message(reply.error()));
    if (!reply->empty())
      if (auto err = send_all(*reply))
        return err;
  }
  return hs.peer();
}

} // namespace

caf::expected<handshake_peer> front_door_connect(const sockaddr_in& sa, const std::string& secret,
                                                 handshake_offer me,
                                                 std::chrono::milliseconds timeout,
                                                 handshake_failure* why) {
  return client_handshake(AF_INET, reinterpret_cast<const sockaddr*>(&sa), sizeof(sa),
                          address_of(sa), false, secret, std::move(me), timeout, why);
}

caf::expected<handshake_peer>
front_door_connect_same_host(const sockaddr_in& sa, const std::string& secret, handshake_offer me,
                             std::span<const std::byte> local_address,
                             std::chrono::milliseconds timeout, handshake_failure* why) {
  sockaddr_un un{};
  auto len = same_host_socket(sa, un);
  me.worker_address = pack_worker_addresses(me.worker_address, local_address);
  auto hp = client_handshake(AF_UNIX, reinterpret_cast<const sockaddr*>(&un), len,
                             same_host_socket_name(sa), true, secret, std::move(me), timeout, why);
  if (!hp)
    return hp;
  auto both = std::move(hp->worker_address);
  if (!unpack_worker_addresses(both, hp->worker_address, hp->same_host_address)) {
    if (why != nullptr)
      *why = handshake_failure::malformed;
    return make_transport_error(transport_errc::unauthenticated,
                                "handshake malformed: the same-host door "
                                  + same_host_socket_name(sa)
                                  + " did not offer both worker addresses");
  }
  return hp;
}

} // namespace tessera::transport::detail
