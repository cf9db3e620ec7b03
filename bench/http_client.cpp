#include "bench/http_client.hpp"

#include <algorithm>
#include <functional>
#include <limits>
#include <memory>
#include <vector>

#include <caf/sec.hpp>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace tessera::bench {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;

caf::error bad_url(std::string_view url, const std::string& why) {
  return caf::make_error(caf::sec::invalid_argument, "bad URL '" + std::string{url} + "': " + why);
}

caf::error failed(const http_endpoint& ep, const std::string& why) {
  return caf::make_error(caf::sec::runtime_error,
                         "http://" + ep.host + ":" + std::to_string(ep.port) + ": " + why);
}

std::string host_field(const http_endpoint& ep) {
  const bool v6 = ep.host.find(':') != std::string::npos;
  return (v6 ? "[" + ep.host + "]" : ep.host) + ":" + std::to_string(ep.port);
}

/// What a client_connection reports; every call on the io_context's thread.
class connection_events {
public:
  virtual ~connection_events() = default;
  virtual void on_response(int status) = 0;
  virtual void on_body(std::string_view bytes) = 0;
  /// The exchange ended (`error` empty: the response was complete). The
  /// connection is free for the next send() from here on.
  virtual void on_complete(const std::string& error) = 0;
};

/// One keep-alive connection that sends one POST at a time and streams the
/// response body to its events (the exchange in the header's diagram). It
/// connects when asked to send while not connected, and closes itself after
/// a failure or a response that does not keep the connection alive. Every
/// handler runs on the io_context's single thread; the object must outlive
/// the io_context's run.
class client_connection {
public:
  client_connection(asio::io_context& ioc, const http_endpoint& ep, const tcp::resolver::results_type& addrs,
                    std::chrono::milliseconds io_timeout, connection_events& events)
      : ep_(ep), addrs_(addrs), io_timeout_(io_timeout), events_(events), stream_(ioc) {
    // Chunk bodies go to the events as they are parsed and are not stored
    // (the callback consumes all it is given). The parser keeps a reference
    // to this callback, so it is a member.
    on_chunk_ = [this](std::uint64_t, beast::string_view body, error_code&) -> std::size_t {
      events_.on_body(std::string_view{body.data(), body.size()});
      return body.size();
    };
  }

  /// Sends `post` (connecting first if needed); the outcome comes as events.
  void send(http_post post) {
    req_ = {};
    req_.method(http::verb::post);
    req_.target(ep_.base_path + post.target);
    req_.version(11);
    req_.set(http::field::host, host_field(ep_));
    req_.set(http::field::user_agent, "tessera-bench");
    req_.set(http::field::content_type, "application/json");
    req_.set(http::field::accept, "text/event-stream");
    if (!post.authorization.empty())
      req_.set(http::field::authorization, post.authorization);
    req_.keep_alive(true);
    req_.body() = std::move(post.body);
    req_.prepare_payload();
    if (connected_)
      return write();
    stream_.expires_after(io_timeout_);
    stream_.async_connect(addrs_, [this](const error_code& ec, const tcp::endpoint&) {
      if (ec)
        return fail("connect", ec);
      connected_ = true;
      stream_.socket().set_option(tcp::no_delay{true});
      write();
    });
  }

  /// Closes the socket (a no-op when it is not open). Only between exchanges.
  void close() {
    if (!connected_ && !stream_.socket().is_open())
      return;
    error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
    buffer_.clear();
    connected_ = false;
  }

  [[nodiscard]] bool connected() const { return connected_; }

private:
  void write() {
    stream_.expires_after(io_timeout_);
    http::async_write(stream_, req_, [this](const error_code& ec, std::size_t) {
      if (ec)
        return fail("write", ec);
      read_header();
    });
  }

  void read_header() {
    parser_.emplace();
    parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
    parser_->on_chunk_body(on_chunk_);
    stream_.expires_after(io_timeout_);
    http::async_read_header(stream_, buffer_, *parser_, [this](const error_code& ec, std::size_t) {
      if (ec)
        return fail("read", ec);
      events_.on_response(static_cast<int>(parser_->get().result_int()));
      read_body();
    });
  }

