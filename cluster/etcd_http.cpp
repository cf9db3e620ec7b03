#include "cluster/etcd_http.hpp"

#include <optional>

#include <caf/sec.hpp>
#include <nlohmann/json.hpp>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace tessera::cluster::detail {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;

namespace {

/// Most bytes of a reply's status line and headers.
constexpr uint32_t max_header_bytes = 16 << 10;

/// At most this much of a reply is quoted in an error.
std::string reply_text(std::string_view text) {
  constexpr size_t most = 200;
  std::string out{text.substr(0, most)};
  for (auto& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      c = ' ';
  return "'" + out + (text.size() > most ? "...'" : "'");
}

} // namespace

caf::error etcd_error(const etcd_endpoint& ep, const std::string& what) {
  return caf::make_error(caf::sec::runtime_error, "etcd " + ep.url + ": " + what);
}

class etcd_http::impl {
public:
  explicit impl(size_t max_body) : max_body(max_body), socket(ioc), buffer(max_header_bytes + max_body) {}

  /// Runs the operation `start` begins until its handler ran or `deadline`
  /// passed (then the socket closes and the operation ends aborted).
  template <class Start>
  error_code run(Start&& start, etcd_clock::time_point deadline) {
    bool done = false;
    error_code result;
    start([&](const error_code& ec, auto&&...) {
      done = true;
      result = ec;
    });
    ioc.restart();
    ioc.run_until(deadline);
    if (done)
      return result;
    close();
    ioc.restart();
    ioc.run(); // the aborted handler
    return asio::error::timed_out;
  }

  void close() {
    error_code ignored;
    socket.shutdown(tcp::socket::shutdown_both, ignored);
    socket.close(ignored);
  }

