#pragma once
/// @file
/// http_connection (internal to actors/frontend, includes Asio and Beast):
/// one accepted socket running the cycle drawn in http_server.hpp, and the
/// state every connection of a server shares (http_server_core).
///
/// Threads: everything a connection does with its socket, parser, buffers
/// and timers runs on its strand. Other threads reach it only through the
/// http_outbox members (mutex) and by posting to the strand.
///
/// Lifetime: a connection is owned by its pending operations' handlers and
/// by the http_response objects handed out for it; it owns a reference to
/// the core, so the io_context outlives every socket even when a response
/// outlives the server.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
// GCC 12 with -fsanitize=undefined (the asan preset) reports a false
// -Wmaybe-uninitialized inside Beast 1.74's parser (the boost::optional
// content length in basic_parser::put); it is Boost's code, not ours.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#pragma GCC diagnostic pop
#include <boost/beast/http/string_body.hpp>

#include "actors/frontend/http_outbox.hpp"
#include "actors/frontend/http_server.hpp"

namespace tessera::actors::frontend::detail {

class http_connection;

/// What the server, its acceptor and its connections share. Created by
/// http_server::start; outlives them all (shared_ptr).
struct http_server_core : std::enable_shared_from_this<http_server_core> {
  http_server_core(http_server_options opts, http_handler h);

  boost::asio::io_context ioc;
  /// Keeps run() from returning while the server runs; reset by stop().
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work;
  /// Accepts on its own strand; only touched there after start.
  boost::asio::ip::tcp::acceptor acceptor;
  /// Delays the next accept after an error such as EMFILE (acceptor strand).
  boost::asio::steady_timer accept_retry;
  const http_server_options options;
  const http_handler handler;

  std::mutex mu;
  bool stopping = false;                                                   // guarded by mu
  uint64_t next_connection_id = 0;                                         // guarded by mu
  std::unordered_map<uint64_t, std::weak_ptr<http_connection>> connections; // guarded by mu
};

/// One connection; see the file comment.
class http_connection final : public http_outbox,
                              public std::enable_shared_from_this<http_connection> {
public:
  /// `socket` is connected; its executor must be a strand of core->ioc.
  http_connection(std::shared_ptr<http_server_core> core, boost::asio::ip::tcp::socket socket,
                  uint64_t id);
  ~http_connection() override;

  /// Begins reading requests (posts to the strand). Any thread, once.
  void start();

  /// Closes the connection soon, on its strand (on_close callbacks run
  /// there). Any thread.
  void post_close();

private:
  enum class state { reading, responding, lingering, closed };

  void wake_flush() override;
  void wake_close() override;

  void read_request();
  void on_header(boost::system::error_code ec);
  void on_body(boost::system::error_code ec);
  void on_read_error(boost::system::error_code ec);
  void dispatch_request();
  void watch();
  void on_watch(boost::system::error_code ec, std::size_t n);
  void flush();
  void write_next();
  void on_write(boost::system::error_code ec, std::size_t n);
  void advance(std::size_t n);
  void on_response_written(bool close_after);
  void begin_linger();
  void arm_timer(std::chrono::milliseconds after);
  void on_timer(boost::system::error_code ec);
  void on_write_timer(boost::system::error_code ec);
  void close();

  // Declared first so it is destroyed last: the socket and timers need the
  // io_context it owns.
  std::shared_ptr<http_server_core> core_;
  boost::asio::ip::tcp::socket socket_;
  boost::asio::steady_timer timer_;       // idle (reading) or linger deadline
  boost::asio::steady_timer write_timer_; // no-progress deadline of a write
  const uint64_t id_;
  std::string remote_;

  // Strand only.
  state state_ = state::reading;
  boost::beast::flat_buffer buffer_; // bytes read, not yet parsed
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  bool read_pending_ = false;
  bool write_pending_ = false;
  std::deque<http_out_item> writing_; // taken from the outbox, being written
  std::size_t write_offset_ = 0;      // bytes of writing_.front() already written
};

} // namespace tessera::actors::frontend::detail