  void read_body() {
    if (parser_->is_done())
      return complete();
    stream_.expires_after(io_timeout_);
    http::async_read_some(stream_, buffer_, *parser_, [this](const error_code& ec, std::size_t) {
      if (ec)
        return fail("read", ec);
      read_body();
    });
  }

  void complete() {
    if (!parser_->chunked() && !parser_->get().body().empty())
      events_.on_body(parser_->get().body());
    const bool keep_alive = parser_->keep_alive();
    parser_.reset();
    if (!keep_alive)
      close();
    events_.on_complete("");
  }

  void fail(const char* what, const error_code& ec) {
    close();
    parser_.reset();
    events_.on_complete(std::string{what} + ": " + ec.message());
  }

  const http_endpoint& ep_;
  const tcp::resolver::results_type& addrs_;
  const std::chrono::milliseconds io_timeout_;
  connection_events& events_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  http::request<http::string_body> req_;
  std::optional<http::response_parser<http::string_body>> parser_;
  std::function<std::size_t(std::uint64_t, beast::string_view, error_code&)> on_chunk_;
  bool connected_ = false;
};

/// A closed-loop client: connection `index` asks the observer for its next
/// request whenever it is free (run_stream_clients).
class closed_loop_client final : public connection_events {
public:
  closed_loop_client(asio::io_context& ioc, int index, const http_endpoint& ep,
                     const tcp::resolver::results_type& addrs, const stream_client_options& opts,
                     http_stream_observer& obs)
      : index_(index), obs_(obs), conn_(ioc, ep, addrs, opts.io_timeout, *this) {}

  void start() {
    auto next = obs_.next_request(index_);
    if (!next) {
      conn_.close();
      return;
    }
    conn_.send(std::move(*next));
  }

  void on_response(int status) override { obs_.on_response(index_, status); }
  void on_body(std::string_view bytes) override { obs_.on_body(index_, bytes); }
  void on_complete(const std::string& error) override {
    obs_.on_complete(index_, error);
    start();
  }

private:
  const int index_;
  http_stream_observer& obs_;
  client_connection conn_;
};

/// An open-loop run (run_open_loop): a timer that sends each request at its
/// time on an idle connection (most recently used first) or a new one, and
/// a tick timer for progress and for closing connections idle too long.
class open_loop_run {
public:
  using clock_type = std::chrono::steady_clock;

  open_loop_run(asio::io_context& ioc, const http_endpoint& ep, const tcp::resolver::results_type& addrs,
                const open_loop_options& opts, std::span<const std::chrono::nanoseconds> send_at,
                http_open_loop_observer& obs)
      : ioc_(ioc), ep_(ep), addrs_(addrs), opts_(opts), send_at_(send_at), obs_(obs), send_timer_(ioc),
        tick_timer_(ioc), total_(send_at.size()) {}

  void start() {
    start_ = clock_type::now();
    if (send_at_.empty())
      return;
    send_due();
    if (done_ < total_)
      arm_tick();
  }

  [[nodiscard]] const open_loop_stats& stats() const { return stats_; }

private:
  /// One connection and the request it carries.
  class client final : public connection_events {
  public:
    explicit client(open_loop_run& run)
        : run_(run), conn_(run.ioc_, run.ep_, run.addrs_, run.opts_.io_timeout, *this) {}

    void send(size_t index, http_post post) {
      index_ = index;
      conn_.send(std::move(post));
    }
    void on_response(int status) override { run_.obs_.on_response(index_, status); }
    void on_body(std::string_view bytes) override { run_.obs_.on_body(index_, bytes); }
    void on_complete(const std::string& error) override { run_.finished(*this, error); }

    client_connection& connection() { return conn_; }
    [[nodiscard]] size_t index() const { return index_; }
    clock_type::time_point idle_since;

  private:
    open_loop_run& run_;
    client_connection conn_;
    size_t index_ = 0;
  };

