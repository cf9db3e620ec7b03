#include "actors/node/metrics_endpoint.hpp"

#include <nlohmann/json.hpp>

namespace tessera::actors::detail {

caf::expected<std::unique_ptr<frontend::http_server>>
start_metrics_endpoint(const std::string& host, uint16_t port,
                       std::shared_ptr<const cluster::metrics_registry> metrics) {
  frontend::http_server_options o;
  o.host = host;
  o.port = port;
  return frontend::http_server::start(
    o, [metrics](frontend::http_request req, std::shared_ptr<frontend::http_response> res) {
      const auto path = req.target.substr(0, req.target.find('?'));
      const bool get = req.method == "GET" || req.method == "HEAD";
      if (get && path == "/metrics")
        return res->send(200, "text/plain; version=0.0.4", metrics->render());
      if (get && path == "/live")
        return res->send(200, "application/json", "{\"status\":\"ok\"}");
      nlohmann::json e = {{"error",
                           {{"message", "no such endpoint: " + req.method + " " + path +
                                          " (this node serves GET /metrics and GET /live)"},
                            {"type", "not_found_error"}}}};
      res->send(404, "application/json", e.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    });
}

} // namespace tessera::actors::detail
