#pragma once
/// @file
/// http_server: an asynchronous HTTP/1.1 server (Boost.Beast + Asio, kept out
/// of this header). A small fixed pool of threads runs one io_context, so
/// thousands of open streams cost sockets and buffers, not threads. Serves
/// keep-alive and pipelined requests in order, bounded request sizes,
/// streamed (chunked, server-sent events) responses written from any thread,
/// and reports a client that goes away while its response is in progress.
///
/// Each connection runs this cycle:
///
///   accept --> reading --(request complete)--> responding --(response written)--+
///                ^  |                           |                               |
///                |  +-- bad request: 400/413/431, then lingering --> closed    |
///                |                              +-- client gone / stop --> closed
///                +------------------ keep-alive <-------------------------------+
///                                  (else lingering --> closed)
///
/// - reading: parses one request; closed after idle_timeout without one.
/// - responding: the handler has the request; the socket is still read so
///   that a disconnect is seen at once (on_close) even while nothing is being
///   written; pipelined bytes read meanwhile wait in a buffer (up to
///   max_header_bytes + max_body_bytes, then the server stops reading and a
///   disconnect shows only as a failed write).
/// - lingering: after a response that closes the connection, the write side
///   is shut down and input is discarded (not stored) for up to 2 s so the
///   client reads the response instead of a reset.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <caf/expected.hpp>

#include "actors/frontend/http_response.hpp"

namespace tessera::actors::frontend {

namespace detail {
struct http_server_core;
} // namespace detail

/// How an http_server listens and what it accepts.
struct http_server_options {
  /// Address or host name to listen on. Default: "127.0.0.1" (loopback only).
  std::string host = "127.0.0.1";
  /// TCP port; 0 picks a free one (see http_server::port). Default: 0.
  uint16_t port = 0;
  /// I/O threads running the io_context (handlers and on_close callbacks run
  /// on these). At least 1. Default: 1.
  int threads = 1;
  /// Largest request body, after de-chunking. A larger one is answered 413
  /// with a JSON error and the connection closed, without reading the rest
  /// into memory (a Content-Length above it is refused before any body byte
  /// is read). Default: 1 MiB.
  std::size_t max_body_bytes = std::size_t{1} << 20;
  /// Largest request line plus header fields; larger gets 431 and a close.
  /// Default: 16 KiB.
  std::size_t max_header_bytes = std::size_t{16} << 10;
  /// Most response bytes of one connection queued but not yet written to the
  /// socket. A write() that would pass it closes the connection (on_close
  /// runs, write returns false). send() bodies are not held to it.
  /// Default: 4 MiB.
  std::size_t max_queued_bytes = std::size_t{4} << 20;
  /// A connection without a complete request for this long (after accept, or
  /// after its previous response) is closed. Not applied while a response is
  /// in progress. Default: 60 s.
  std::chrono::milliseconds idle_timeout{60'000};
  /// A connection whose pending output makes no progress for this long (the
  /// client stopped reading) is closed (on_close runs). Default: 60 s.
  std::chrono::milliseconds write_timeout{60'000};
};

/// A running HTTP server. Not movable; own it through the unique_ptr start()
/// returns. start, port, url are for any thread; stop and the destructor
/// must not run on one of the server's I/O threads (from a handler or
/// on_close callback): they join those threads (asserted).
class http_server {
public:
  /// Binds, listens and starts the I/O threads; `handler` is called for
  /// every request (see http_handler). Errors (caf::sec::runtime_error)
  /// name host:port and the cause, e.g. "http: cannot listen on
  /// 127.0.0.1:8080: Address already in use".
  [[nodiscard]] static caf::expected<std::unique_ptr<http_server>>
  start(http_server_options options, http_handler handler);

  /// stop().
  ~http_server();
  http_server(const http_server&) = delete;
  http_server& operator=(const http_server&) = delete;

  /// The port listened on (the one picked when options.port was 0).
  [[nodiscard]] uint16_t port() const { return port_; }

  /// "http://host:port" for the bound address, e.g. "http://127.0.0.1:40123"
  /// ("http://[::1]:40123" for IPv6).
  [[nodiscard]] std::string url() const { return url_; }

  /// Stops accepting, gives the bytes already queued on open connections
  /// up to 1 s to reach their sockets (the last chunk and `[DONE]` of a
  /// stream that finished as the server stopped), closes every connection
  /// (on_close runs for each response in progress; later write() calls
  /// return false), and joins the I/O threads. Does not wait for streams
  /// to finish. Idempotent; thread-safe with itself.
  void stop();

private:
  explicit http_server(std::shared_ptr<detail::http_server_core> core);

  std::shared_ptr<detail::http_server_core> core_;
  std::vector<std::thread> threads_;
  std::mutex stop_mu_;
  uint16_t port_ = 0;
  std::string url_;
};

} // namespace tessera::actors::frontend
