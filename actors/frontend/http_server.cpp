#include "actors/frontend/http_server.hpp"

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>

#include <caf/error.hpp>
#include <caf/sec.hpp>

#include "actors/frontend/http_connection.hpp"
#include "common/assert.hpp"

namespace tessera::actors::frontend {

namespace asio = boost::asio;
using boost::system::error_code;
using tcp = asio::ip::tcp;
using detail::http_connection;
using detail::http_server_core;

namespace {

// Pause before accepting again after an accept error (e.g. out of file
// descriptors), so the loop does not spin.
constexpr std::chrono::milliseconds accept_retry_delay{50};

std::string host_port(const std::string& host, uint16_t port) {
  if (host.find(':') != std::string::npos)
    return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

caf::error listen_error(const http_server_options& o, const std::string& cause) {
  return caf::make_error(caf::sec::runtime_error,
                         "http: cannot listen on " + host_port(o.host, o.port) + ": " + cause);
}

// The accept loop runs on the acceptor's strand. `core` is alive: the
// server holds it until the I/O threads are joined.
void accept_next(http_server_core* core) {
  core->acceptor.async_accept(
    asio::make_strand(core->ioc), [core](error_code ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted || !core->acceptor.is_open())
        return;
      if (ec) {
        core->accept_retry.expires_after(accept_retry_delay);
        core->accept_retry.async_wait([core](error_code timer_ec) {
          if (!timer_ec && core->acceptor.is_open())
            accept_next(core);
        });
        return;
      }
      error_code ignored;
      // Streams are many small writes (one per token): send each at once.
      socket.set_option(tcp::no_delay(true), ignored);
      std::shared_ptr<http_connection> conn;
      {
        std::lock_guard lock(core->mu);
        if (core->stopping)
          return; // the socket closes as it goes out of scope
        uint64_t id = core->next_connection_id++;
        conn = std::make_shared<http_connection>(core->shared_from_this(), std::move(socket), id);
        core->connections.emplace(id, conn);
      }
      conn->start();
      accept_next(core);
    });
}

} // namespace

caf::expected<std::unique_ptr<http_server>> http_server::start(http_server_options options,
                                                              http_handler handler) {
  if (options.threads < 1)
    return caf::make_error(caf::sec::runtime_error, "http: threads must be at least 1");
  if (!handler)
    return caf::make_error(caf::sec::runtime_error, "http: no request handler");
  auto core = std::make_shared<http_server_core>(options, std::move(handler));

  error_code ec;
  std::vector<tcp::endpoint> endpoints;
  auto address = asio::ip::make_address(options.host, ec);
  if (!ec) {
    endpoints.emplace_back(address, options.port);
  } else {
    tcp::resolver resolver(core->ioc);
    auto results = resolver.resolve(options.host, std::to_string(options.port), ec);
    if (ec)
      return listen_error(options, ec.message());
    for (const auto& entry : results)
      endpoints.push_back(entry.endpoint());
  }
  auto& acceptor = core->acceptor;
  ec = asio::error::host_not_found;
  for (const auto& ep : endpoints) {
    error_code ignored;
    if (acceptor.is_open())
      acceptor.close(ignored);
    acceptor.open(ep.protocol(), ec);
    if (ec)
      continue;
    // Lets a restarted server bind while old connections sit in TIME_WAIT;
    // on Linux a port with a live listener still fails with "in use".
    acceptor.set_option(tcp::acceptor::reuse_address(true), ignored);
    acceptor.bind(ep, ec);
    if (ec)
      continue;
    acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (!ec)
      break;
  }
  if (ec) {
    error_code ignored;
    acceptor.close(ignored);
    return listen_error(options, ec.message());
  }
  auto local = acceptor.local_endpoint(ec);
  if (ec)
    return listen_error(options, ec.message());

  std::unique_ptr<http_server> server(new http_server(core));
  server->port_ = local.port();
  auto host = local.address().to_string();
  server->url_ = "http://" + host_port(host, server->port_);
  asio::post(acceptor.get_executor(), [raw = core.get()] { accept_next(raw); });
  for (int i = 0; i < options.threads; ++i)
    server->threads_.emplace_back([raw = core.get()] { raw->ioc.run(); });
  return server;
}

http_server::http_server(std::shared_ptr<http_server_core> core) : core_(std::move(core)) {}

http_server::~http_server() {
  stop();
}

void http_server::stop() {
  std::lock_guard stop_lock(stop_mu_);
  if (threads_.empty())
    return;
  for (const auto& t : threads_)
    TESSERA_ASSERT(t.get_id() != std::this_thread::get_id(),
                   "http_server::stop on one of its own I/O threads");
  std::vector<std::shared_ptr<http_connection>> open;
  {
    std::lock_guard lock(core_->mu);
    core_->stopping = true;
    for (auto& [id, weak] : core_->connections)
      if (auto conn = weak.lock())
        open.push_back(std::move(conn));
  }
  asio::post(core_->acceptor.get_executor(), [raw = core_.get()] {
    error_code ignored;
    raw->acceptor.close(ignored);
    raw->accept_retry.cancel();
  });
  // What is queued is written while the I/O threads still run, for a
  // bounded time (a client that reads nothing cannot hold the stop).
  const auto flush_by = std::chrono::steady_clock::now() + std::chrono::seconds{1};
  while (std::chrono::steady_clock::now() < flush_by &&
         std::any_of(open.begin(), open.end(), [](const auto& c) { return c->unwritten(); }))
    std::this_thread::sleep_for(std::chrono::milliseconds{2});
  // Connections accepted from now on see `stopping` and are dropped; these
  // close on their strands, which cancels everything they have pending, so
  // the io_context runs out of work and the threads return.
  for (auto& conn : open)
    conn->post_close();
  open.clear();
  core_->work.reset();
  for (auto& t : threads_)
    t.join();
  threads_.clear();
}

} // namespace tessera::actors::frontend
