#pragma once
/// @file
/// Probes of the network a node will use, for preflight checks and
/// `tessera check`: can this process listen on an endpoint, is a host
/// this machine, does a peer accept connections, and a minimal blocking
/// HTTP GET. Each call is bounded in time; none keeps a socket open.

#include <chrono>
#include <cstdint>
#include <string>

#include <caf/error.hpp>
#include <caf/expected.hpp>

namespace tessera::cluster {

/// Binds a TCP socket to host:port (with SO_REUSEADDR, as the servers
/// do) and listens, then closes it. An empty error when the port is free.
/// Errors (caf::sec::invalid_argument) say why in an operator's words:
/// "already in use by another process", "not an address of this machine",
/// "needs root (ports below 1024)", or the resolver's reason.
[[nodiscard]] caf::error try_listen(const std::string& host, uint16_t port);

/// Whether `host` names this machine: a loopback or wildcard address, or
/// one of its interfaces' addresses (getifaddrs). False when it does not
/// resolve.
[[nodiscard]] bool is_local_host(const std::string& host);

/// Opens a TCP connection to host:port and closes it at once. An empty
/// error when the peer accepted within `timeout`; else an error naming
/// the reason (refused, timed out, unreachable).
[[nodiscard]] caf::error try_connect(const std::string& host, uint16_t port, std::chrono::milliseconds timeout);

/// What an HTTP GET returned.
struct http_answer {
  int status = 0;
  std::string body;
};

/// GET http://host:port/path over HTTP/1.0 (the server closes the
/// connection after the answer). The whole exchange is bounded by
/// `timeout`; bodies beyond 1 MiB are cut. Errors name the endpoint.
[[nodiscard]] caf::expected<http_answer> http_get(const std::string& host, uint16_t port, const std::string& path,
                                                  std::chrono::milliseconds timeout);

} // namespace tessera::cluster
