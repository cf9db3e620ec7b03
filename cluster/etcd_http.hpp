#pragma once
/// @file
/// The HTTP/1.1 exchange under etcd_client and etcd_watch (internal to
/// cluster/): one POST on a fresh connection, every step against a
/// deadline, the reply's header and body bounded. Boost.Beast stays inside
/// etcd_http.cpp.

#include <chrono>
#include <memory>
#include <string>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "cluster/etcd_client.hpp"

namespace tessera::cluster::detail {

using etcd_clock = std::chrono::steady_clock;

/// One POST to one etcd endpoint and its reply.
class etcd_http {
public:
  /// `max_body`: most bytes of a whole (unary) body or of what is waiting
  /// unread of a stream.
  etcd_http(etcd_endpoint ep, size_t max_body);
  ~etcd_http();
  etcd_http(const etcd_http&) = delete;
  etcd_http& operator=(const etcd_http&) = delete;

  /// Connects, sends POST `path` with the JSON `body` and reads the
  /// reply's header, all before `deadline`. Errors (caf::sec::runtime_error)
  /// name the endpoint and the step.
  [[nodiscard]] caf::error start(const std::string& path, const std::string& body, etcd_clock::time_point deadline);
  /// The reply's HTTP status (after start).
  [[nodiscard]] int status() const;
  /// Whether the reply's body comes in chunks (a stream: /v3/watch).
  [[nodiscard]] bool chunked() const;
  /// The whole body, read before `deadline`. Errors: the deadline, a body
  /// over max_body, a broken connection.
  [[nodiscard]] caf::expected<std::string> read_body(etcd_clock::time_point deadline);
  /// Streams: appends to `out` what arrives before `deadline` (perhaps
  /// nothing). Errors: the stream ended (etcd closed it) or broke. A read
  /// still pending at the deadline goes on at the next call.
  [[nodiscard]] caf::error read_some(std::string& out, etcd_clock::time_point deadline);

  [[nodiscard]] const etcd_endpoint& endpoint() const { return ep_; }

  class impl;

private:
  etcd_endpoint ep_;
  std::unique_ptr<impl> impl_;
};

/// A unary call: POST `path` with `body` to `ep`, the reply's body if its
/// status is 200. Errors: the exchange's, or a gateway error reply
/// ({"error": ..., "message": ...}) with the gateway's message.
[[nodiscard]] caf::expected<std::string> etcd_post(const etcd_endpoint& ep, const std::string& path,
                                                   const std::string& body, std::chrono::milliseconds timeout,
                                                   size_t max_body);

/// "etcd <url>: <what>" as a caf::sec::runtime_error.
[[nodiscard]] caf::error etcd_error(const etcd_endpoint& ep, const std::string& what);

} // namespace tessera::cluster::detail
