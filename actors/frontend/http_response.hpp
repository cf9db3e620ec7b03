#pragma once
/// @file
/// What an HTTP handler sees: the request it was given and the response it
/// answers through, possibly later and from another thread, possibly as a
/// stream of chunks (server-sent events). Bytes only: no JSON, no CAF actors.
/// The server that produces these is in http_server.hpp.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessera::actors::frontend {

namespace detail {
class http_outbox;
} // namespace detail

/// Header fields as (name, value) pairs, in the order they were given.
using http_header_list = std::vector<std::pair<std::string, std::string>>;

/// One complete request, body included (at most
/// http_server_options::max_body_bytes; chunked request bodies are already
/// de-chunked). Owned by the handler it is passed to.
struct http_request {
  /// The method as sent, e.g. "GET", "POST".
  std::string method;
  /// The request target: path and query, e.g. "/v1/models?x=1".
  std::string target;
  /// Every header field as received (names as spelled by the client).
  http_header_list headers;
  /// The body, empty if none.
  std::string body;
  /// The client's address, "addr:port" ("[addr]:port" for IPv6).
  std::string remote;

  /// The value of the first header named `name` (ASCII case-insensitive), or
  /// nullopt. The view points into `headers`: valid while they are unchanged.
  [[nodiscard]] std::optional<std::string_view> header(std::string_view name) const;
};

/// The response to one request: either one complete body (send) or a stream
/// (start_stream, write..., finish).
///
/// Thread-safe: any thread may call any member, during the handler or later.
/// Calls from one thread take effect in the order made; the bytes are queued
/// and written by the connection's I/O thread. Nothing here blocks.
///
/// Lifetime: the handler receives it as a shared_ptr and may keep it (and
/// hand it to other threads) as long as it likes; it keeps the connection's
/// memory alive, not its socket. If the last reference goes before send() or
/// finish(): a response not yet started becomes a 500 with a JSON error body;
/// a started stream is cut off by closing the connection (the client sees a
/// truncated chunked body). on_close callbacks do not run in that case.
///
/// Misuse (send or start_stream twice, write or finish before start_stream,
/// a status outside 200-599, a header with CR/LF/NUL or one the server sets
/// itself) is a bug and aborts (TESSERA_ASSERT).
class http_response {
public:
  /// Made by the server for each request; handlers receive one.
  http_response(std::shared_ptr<detail::http_outbox> outbox, uint64_t seq);
  /// See the class comment: abandons the response if it is not complete.
  ~http_response();
  http_response(const http_response&) = delete;
  http_response& operator=(const http_response&) = delete;

  /// Sends a complete response with Content-Length. `extra_headers` must not
  /// name Content-Length, Transfer-Encoding or Connection (the server sets
  /// them). For HEAD requests the body is counted but not sent; for 204 and
  /// 304 it is dropped. No effect once closed().
  void send(int status, std::string content_type, std::string body,
            http_header_list extra_headers = {});

  /// Starts a streamed response: Transfer-Encoding: chunked (HTTP/1.1), or
  /// the raw bytes followed by a connection close (HTTP/1.0 clients). With
  /// content_type "text/event-stream" (SSE) the server adds
  /// "Cache-Control: no-cache" unless extra_headers has Cache-Control.
  /// The connection serves nothing else until finish(). No effect once closed().
  void start_stream(int status, std::string content_type, http_header_list extra_headers = {});

  /// Queues one chunk of the stream (e.g. "data: {...}\n\n"); an empty chunk
  /// is skipped. Returns false, queuing nothing, once closed(): the client is
  /// gone, the server stopped, the stream finished, or this write would have
  /// pushed the bytes queued for the client past
  /// http_server_options::max_queued_bytes (then the connection is closed:
  /// a client that reads slower than the stream is produced is dropped, not
  /// buffered without bound).
  bool write(std::string chunk);

  /// Ends the stream (the terminating zero-size chunk). Idempotent; no
  /// effect once closed().
  void finish();

  /// Runs `f` once if the connection closes (client disconnected, write
  /// failed or stalled, queue overflow, server stopped) before send() or
  /// finish() was called. Runs on an I/O thread and must not block; if the
  /// connection is already closed, runs at once on the calling thread. Once
  /// the response is complete, `f` is released without running (so `f` may
  /// hold a reference to this response). Several callbacks run in the order
  /// registered.
  void on_close(std::function<void()> f);

  /// True once write() would return false: the connection is closed or the
  /// response is complete.
  [[nodiscard]] bool closed() const;

private:
  std::shared_ptr<detail::http_outbox> outbox_;
  uint64_t seq_;
};

/// Called once per request, on an I/O thread, in the order requests arrive on
/// a connection (the next request on that connection is read only after this
/// response is complete). With more than one I/O thread, calls for different
/// connections may run at the same time. Must not block: respond now, or
/// keep the response and respond from any thread later. An exception
/// escaping it becomes a 500 (or closes a started stream).
using http_handler = std::function<void(http_request, std::shared_ptr<http_response>)>;

} // namespace tessera::actors::frontend
