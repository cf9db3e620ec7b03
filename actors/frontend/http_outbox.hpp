#pragma once
/// @file
/// http_outbox (internal to actors/frontend): the outgoing side of one HTTP
/// connection, shared between response-writing threads and the connection's
/// I/O strand. It holds the state of the response in progress, turns
/// send/start_stream/write/finish into wire bytes (status line, headers,
/// chunk framing), queues them with a byte cap, and keeps the on_close
/// callbacks. No Asio here: the connection (http_connection.hpp) derives from
/// it and supplies the two wake-ups that post work to its strand.
///
/// Response phases, per request (seq):
///
///   none --send--> complete
///   none --start_stream--> streaming --finish--> complete
///   any  --closed (client gone, overflow, stop)--> on_close callbacks run once
///
/// Callbacks are never run, nor destroyed, with the mutex held: they may hold
/// the last reference to an http_response, whose destructor locks it.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "actors/frontend/http_response.hpp"

namespace tessera::actors::frontend::detail {

/// One piece of output; pieces are written in queue order.
struct http_out_item {
  std::string bytes;
  /// The last piece of a response (may be empty, e.g. the end of a HEAD
  /// stream): when written, the connection reads the next request or closes.
  bool ends_response = false;
  /// With ends_response: close the connection (lingering) after it.
  bool close_after = false;
};

/// What the connection tells the outbox about a request it hands out.
struct http_request_info {
  bool head = false;       ///< HEAD: headers only, no body bytes.
  bool http11 = true;      ///< HTTP/1.1 (chunked streams) rather than 1.0.
  bool keep_alive = true;  ///< The client allows another request after this one.
};

/// The JSON error body of the server's own error responses, in the OpenAI
/// shape: {"error":{"message":...,"type":...,"param":null,"code":null}}.
[[nodiscard]] std::string http_json_error(std::string_view message, std::string_view type);

/// The reason phrase of `status` ("Payload Too Large"), "Unknown" if none.
[[nodiscard]] std::string_view http_reason(int status);

/// See the file comment. The response-side members are thread-safe; the
/// protected members are for the owning connection's strand.
class http_outbox {
public:
  /// `max_queued_bytes`: see http_server_options::max_queued_bytes.
  explicit http_outbox(std::size_t max_queued_bytes);
  virtual ~http_outbox();
  http_outbox(const http_outbox&) = delete;
  http_outbox& operator=(const http_outbox&) = delete;

  // The response side, for http_response number `seq` (any thread); the
  // semantics are http_response's.
  void send(uint64_t seq, int status, std::string content_type, std::string body,
            http_header_list extra_headers);
  void start_stream(uint64_t seq, int status, std::string content_type,
                    http_header_list extra_headers);
  [[nodiscard]] bool write(uint64_t seq, std::string chunk);
  void finish(uint64_t seq);
  void on_close(uint64_t seq, std::function<void()> f);
  [[nodiscard]] bool closed(uint64_t seq) const;
  /// Whether bytes queued here have not all reached the socket yet (and the
  /// connection is not closed).
  [[nodiscard]] bool unwritten() const;

  /// Response `seq` will never be completed by its owner (it was dropped, or
  /// the handler threw `what`): a 500 if nothing was sent yet, else the
  /// connection is closed. Its on_close callbacks are released unrun.
  void abandon(uint64_t seq, std::string_view what);

protected:
  /// Starts the response to the next request and returns its seq. Strand.
  uint64_t begin_response(http_request_info info);

  /// Queues the server's own error response (JSON body, then close). Strand,
  /// with no response in progress.
  void queue_error_response(int status, std::string_view message);

  /// Queues "100 Continue" (the client waits for it before sending a body).
  void queue_continue();

  /// Moves the queued pieces to the end of `out`. False (moving nothing)
  /// once closed: the connection is closing and writes nothing more. Strand.
  [[nodiscard]] bool take(std::deque<http_out_item>& out);

  /// `n` queued bytes reached the socket. Strand.
  void written(std::size_t n);

  /// Marks the connection closed; returns the on_close callbacks of the
  /// response in progress, for the caller to run without any lock. Strand.
  [[nodiscard]] std::vector<std::function<void()>> mark_closed();

  /// Asks the connection to take() and write soon, on its strand. Called
  /// with the mutex held; must only post.
  virtual void wake_flush() = 0;
  /// Asks the connection to close soon, on its strand (queue overflow, a
  /// stream abandoned). Called with the mutex held; must only post.
  virtual void wake_close() = 0;

private:
  enum class phase { none, streaming, complete };

  // Queues `item` and wakes the connection. Requires mu_.
  void push_locked(http_out_item item);
  // Ends the response in progress; returns its callbacks (to destroy
  // outside the lock). Requires mu_.
  std::vector<std::function<void()>> complete_locked();

  const std::size_t max_queued_bytes_;
  mutable std::mutex mu_;
  uint64_t seq_ = 0;                                   // guarded by mu_: the current response
  phase phase_ = phase::complete;                      // guarded by mu_: of response seq_
  http_request_info info_;                             // guarded by mu_
  bool closed_ = false;                                // guarded by mu_
  bool flush_posted_ = false;                          // guarded by mu_
  std::deque<http_out_item> pending_;                  // guarded by mu_
  std::size_t queued_bytes_ = 0;                       // guarded by mu_: pending + being written
  std::vector<std::function<void()>> on_close_;        // guarded by mu_
};

} // namespace tessera::actors::frontend::detail
