#pragma once
/// @file
/// Loopback sockets for tests: a free port, and a raw TCP client that
/// sends bytes as a stray or hostile process would.

#include <chrono>
#include <cstdint>
#include <vector>

#include <netinet/in.h>

namespace tessera::test {

/// 127.0.0.1:`port` as a socket address.
[[nodiscard]] sockaddr_in loopback_address(uint16_t port);

/// A TCP port on 127.0.0.1 that was free a moment ago (bound, read,
/// closed), and that no earlier call in this process returned.
[[nodiscard]] uint16_t free_port();

/// Connects to 127.0.0.1:`port`, sends `bytes`, then waits up to `linger`
/// for the other side to hang up, and closes. False if it could not
/// connect or send.
[[nodiscard]] bool raw_send(uint16_t port, const std::vector<uint8_t>& bytes,
                            std::chrono::milliseconds linger);

} // namespace tessera::test
