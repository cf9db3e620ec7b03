#include "bench/http_client.hpp"

#include <functional>
#include <limits>
#include <memory>
#include <vector>

#include <caf/sec.hpp>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
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

/// One keep-alive connection streaming POST after POST (the loop in the
/// header's diagram). Lives until the io_context has run out of work; every
/// handler runs on that io_context's single thread.
class stream_connection {
public:
  stream_connection(asio::io_context& ioc, int index, const http_endpoint& ep,
                    const tcp::resolver::results_type& addrs, const stream_client_options& opts,
                    http_stream_observer& obs)
      : index_(index), ep_(ep), addrs_(addrs), opts_(opts), obs_(obs), stream_(ioc) {
    // Chunk bodies go to the observer as they are parsed and are not stored
    // (the callback consumes all it is given). The parser keeps a reference
    // to this callback, so it is a member.
    on_chunk_ = [this](std::uint64_t, beast::string_view body, error_code&) -> std::size_t {
      obs_.on_body(index_, std::string_view{body.data(), body.size()});
      return body.size();
    };
  }

  void start() {
    auto next = obs_.next_request(index_);
    if (!next) {
      close();
      return;
    }
    req_ = {};
    req_.method(http::verb::post);
    req_.target(ep_.base_path + next->target);
    req_.version(11);
    req_.set(http::field::host, host_field(ep_));
    req_.set(http::field::user_agent, "tessera-bench");
    req_.set(http::field::content_type, "application/json");
    req_.set(http::field::accept, "text/event-stream");
    req_.keep_alive(true);
    req_.body() = std::move(next->body);
    req_.prepare_payload();
    if (connected_)
      return write();
    stream_.expires_after(opts_.io_timeout);
    stream_.async_connect(addrs_, [this](const error_code& ec, const tcp::endpoint&) {
      if (ec)
        return fail("connect", ec);
      connected_ = true;
      stream_.socket().set_option(tcp::no_delay{true});
      write();
    });
  }

private:
  void write() {
    stream_.expires_after(opts_.io_timeout);
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
    stream_.expires_after(opts_.io_timeout);
    http::async_read_header(stream_, buffer_, *parser_, [this](const error_code& ec, std::size_t) {
      if (ec)
        return fail("read", ec);
      obs_.on_response(index_, static_cast<int>(parser_->get().result_int()));
      read_body();
    });
  }

  void read_body() {
    if (parser_->is_done())
      return complete();
    stream_.expires_after(opts_.io_timeout);
    http::async_read_some(stream_, buffer_, *parser_, [this](const error_code& ec, std::size_t) {
      if (ec)
        return fail("read", ec);
      read_body();
    });
  }

  void complete() {
    if (!parser_->chunked() && !parser_->get().body().empty())
      obs_.on_body(index_, parser_->get().body());
    const bool keep_alive = parser_->keep_alive();
    parser_.reset();
    if (!keep_alive)
      close();
    obs_.on_complete(index_, "");
    start();
  }

  void fail(const char* what, const error_code& ec) {
    close();
    parser_.reset();
    obs_.on_complete(index_, std::string{what} + ": " + ec.message());
    start();
  }

  void close() {
    if (!connected_ && !stream_.socket().is_open())
      return;
    error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
    buffer_.clear();
    connected_ = false;
  }

  const int index_;
  const http_endpoint& ep_;
  const tcp::resolver::results_type& addrs_;
  const stream_client_options& opts_;
  http_stream_observer& obs_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  http::request<http::string_body> req_;
  std::optional<http::response_parser<http::string_body>> parser_;
  std::function<std::size_t(std::uint64_t, beast::string_view, error_code&)> on_chunk_;
  bool connected_ = false;
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
                                     std::chrono::milliseconds timeout) {
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
  std::vector<std::unique_ptr<stream_connection>> conns;
  for (int i = 0; i < opts.connections; ++i)
    conns.push_back(std::make_unique<stream_connection>(ioc, i, ep, addrs, opts, observer));
  for (auto& c : conns)
    c->start();
  ioc.run();
  return {};
}

} // namespace tessera::bench
