#pragma once
/// @file
/// Loopback sockets for tests: a free port, a raw TCP client that sends
/// bytes as a stray or hostile process would, and a one-connection-at-a-time
/// HTTP server whose answers a test writes itself.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include <netinet/in.h>

namespace tessera::test {

/// 127.0.0.1:`port` as a socket address.
[[nodiscard]] sockaddr_in loopback_address(uint16_t port);

/// A TCP port on 127.0.0.1 that was free a moment ago (bound, closed),
/// outside the kernel's ephemeral range (so no connect() elsewhere takes
/// it before the test listens), that no earlier call in this process
/// returned and that no other test process holds (a lock on the port's
/// byte of $TMPDIR/tessera-test-ports.lock, released when the process ends).
[[nodiscard]] uint16_t free_port();

/// Connects to 127.0.0.1:`port`, sends `bytes`, then waits up to `linger`
/// for the other side to hang up, and closes. False if it could not
/// connect or send.
[[nodiscard]] bool raw_send(uint16_t port, const std::vector<uint8_t>& bytes,
                            std::chrono::milliseconds linger);

/// A listener on 127.0.0.1 (a free_port()) whose thread, until destroyed,
/// accepts one connection at a time, reads the request head (up to the
/// blank line, or until the client stops sending), calls answer(connection)
/// to write whatever the test wants back, and closes it. An answer that
/// writes for long should check stopping().
class loopback_http_server {
public:
  explicit loopback_http_server(std::function<void(int connection)> answer);
  ~loopback_http_server();
  loopback_http_server(const loopback_http_server&) = delete;
  loopback_http_server& operator=(const loopback_http_server&) = delete;

  [[nodiscard]] uint16_t port() const { return port_; }
  [[nodiscard]] bool stopping() const { return stop_; }

private:
  void serve();

  std::function<void(int)> answer_;
  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

} // namespace tessera::test