  void send_due() {
    while (next_ < total_ && start_ + send_at_[next_] <= clock_type::now())
      dispatch(next_++);
    if (next_ < total_) {
      send_timer_.expires_at(start_ + send_at_[next_]);
      send_timer_.async_wait([this](const error_code& ec) {
        if (!ec)
          send_due();
      });
    }
  }

  void dispatch(size_t index) {
    auto post = obs_.make_request(index);
    if (!post) {
      // Send nothing more: the run ends with the requests in flight.
      total_ = index;
      send_timer_.cancel();
      if (done_ == total_)
        end();
      return;
    }
    client* c = nullptr;
    if (idle_.empty()) {
      all_.push_back(std::make_unique<client>(*this));
      c = all_.back().get();
    } else {
      c = idle_.back();
      idle_.pop_back();
      if (clock_type::now() - c->idle_since > opts_.max_idle)
        c->connection().close(); // the server may have closed it already
    }
    if (!c->connection().connected())
      ++stats_.connections_opened; // send() connects first
    ++stats_.sent;
    ++in_flight_;
    stats_.peak_in_flight = std::max(stats_.peak_in_flight, in_flight_);
    c->send(index, std::move(*post));
  }

  void finished(client& c, const std::string& error) {
    obs_.on_complete(c.index(), error);
    --in_flight_;
    ++done_;
    c.idle_since = clock_type::now();
    idle_.push_back(&c);
    if (done_ == total_)
      end();
  }

  // Every request has ended: drop the timers and connections so that the
  // io_context runs out of work.
  void end() {
    tick_timer_.cancel();
    for (client* i : idle_)
      i->connection().close();
  }

  void arm_tick() {
    tick_timer_.expires_after(opts_.tick);
    tick_timer_.async_wait([this](const error_code& ec) {
      if (ec || done_ == total_)
        return;
      obs_.on_tick();
      const auto now = clock_type::now();
      for (client* c : idle_)
        if (now - c->idle_since > opts_.max_idle)
          c->connection().close();
      arm_tick();
    });
  }

  asio::io_context& ioc_;
  const http_endpoint& ep_;
  const tcp::resolver::results_type& addrs_;
  const open_loop_options& opts_;
  std::span<const std::chrono::nanoseconds> send_at_;
  http_open_loop_observer& obs_;
  asio::steady_timer send_timer_;
  asio::steady_timer tick_timer_;
  clock_type::time_point start_;
  std::vector<std::unique_ptr<client>> all_;
  std::vector<client*> idle_; // free connections, most recently used last
  size_t total_;              // requests to send (fewer once make_request said stop)
  size_t next_ = 0;           // the next request to send
  size_t done_ = 0;
  size_t in_flight_ = 0;
  open_loop_stats stats_;
};

} // namespace

caf::expected<http_endpoint> parse_http_url(std::string_view url) {
  constexpr std::string_view scheme = "http://";
  if (url.starts_with("https://"))
    return bad_url(url, "https is not supported (use http://)");
  if (!url.starts_with(scheme))
    return bad_url(url, "expected http://host:port");
  auto rest = url.substr(scheme.size());
  const auto slash = rest.find('/');
  auto authority = rest.substr(0, slash);
  http_endpoint ep;
  if (slash != std::string_view::npos) {
    ep.base_path = std::string{rest.substr(slash)};
    while (!ep.base_path.empty() && ep.base_path.back() == '/')
      ep.base_path.pop_back();
  }
  std::string_view port;
  if (authority.starts_with("[")) {
    const auto close = authority.find(']');
    if (close == std::string_view::npos)
      return bad_url(url, "unclosed '[' in the host");
    ep.host = std::string{authority.substr(1, close - 1)};
    auto after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':')
        return bad_url(url, "expected ':port' after the IPv6 address");
      port = after.substr(1);
      if (port.empty())
        return bad_url(url, "empty port");
    }
  } else {
    const auto colon = authority.rfind(':');
    ep.host = std::string{authority.substr(0, colon)};
    if (colon != std::string_view::npos) {
      port = authority.substr(colon + 1);
      if (port.empty())
        return bad_url(url, "empty port");
    }
  }
  if (ep.host.empty())
    return bad_url(url, "no host");
  if (!port.empty()) {
    unsigned value = 0;
    for (char c : port) {
      if (c < '0' || c > '9' || port.size() > 5)
        return bad_url(url, "the port must be a number in 1..65535");
      value = value * 10 + static_cast<unsigned>(c - '0');
    }
    if (value < 1 || value > 65535)
      return bad_url(url, "the port must be a number in 1..65535");
    ep.port = static_cast<uint16_t>(value);
  }
  return ep;
}