  size_t max_body;
  asio::io_context ioc;
  tcp::socket socket;
  beast::flat_buffer buffer;
  http::request<http::string_body> req;
  std::optional<http::response_parser<http::string_body>> parser;
  /// Stream bytes the chunk callback took, not yet handed out.
  std::string streamed;
  std::function<size_t(uint64_t, beast::string_view, error_code&)> on_chunk;
  /// A streaming read started by read_some that has not finished.
  bool pending = false;
  bool pending_done = false;
  error_code pending_ec;
};

etcd_http::etcd_http(etcd_endpoint ep, size_t max_body)
    : ep_(std::move(ep)), impl_(std::make_unique<impl>(max_body)) {}

etcd_http::~etcd_http() {
  impl_->close();
  // A read left pending ends aborted here, before its buffers go.
  impl_->ioc.restart();
  impl_->ioc.run();
}

caf::error etcd_http::start(const std::string& path, const std::string& body, etcd_clock::time_point deadline) {
  auto& m = *impl_;
  error_code ec;
  tcp::resolver resolver{m.ioc};
  auto addrs = resolver.resolve(ep_.host, std::to_string(ep_.port), ec);
  if (ec)
    return etcd_error(ep_, "cannot resolve " + ep_.host + ": " + ec.message());
  ec = m.run([&](auto handler) { asio::async_connect(m.socket, addrs, std::move(handler)); }, deadline);
  if (ec)
    return etcd_error(ep_, "connect: " + ec.message());
  m.socket.set_option(tcp::no_delay{true}, ec);
  m.req = {};
  m.req.method(http::verb::post);
  m.req.target(path);
  m.req.version(11);
  m.req.set(http::field::host, ep_.host + ":" + std::to_string(ep_.port));
  m.req.set(http::field::user_agent, "tessera");
  m.req.set(http::field::content_type, "application/json");
  m.req.keep_alive(false);
  m.req.body() = body;
  m.req.prepare_payload();
  ec = m.run([&](auto handler) { http::async_write(m.socket, m.req, std::move(handler)); }, deadline);
  if (ec)
    return etcd_error(ep_, "send " + path + ": " + ec.message());
  m.parser.emplace();
  m.parser->header_limit(max_header_bytes);
  m.parser->body_limit(m.max_body);
  ec = m.run([&](auto handler) { http::async_read_header(m.socket, m.buffer, *m.parser, std::move(handler)); },
             deadline);
  if (ec == http::error::body_limit) // a Content-Length over the bound
    return etcd_error(ep_, "reply to " + path + ": a reply over " + std::to_string(m.max_body) + " bytes");
  if (ec)
    return etcd_error(ep_, "reply to " + path + ": " + ec.message());
  return {};
}

int etcd_http::status() const {
  return impl_->parser ? static_cast<int>(impl_->parser->get().result_int()) : 0;
}

bool etcd_http::chunked() const {
  return impl_->parser && impl_->parser->chunked();
}

caf::expected<std::string> etcd_http::read_body(etcd_clock::time_point deadline) {
  auto& m = *impl_;
  auto ec = m.run([&](auto handler) { http::async_read(m.socket, m.buffer, *m.parser, std::move(handler)); },
                  deadline);
  if (ec == http::error::body_limit)
    return etcd_error(ep_, "a reply over " + std::to_string(m.max_body) + " bytes");
  if (ec)
    return etcd_error(ep_, "reading the reply: " + ec.message());
  return std::move(m.parser->get().body());
}

caf::error etcd_http::read_some(std::string& out, etcd_clock::time_point deadline) {
  auto& m = *impl_;
  if (!m.on_chunk) {
    // A stream has no length: bound what waits unread instead.
    m.parser->body_limit(boost::none);
    m.on_chunk = [&m](uint64_t, beast::string_view piece, error_code& ec) -> size_t {
      if (m.streamed.size() + piece.size() > m.max_body) {
        ec = http::error::body_limit;
        return 0;
      }
      m.streamed.append(piece.data(), piece.size());
      return piece.size();
    };
    m.parser->on_chunk_body(m.on_chunk);
  }
  while (m.streamed.empty()) {
    if (!m.pending) {
      if (m.parser->is_done())
        return etcd_error(ep_, "the stream ended");
      m.pending = true;
      m.pending_done = false;
      http::async_read_some(m.socket, m.buffer, *m.parser, [&m](const error_code& ec, size_t) {
        m.pending_done = true;
        m.pending_ec = ec;
      });
    }
    m.ioc.restart();
    m.ioc.run_until(deadline);
    if (!m.pending_done)
      return {}; // nothing yet; the read goes on next time
    m.pending = false;
    if (m.pending_ec == http::error::body_limit)
      return etcd_error(ep_, "a stream message over " + std::to_string(m.max_body) + " bytes");
    if (m.pending_ec == http::error::end_of_stream || m.pending_ec == asio::error::eof)
      return etcd_error(ep_, "the stream ended (etcd closed it)");
    if (m.pending_ec)
      return etcd_error(ep_, "the stream broke: " + m.pending_ec.message());
    if (etcd_clock::now() >= deadline)
      break;
  }
  out += m.streamed;
  m.streamed.clear();
  return {};
}

caf::expected<std::string> etcd_post(const etcd_endpoint& ep, const std::string& path, const std::string& body,
                                     std::chrono::milliseconds timeout, size_t max_body) {
  const auto deadline = etcd_clock::now() + timeout;
  etcd_http x{ep, max_body};
  if (auto err = x.start(path, body, deadline))
    return err;
  auto reply = x.read_body(deadline);
  if (!reply)
    return reply.error();
  if (x.status() == 200)
    return reply;
  // The gateway's errors: {"error": "...", "message": "...", "code": N}.
  auto j = nlohmann::json::parse(*reply, nullptr, false);
  if (j.is_object() && j.contains("message") && j["message"].is_string())
    return etcd_error(ep, path + ": HTTP " + std::to_string(x.status()) + ": " +
                            reply_text(j["message"].get<std::string>()));
  return etcd_error(ep, path + ": HTTP " + std::to_string(x.status()) + ": " + reply_text(*reply));
}

} // namespace tessera::cluster::detail
