#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "actors/frontend/frontend_state.hpp"
#include "common/error.hpp"

namespace tessera::actors::frontend::detail {

/// The /health body: the cluster's status, whether it is ready, the
/// healthy workers' count (as before) and each worker's state and reason.
std::string health_body(const serving_health& h, const std::vector<router_worker_view>& ws) {
  nlohmann::ordered_json workers = nlohmann::ordered_json::array();
  for (const auto& w : ws) {
    const auto& s = w.status;
    nlohmann::ordered_json o = {{"name", s.name},
                                {"node", s.node},
                                {"role", to_string(s.role)},
                                {"state", s.healthy ? "healthy" : "unhealthy"},
                                {"reason", s.reason},
                                {"last_seen_ms", s.last_seen_ms}};
    if (s.canary_ms >= 0)
      o["canary_ms"] = s.canary_ms;
    workers.push_back(std::move(o));
  }
  nlohmann::ordered_json j = {{"status", to_string(h.status)},
                              {"ready", h.ready},
                              {"workers", h.healthy},
                              {"worker_states", std::move(workers)}};
  if (!h.reason.empty())
    j["reason"] = h.reason;
  return j.dump();
}

/// GET /health (each worker's state; 200 while a complete serving path is
/// healthy, else 503) and GET /ready (200 or 503 alike, a short body).
void health(frontend_pointer self, std::shared_ptr<http_response> res, bool ready_only) {
  const auto& kv = self->state.cfg.health_kv_store;
  const std::string extra = kv.empty() ? std::string{} : ",\"kv_store\":" + kv;
  self->request(self->state.cfg.router, std::chrono::seconds{5}, workers_atom_v)
    .then(
      [res, extra, ready_only](const std::vector<router_worker_view>& ws) {
        std::vector<worker_status> states;
        for (const auto& w : ws)
          states.push_back(w.status);
        const auto h = assess_serving(states);
        const int code = h.ready ? 200 : 503;
        if (ready_only) {
          nlohmann::ordered_json j = {{"status", h.ready ? "ready" : to_string(h.status)}, {"workers", h.healthy}};
          if (!h.ready)
            j["reason"] = h.reason;
          return res->send(code, json_type, j.dump());
        }
        auto body = health_body(h, ws);
        body.insert(body.size() - 1, extra);
        res->send(code, json_type, body);
      },
      [res](caf::error& err) {
        res->send(503, json_type, error_body(no_worker(error_text(err))));
      });
}

void metrics(frontend_pointer self, std::shared_ptr<http_response> res) {
  self->request(self->state.cfg.router, std::chrono::seconds{5}, workers_atom_v)
    .then(
      [self, res](const std::vector<router_worker_view>& ws) {
        double healthy = 0;
        for (const auto& w : ws)
          healthy += w.load.healthy ? 1 : 0;
        self->state.metrics->workers.set(healthy);
        res->send(200, "text/plain; version=0.0.4", self->state.metrics->registry.render());
      },
      [self, res](caf::error&) {
        res->send(200, "text/plain; version=0.0.4", self->state.metrics->registry.render());
      });
}

/// POST /admin/fault {"worker": name, "fault": kind}: passes the fault to
/// the node's supervisor, which hands it to that worker.
void admin_fault(frontend_pointer self, const http_call& call) {
  auto body = nlohmann::json::parse(call.request.body, nullptr, false);
  if (!body.is_object() || !body.contains("worker") || !body["worker"].is_string() ||
      !body.contains("fault") || !body["fault"].is_string())
    return send_error(call.response,
                      bad_request("the body must be {\"worker\": name, \"fault\": \"crash\"}"));
  const auto worker = body["worker"].get<std::string>();
  const auto fault = body["fault"].get<std::string>();
  if (fault != "crash")
    return send_error(call.response, bad_request("unknown fault '" + quote_input(fault) + "' (known: crash)", "fault"));
  spdlog::warn("frontend: fault '{}' injected into worker {} (POST /admin/fault from {})", fault, worker,
               call.request.remote);
  auto res = call.response;
  self->request(self->state.cfg.supervisor, std::chrono::seconds{5}, fault_atom_v, worker, fault)
    .then([res]() { res->send(200, json_type, "{\"status\":\"injected\"}"); },
          [res](caf::error& err) {
            auto e = bad_request(error_text(err), "worker");
            e.status = 404;
            e.type = "not_found_error";
            send_error(res, e);
          });
}

/// Whether `call` carries the admin key (Authorization: Bearer KEY),
/// compared in constant time. No key configured: never.
bool admin_allowed(const frontend_state& st, const http_call& call) {
  return bearer_matches(call.request.header("Authorization"), st.cfg.admin_key);
}

void admin(frontend_pointer self, const http_call& call) {
  auto& st = self->state;
  const auto& method = call.request.method;
  const auto path = call.request.target.substr(0, call.request.target.find('?'));
  auto not_found = [&] {
    api_error e = bad_request("no such endpoint: " + quote_input(method) + " " + quote_input(path));
    e.status = 404;
    e.type = "not_found_error";
    send_error(call.response, e);
  };
  // Without an admin key there is no admin endpoint at all; with one,
  // nothing under /admin/ (not even which endpoints exist) is told to a
  // caller without it.
  if (st.cfg.admin_key.empty())
    return not_found();
  if (!admin_allowed(st, call)) {
    api_error e = bad_request("this endpoint needs the admin key: Authorization: Bearer <key of "
                              "--admin-key-file>");
    e.status = 401;
    e.type = "authentication_error";
    e.code = "invalid_api_key";
    return send_error(call.response, e);
  }
  const bool fault = path == "/admin/fault" && st.cfg.supervisor;
  const bool drain = path == "/admin/drain";
  if (!fault && !drain)
    return not_found();
  if (method != "POST") {
    api_error e = bad_request("method " + quote_input(method) + " is not allowed on " + quote_input(path) +
                              " (use POST)");
    e.status = 405;
    return send_error(call.response, e);
  }
  if (fault)
    return admin_fault(self, call);
  admin_drain(self, call);
}

/// POST /admin/drain {"node": id, "drain": true|false}: the router sends
/// the node's workers no new request (or takes them back), and every
/// stream running there moves to another worker (migrate), so the node can
/// then be stopped without failing a request.
void admin_drain(frontend_pointer self, const http_call& call) {
  auto body = nlohmann::json::parse(call.request.body, nullptr, false);
  if (!body.is_object() || !body.contains("node") || !body["node"].is_string() ||
      (body.contains("drain") && !body["drain"].is_boolean()))
    return send_error(call.response, bad_request("the body must be {\"node\": id, \"drain\": true|false}"));
  const auto node = body["node"].get<std::string>();
  const bool drain = body.value("drain", true);
  auto res = call.response;
  self->request(self->state.cfg.router, std::chrono::seconds{5}, drain_atom_v, node, drain)
    .then(
      [self, res, node, drain](int32_t workers) {
        if (workers == 0) {
          auto e = bad_request("no worker on node " + quote_input(node), "node");
          e.status = 404;
          e.type = "not_found_error";
          return send_error(res, e);
        }
        std::vector<std::pair<uint64_t, size_t>> moving;
        if (drain)
          for (const auto& [key, j] : self->state.jobs)
            for (size_t i = 0; i < j.choices.size(); ++i) {
              const auto& c = j.choices[i];
              if (!c.done && (c.route.prefill.node == node || c.route.decode.node == node))
                moving.emplace_back(key, i);
            }
        for (const auto& [key, index] : moving) {
          auto why = no_worker("node " + quote_input(node) + " was drained");
          why.code = "worker_failed";
          migrate(self, key, index, why);
        }
        spdlog::warn("frontend: node '{}' {} by an operator; {} stream(s) moved", node,
                     drain ? "drained" : "taken back", moving.size());
        res->send(200, json_type,
                  nlohmann::json{{"node", node}, {"draining", drain}, {"workers", workers}, {"moved", moving.size()}}
                    .dump());
      },
      [res](caf::error& err) { send_error(res, no_worker(error_text(err))); });
}

} // namespace tessera::actors::frontend::detail
