#include "actors/frontend/http_connection.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <exception>
#include <iterator>
#include <utility>
#include <vector>

#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>

namespace tessera::actors::frontend::detail {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using boost::system::error_code;
using tcp = asio::ip::tcp;

namespace {

// How long a closing connection drains the client's input (see
// http_server.hpp, "lingering").
constexpr std::chrono::milliseconds linger_time{2'000};
// Bytes asked of each read while watching for a disconnect: small, since
// thousands of streams each keep one posted (pipelined bytes take several).
constexpr std::size_t watch_read_bytes = 1 << 10;
// Bytes asked of each read while discarding input before a close.
constexpr std::size_t linger_read_bytes = 16 << 10;
// Buffers gathered into one write.
constexpr std::size_t max_write_buffers = 64;

std::string endpoint_text(const tcp::endpoint& ep) {
  auto addr = ep.address().to_string();
  if (ep.address().is_v6())
    addr = "[" + addr + "]";
  return addr + ":" + std::to_string(ep.port());
}

bool is_http_error(const error_code& ec) {
  return ec.category() == http::make_error_code(http::error::bad_method).category();
}

} // namespace

http_server_core::http_server_core(http_server_options opts, http_handler h)
  : work(std::in_place, ioc.get_executor()),
    acceptor(asio::make_strand(ioc)),
    accept_retry(acceptor.get_executor()),
    options(std::move(opts)),
    handler(std::move(h)) {}

http_connection::http_connection(std::shared_ptr<http_server_core> core, tcp::socket socket,
                                 uint64_t id)
  : http_outbox(core->options.max_queued_bytes),
    core_(std::move(core)),
    socket_(std::move(socket)),
    timer_(socket_.get_executor()),
    write_timer_(socket_.get_executor()),
    id_(id) {
  error_code ec;
  auto ep = socket_.remote_endpoint(ec);
  remote_ = ec ? "unknown" : endpoint_text(ep);
}

http_connection::~http_connection() = default;

void http_connection::start() {
  asio::post(socket_.get_executor(), [self = shared_from_this()] {
    if (self->state_ == state::closed)
      return; // stop() got here first
    self->arm_timer(self->core_->options.idle_timeout);
    self->read_request();
  });
}

void http_connection::post_close() {
  asio::post(socket_.get_executor(), [self = shared_from_this()] { self->close(); });
}

void http_connection::wake_flush() {
  asio::post(socket_.get_executor(), [self = shared_from_this()] { self->flush(); });
}

void http_connection::wake_close() {
  post_close();
}

void http_connection::read_request() {
  state_ = state::reading;
  parser_.emplace();
  parser_->header_limit(static_cast<std::uint32_t>(
    std::min<std::size_t>(core_->options.max_header_bytes, UINT32_MAX)));
  parser_->body_limit(core_->options.max_body_bytes);
  read_pending_ = true;
  http::async_read_header(socket_, buffer_, *parser_,
                          [self = shared_from_this()](error_code ec, std::size_t) {
                            self->on_header(ec);
                          });
}

void http_connection::on_header(error_code ec) {
  read_pending_ = false;
  if (state_ == state::closed)
    return;
  if (ec)
    return on_read_error(ec);
  const auto& req = parser_->get();
  // Clients that sent "Expect: 100-continue" wait (curl: 1 s) for this before
  // the body; a body over the limit was refused above without it.
  if (req.version() >= 11 && !parser_->is_done() &&
      boost::beast::iequals(req[http::field::expect], "100-continue"))
    queue_continue();
  if (parser_->is_done())
    return on_body({});
  read_pending_ = true;
  http::async_read(socket_, buffer_, *parser_,
                   [self = shared_from_this()](error_code ec2, std::size_t) {
                     self->on_body(ec2);
                   });
}

void http_connection::on_body(error_code ec) {
  read_pending_ = false;
  if (state_ == state::closed)
    return;
  if (ec)
    return on_read_error(ec);
  timer_.cancel();
  state_ = state::responding;
  dispatch_request();
}

void http_connection::on_read_error(error_code ec) {
  const auto& o = core_->options;
  std::string message;
  int status = 0;
  if (ec == http::error::body_limit) {
    status = 413;
    message = "request body is larger than " + std::to_string(o.max_body_bytes) + " bytes";
  } else if (ec == http::error::header_limit) {
    status = 431;
    message = "request header is larger than " + std::to_string(o.max_header_bytes) + " bytes";
  } else if (is_http_error(ec) && ec != http::error::end_of_stream &&
             ec != http::error::partial_message) {
    status = 400;
    message = "malformed HTTP request: " + ec.message();
  } else {
    // The client left (or timed out) between or inside requests: nobody to
    // tell.
    return close();
  }
  timer_.cancel();
  state_ = state::responding;
  queue_error_response(status, message);
}

void http_connection::dispatch_request() {
  auto msg = parser_->release();
  parser_.reset();
  http_request_info info;
  info.head = msg.method() == http::verb::head;
  info.http11 = msg.version() >= 11;
  info.keep_alive = msg.keep_alive();

  http_request req;
  req.method = std::string(msg.method_string());
  req.target = std::string(msg.target());
  req.headers.reserve(static_cast<std::size_t>(std::distance(msg.begin(), msg.end())));
  for (const auto& field : msg)
    req.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  req.body = std::move(msg.body());
  req.remote = remote_;

  // The read buffer keeps the capacity of the largest request read (a 1 MiB
  // prompt: 1 MiB); give it back for the life of the stream.
  buffer_.shrink_to_fit();

  uint64_t seq = begin_response(info);
  // Watch the socket while the handler works, so a client that leaves is
  // noticed even when nothing is being written to it.
  watch();
  // A copy goes to the handler: this one outlives it, so a throwing
  // handler is reported as such, not as a dropped response.
  auto response = std::make_shared<http_response>(shared_from_this(), seq);
  try {
    core_->handler(std::move(req), response);
  } catch (...) {
    // Handlers should not throw; if one does, the client gets a 500 (or a
    // cut-off stream) and the exception stops here, not in the io_context.
    abandon(seq, "internal error in the request handler");
  }
}

void http_connection::watch() {
  const auto& o = core_->options;
  if (read_pending_ || state_ == state::closed)
    return;
  // Pipelined requests wait in buffer_; past this much, stop reading (a
  // disconnect then shows as a failed write).
  if (buffer_.size() >= o.max_header_bytes + o.max_body_bytes)
    return;
  read_pending_ = true;
  socket_.async_read_some(buffer_.prepare(watch_read_bytes),
                          [self = shared_from_this()](error_code ec, std::size_t n) {
                            self->on_watch(ec, n);
                          });
}

void http_connection::on_watch(error_code ec, std::size_t n) {
  read_pending_ = false;
  if (state_ == state::closed)
    return;
  if (ec == asio::error::operation_aborted && state_ == state::reading)
    return read_request(); // cancelled by on_response_written
  if (ec)
    return close(); // eof or reset: the client is gone
  buffer_.commit(n);
  switch (state_) {
    case state::responding:
      return watch();
    case state::reading:
      return read_request(); // the response finished while this read was out
    case state::lingering:
      buffer_.clear();
      read_pending_ = true;
      socket_.async_read_some(buffer_.prepare(linger_read_bytes),
                              [self = shared_from_this()](error_code ec2, std::size_t n2) {
                                self->on_watch(ec2, n2);
                              });
      return;
    case state::closed:
      return;
  }
}

void http_connection::flush() {
  if (state_ == state::closed)
    return;
  if (!take(writing_))
    return; // closing: wake_close posted the close
  if (!write_pending_)
    write_next();
}

void http_connection::write_next() {
  advance(0); // pops finished (e.g. empty end-of-response) pieces
  if (state_ == state::closed || writing_.empty() || write_pending_)
    return;
  std::array<asio::const_buffer, max_write_buffers> buffers;
  std::size_t count = 0;
  std::size_t offset = write_offset_;
  for (const auto& item : writing_) {
    if (count == buffers.size())
      break;
    if (item.bytes.size() > offset)
      buffers[count++] = asio::buffer(item.bytes.data() + offset, item.bytes.size() - offset);
    offset = 0;
  }
  write_pending_ = true;
  write_timer_.expires_after(core_->options.write_timeout);
  write_timer_.async_wait([self = shared_from_this()](error_code ec) { self->on_write_timer(ec); });
  socket_.async_write_some(std::vector<asio::const_buffer>(buffers.begin(), buffers.begin() + count),
                           [self = shared_from_this()](error_code ec, std::size_t n) {
                             self->on_write(ec, n);
                           });
}

void http_connection::on_write(error_code ec, std::size_t n) {
  write_pending_ = false;
  write_timer_.cancel();
  if (state_ == state::closed)
    return;
  if (ec)
    return close();
  written(n);
  advance(n);
  if (state_ == state::closed)
    return;
  if (!take(writing_))
    return;
  write_next();
}

void http_connection::advance(std::size_t n) {
  while (!writing_.empty()) {
    auto& front = writing_.front();
    std::size_t left = front.bytes.size() - write_offset_;
    if (n < left) {
      write_offset_ += n;
      return;
    }
    n -= left;
    bool ends = front.ends_response;
    bool close_after = front.close_after;
    writing_.pop_front();
    write_offset_ = 0;
    if (ends) {
      on_response_written(close_after);
      if (state_ == state::closed)
        return;
    }
  }
}

void http_connection::on_response_written(bool close_after) {
  if (close_after)
    return begin_linger();
  state_ = state::reading;
  arm_timer(core_->options.idle_timeout);
  if (!read_pending_)
    return read_request();
  // A watch read is still out; on_watch starts parsing when it returns. If a
  // pipelined request already waits in buffer_, it may never return (the
  // client waits for us): cancel it. Nothing else is pending on the socket
  // now (this response's last write just completed).
  if (buffer_.size() > 0) {
    error_code ignored;
    socket_.cancel(ignored);
  }
}

void http_connection::begin_linger() {
  // Closing with unread input would make the kernel send a reset, which can
  // reach the client before it has read the response: shut down our side,
  // then discard (not store) what still arrives, until EOF or linger_time.
  state_ = state::lingering;
  error_code ignored;
  socket_.shutdown(tcp::socket::shutdown_send, ignored);
  arm_timer(linger_time);
  // With a watch read still out, on_watch drains when it returns.
  if (!read_pending_) {
    buffer_.clear();
    read_pending_ = true;
    socket_.async_read_some(buffer_.prepare(linger_read_bytes),
                            [self = shared_from_this()](error_code ec, std::size_t n) {
                              self->on_watch(ec, n);
                            });
  }
}

void http_connection::arm_timer(std::chrono::milliseconds after) {
  timer_.expires_after(after);
  timer_.async_wait([self = shared_from_this()](error_code ec) { self->on_timer(ec); });
}

void http_connection::on_timer(error_code ec) {
  // A cancelled or re-armed timer may still deliver success: check both the
  // state and that the deadline really passed.
  if (ec || state_ == state::closed || timer_.expiry() > asio::steady_timer::clock_type::now())
    return;
  if (state_ == state::reading || state_ == state::lingering)
    close();
}

void http_connection::on_write_timer(error_code ec) {
  if (ec || !write_pending_ || state_ == state::closed ||
      write_timer_.expiry() > asio::steady_timer::clock_type::now())
    return;
  close(); // the client stopped reading
}

void http_connection::close() {
  if (state_ == state::closed)
    return;
  state_ = state::closed;
  timer_.cancel();
  write_timer_.cancel();
  error_code ignored;
  socket_.shutdown(tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  // writing_ and buffer_ stay until the aborted operations return: they may
  // still refer to them.
  auto callbacks = mark_closed();
  {
    std::lock_guard lock(core_->mu);
    core_->connections.erase(id_);
  }
  for (auto& f : callbacks) {
    try {
      if (f)
        f();
    } catch (...) {
      // An on_close callback must not take the I/O thread down.
    }
  }
}

} // namespace tessera::actors::frontend::detail