caf::expected<http_reply> http_fetch(const http_endpoint& ep, const std::string& method,
                                     const std::string& target, const std::string& body,
                                     std::chrono::milliseconds timeout, const std::string& authorization) {
  asio::io_context ioc;
  tcp::resolver resolver{ioc};
  error_code ec;
  auto addrs = resolver.resolve(ep.host, std::to_string(ep.port), ec);
  if (ec)
    return failed(ep, "cannot resolve " + ep.host + ": " + ec.message());
  beast::tcp_stream stream{ioc};
  http::request<http::string_body> req{method == "POST" ? http::verb::post : http::verb::get,
                                       ep.base_path + target, 11};
  req.set(http::field::host, host_field(ep));
  req.set(http::field::user_agent, "tessera-bench");
  if (!authorization.empty())
    req.set(http::field::authorization, authorization);
  if (!body.empty()) {
    req.set(http::field::content_type, "application/json");
    req.body() = body;
  }
  req.keep_alive(false);
  req.prepare_payload();
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  std::string failure;
  // The deadline covers the whole exchange (connect, write, read).
  stream.expires_after(timeout);
  stream.async_connect(addrs, [&](const error_code& e, const tcp::endpoint&) {
    if (e) {
      failure = "connect: " + e.message();
      return;
    }
    http::async_write(stream, req, [&](const error_code& e2, std::size_t) {
      if (e2) {
        failure = "write: " + e2.message();
        return;
      }
      http::async_read(stream, buffer, res, [&](const error_code& e3, std::size_t) {
        if (e3)
          failure = "read: " + e3.message();
      });
    });
  });
  ioc.run();
  if (!failure.empty())
    return failed(ep, method + " " + target + ": " + failure);
  return http_reply{static_cast<int>(res.result_int()), std::move(res.body())};
}

caf::error run_stream_clients(const http_endpoint& ep, const stream_client_options& opts,
                              http_stream_observer& observer) {
  asio::io_context ioc{1};
  tcp::resolver resolver{ioc};
  error_code ec;
  const auto addrs = resolver.resolve(ep.host, std::to_string(ep.port), ec);
  if (ec)
    return failed(ep, "cannot resolve " + ep.host + ": " + ec.message());
  std::vector<std::unique_ptr<closed_loop_client>> conns;
  for (int i = 0; i < opts.connections; ++i)
    conns.push_back(std::make_unique<closed_loop_client>(ioc, i, ep, addrs, opts, observer));
  for (auto& c : conns)
    c->start();
  ioc.run();
  return {};
}

} // namespace tessera::bench

namespace tessera::bench {

caf::expected<open_loop_stats> run_open_loop(const http_endpoint& ep, const open_loop_options& opts,
                                             std::span<const std::chrono::nanoseconds> send_at,
                                             http_open_loop_observer& observer) {
  asio::io_context ioc{1};
  tcp::resolver resolver{ioc};
  error_code ec;
  const auto addrs = resolver.resolve(ep.host, std::to_string(ep.port), ec);
  if (ec)
    return failed(ep, "cannot resolve " + ep.host + ": " + ec.message());
  open_loop_run run{ioc, ep, addrs, opts, send_at, observer};
  run.start();
  ioc.run();
  return run.stats();
}

} // namespace tessera::bench
