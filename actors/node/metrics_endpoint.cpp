#include "actors/node/metrics_endpoint.hpp"

#include <caf/sec.hpp>
#include <nlohmann/json.hpp>

#include "actors/frontend/api_auth.hpp"
#include "actors/frontend/api_error.hpp"
#include "common/error.hpp"

namespace tessera::actors::detail {

caf::expected<std::unique_ptr<frontend::http_server>>
start_metrics_endpoint(const std::string& host, uint16_t port,
                       std::shared_ptr<const cluster::metrics_registry> metrics, fault_control faults,
                       std::string admin_key) {
  if (faults && admin_key.empty())
    return caf::make_error(caf::sec::invalid_argument,
                           "fault injection needs an admin key (admin_key_file in the cluster config): POST "
                           "/admin/faults must not be open to anyone who reaches the metrics port");
  frontend::http_server_options o;
  o.host = host;
  o.port = port;
  o.max_body_bytes = 64 * 1024; // a fault plan is a line of text
  return frontend::http_server::start(
    o, [metrics, faults, admin_key](frontend::http_request req, std::shared_ptr<frontend::http_response> res) {
      const auto path = req.target.substr(0, req.target.find('?'));
      const bool get = req.method == "GET" || req.method == "HEAD";
      auto reply = [&res](int status, const std::string& type, const std::string& message,
                          frontend::http_header_list extra = {}) {
        nlohmann::json e = {{"error", {{"message", message}, {"type", type}}}};
        res->send(status, "application/json", e.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                  std::move(extra));
      };
      if (get && path == "/metrics")
        return res->send(200, "text/plain; version=0.0.4", metrics->render());
      if (get && path == "/live")
        return res->send(200, "application/json", "{\"status\":\"ok\"}");
      if (faults && req.method == "POST" && path == "/admin/faults") {
        if (!frontend::bearer_matches(req.header("Authorization"), admin_key))
          return reply(401, "authentication_error",
                       "POST /admin/faults needs the admin key: Authorization: Bearer <key of admin_key_file>",
                       {{"WWW-Authenticate", "Bearer"}});
        auto body = nlohmann::json::parse(req.body, nullptr, false);
        if (!body.is_object() || !body.contains("plan") || !body["plan"].is_string())
          return reply(400, "invalid_request_error",
                       "the body must be {\"plan\": \"<fault plan>\"}, e.g. {\"plan\": \"seed=1; drop,p=0.01\"}");
        if (auto err = faults(body["plan"].get<std::string>()))
          return reply(400, "invalid_request_error", "bad fault plan: " + error_message(err));
        return res->send(200, "application/json", "{\"status\":\"ok\"}");
      }
      reply(404, "not_found_error",
            "no such endpoint: " + frontend::quote_input(req.method + " " + path) + " (this node serves GET /metrics and GET /live" +
              (faults ? std::string{", POST /admin/faults)"} : std::string{")"}));
    });
}

} // namespace tessera::actors::detail
