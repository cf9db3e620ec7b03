#pragma once
/// @file
/// The HTTP/1.1 client of `tessera bench serve` and `tessera bench trace`
/// (Boost.Beast + Asio, kept out of this header): a one-shot request for
/// /health and /v1/models, and many keep-alive connections driven on one
/// thread, streaming POSTs and handing each response body to an observer
/// as it arrives. Two ways to drive them: closed loop (run_stream_clients:
/// C connections, each sends its next request when the last one ended) and
/// open loop (run_open_loop: each request at its own time, on an idle
/// connection or a new one, however many are still in flight).
///
/// Each exchange on a connection:
///
///   a request (closed loop: next_request; open loop: its send time)
///        |
///        v
///   connect (if not connected) --> write --> read header --> read body ...
///        ^                                      |  on_response   |  on_body per piece
///        |                                      v                v
///        +------------- on_complete("") <------ body complete (keep-alive)
///        +------------- on_complete(error) <--- any failure or timeout
///                                               (the socket is closed and
///                                               reconnected for the next one)

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <caf/expected.hpp>

namespace tessera::bench {

/// Where a server is, from "http://host:port[/prefix]".
struct http_endpoint {
  /// Host name or address (IPv6 without brackets).
  std::string host;
  /// TCP port. Default: 80.
  uint16_t port = 80;
  /// Path prefix every target is appended to, "" or "/prefix" (no trailing '/').
  std::string base_path;
};

/// Parses "http://host[:port][/prefix]" ("[::1]" for IPv6). Errors
/// (caf::sec::invalid_argument) name the URL and what is wrong: another
/// scheme (https is not supported), no host, a bad port.
[[nodiscard]] caf::expected<http_endpoint> parse_http_url(std::string_view url);

/// The status and body of a complete response.
struct http_reply {
  int status = 0;
  std::string body;
};

/// Sends one request (`method` "GET" or "POST"; `body` sent as JSON when
/// not empty) on a new connection and waits for the whole response, at most
/// `timeout`. Errors (caf::sec::runtime_error): resolve, connect, I/O and
/// timeout failures, naming the endpoint. `authorization`, when not empty,
/// is sent as the Authorization header.
[[nodiscard]] caf::expected<http_reply> http_fetch(const http_endpoint& ep, const std::string& method,
                                                   const std::string& target, const std::string& body,
                                                   std::chrono::milliseconds timeout,
                                                   const std::string& authorization = {});

/// A POST a stream connection sends: the target (appended to the
/// endpoint's base_path) and a JSON body.
struct http_post {
  std::string target;
  std::string body;
  /// The Authorization header's value (e.g. "Bearer sk-..."); empty: none.
  std::string authorization;
};

/// Decides what stream connections send and receives what they get. All
/// calls are made on the thread that runs run_stream_clients, one at a time.
class http_stream_observer {
public:
  virtual ~http_stream_observer() = default;
  /// The next request for connection `conn` (0-based), or nullopt to close
  /// it. Called when the connection is free, right before connecting (if
  /// needed) and writing: a caller that notes the time here measures from
  /// the send.
  virtual std::optional<http_post> next_request(int conn) = 0;
  /// The status line and header fields of the response arrived.
  virtual void on_response(int conn, int status) = 0;
  /// Body bytes (chunked encoding removed) as they arrive; for a body with
  /// Content-Length, all of it once complete.
  virtual void on_body(int conn, std::string_view bytes) = 0;
  /// The exchange ended: `error` empty when the response was complete, else
  /// what failed ("connect: Connection refused", "read: timeout", ...).
  virtual void on_complete(int conn, const std::string& error) = 0;
};

/// Options of run_stream_clients.
struct stream_client_options {
  /// Connections, each with one request in flight at a time. Default: 1.
  int connections = 1;
  /// Longest wait for any one step (connect, write, the next bytes of the
  /// response); past it the exchange fails with "timeout". Default: 120 s.
  std::chrono::milliseconds io_timeout{120'000};
};

/// Runs the connections on the calling thread until every one of them was
/// given nullopt by next_request. Errors (caf::sec::runtime_error): the
/// host cannot be resolved (before any request is asked for).
[[nodiscard]] caf::error run_stream_clients(const http_endpoint& ep, const stream_client_options& opts,
                                            http_stream_observer& observer);

/// Decides what an open-loop run sends and receives what it gets. All calls
/// are made on the thread that runs run_open_loop, one at a time; `index`
/// is the request's position in the schedule.
class http_open_loop_observer {
public:
  virtual ~http_open_loop_observer() = default;
  /// Request `index`, asked for at its send time right before it is written
  /// (so building a large body costs no memory before then, and a caller
  /// that notes the time here measures from the send); nullopt to send
  /// nothing more (the run ends when the requests in flight have).
  virtual std::optional<http_post> make_request(size_t index) = 0;
  /// The status line and header fields of request `index`'s response arrived.
  virtual void on_response(size_t index, int status) = 0;
  /// Body bytes of request `index` (chunked encoding removed) as they arrive.
  virtual void on_body(size_t index, std::string_view bytes) = 0;
  /// Request `index` ended: `error` empty when its response was complete.
  virtual void on_complete(size_t index, const std::string& error) = 0;
  /// Called about every open_loop_options::tick while the run lasts (for
  /// progress lines). Default: nothing.
  virtual void on_tick() {}
};

/// Options of run_open_loop.
struct open_loop_options {
  /// Longest wait for any one step of an exchange (connect, write, the next
  /// bytes of the response); past it the exchange fails with "timeout".
  /// Default: 120 s.
  std::chrono::milliseconds io_timeout{120'000};
  /// How often on_tick is called. Default: 1 s.
  std::chrono::milliseconds tick{1000};
  /// A connection idle this long is closed rather than reused (servers
  /// close idle keep-alive connections; `tessera serve` after 60 s).
  /// Default: 20 s.
  std::chrono::milliseconds max_idle{20'000};
};

/// What an open-loop run did with its connections.
struct open_loop_stats {
  /// Connections opened (each at most once at a time).
  size_t connections_opened = 0;
  /// Most requests in flight at once.
  size_t peak_in_flight = 0;
  /// Requests sent (all of them unless make_request said stop).
  size_t sent = 0;
};

/// Sends request i (0 <= i < send_at.size()) at `send_at[i]` after the
/// start (non-decreasing offsets; a request whose time has passed is sent
/// at once, in order), on an idle keep-alive connection or a new one, and
/// runs on the calling thread until every request sent has ended and none
/// is left to send. Requests in
/// flight are not bounded: open loop (mind the process's open-file limit).
/// Errors (caf::sec::runtime_error): the host cannot be resolved (before any
/// request is asked for).
[[nodiscard]] caf::expected<open_loop_stats> run_open_loop(const http_endpoint& ep, const open_loop_options& opts,
                                                           std::span<const std::chrono::nanoseconds> send_at,
                                                           http_open_loop_observer& observer);

} // namespace tessera::bench
