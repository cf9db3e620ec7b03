#include "actors/frontend/sdk_gateway.hpp"

#include <spdlog/spdlog.h>

#include "actors/frontend/frontend_state.hpp"
#include "actors/frontend/openai_response.hpp"
#include "common/error.hpp"

namespace tessera::actors::frontend::detail {

namespace {

/// Tells the client's node `node` one message for its sdk actor.
template <class Atom, class T>
void tell_client(frontend_pointer self, const std::string& node, Atom atom, T msg) {
  // One-way: anon_send, so no reply comes back to this typed actor. A
  // client node that is gone is counted by the bridge (not_connected).
  caf::anon_send(self->state.cfg.bridge, forward_atom_v, node, std::string{sdk_client_name},
                 caf::make_message(atom, std::move(msg)));
}

wire::client_failed failure_of(uint64_t request_id, const api_error& e) {
  wire::client_failed f;
  f.request_id = request_id;
  f.code = protocol::errc_of_http(e.status, e.code);
  f.http_status = e.status;
  f.type = e.type;
  f.error_code = e.code;
  f.param = e.param;
  f.message = e.message;
  return f;
}

/// The api_request an HTTP body with the same content would have parsed to.
api_request request_of(wire::client_submit& m, const std::string& served) {
  api_request req;
  req.model = m.model.empty() ? served : m.model;
  switch (m.kind) {
    case protocol::prompt_kind::token_ids:
      req.kind = api_kind::completion;
      req.prompt_tokens = std::move(m.prompt_ids);
      break;
    case protocol::prompt_kind::text:
      req.kind = api_kind::completion;
      req.prompt_text = std::move(m.prompt_text);
      break;
    case protocol::prompt_kind::chat:
      req.kind = api_kind::chat;
      for (auto& c : m.messages)
        req.messages.push_back({std::move(c.role), std::move(c.content)});
      break;
  }
  req.params = std::move(m.params);
  req.max_tokens = req.params.max_tokens;
  req.logprobs = req.params.logprobs.has_value();
  req.top_logprobs = req.params.logprobs.value_or(0);
  if (m.priority != 0)
    req.priority = m.priority;
  return req;
}

} // namespace

void sdk_submit(frontend_pointer self, wire::client_submit m) {
  auto& st = self->state;
  st.metrics->request("/sdk/submit");
  const auto node = m.client;
  const auto id = m.request_id;
  if (node.empty())
    return; // not through a bridge connection: nowhere to answer
  auto refuse = [&](const api_error& e) {
    st.metrics->error(e.code.empty() ? e.type : e.code);
    tell_client(self, node, failed_atom_v, failure_of(id, e));
  };
  if (st.sdk_jobs.contains({node, id}))
    return refuse(bad_request("request_id " + std::to_string(id) + " is already in use by an unfinished request",
                              "request_id"));
  if (st.draining)
    return refuse(shutting_down("it takes no new requests"));
  // The same API key check as HTTP's "Authorization: Bearer <key>".
  std::shared_ptr<const cluster::tenant_policy> tenant;
  const std::string bearer = "Bearer " + m.api_key;
  auto who = authenticate(st.cfg.api_keys, m.api_key.empty() ? std::optional<std::string_view>{}
                                                             : std::optional<std::string_view>{bearer});
  if (auto* e = std::get_if<api_error>(&who)) {
    st.metrics->error("invalid_api_key");
    return tell_client(self, node, failed_atom_v, failure_of(id, *e));
  }
  tenant = std::get<0>(std::move(who));
  sdk_origin origin{node, id, m.detokenize};
  auto req = request_of(m, st.cfg.model_name);
  auto opened = open_job(self, std::move(req), std::move(tenant), nullptr, origin);
  if (auto* r = std::get_if<job_refusal>(&opened))
    return tell_client(self, node, failed_atom_v, failure_of(id, r->error));
  const auto key = std::get<uint64_t>(opened);
  auto& j = st.jobs.at(key);
  st.sdk_jobs[{node, id}] = key;
  // Sent before any token: the bridge keeps a peer's messages in order.
  tell_client(self, node, accepted_atom_v, wire::client_accepted{id, j.prompt, j.req.model});
}

void sdk_cancel(frontend_pointer self, const wire::client_cancel& m) {
  auto it = self->state.sdk_jobs.find({m.client, m.request_id});
  if (it == self->state.sdk_jobs.end())
    return; // finished meanwhile, or never known
  self->state.metrics->cancelled.inc();
  drop_job(self, it->second, "the client cancelled it");
}

caf::result<wire::cluster_info> sdk_info(frontend_pointer self) {
  auto rp = self->make_response_promise<wire::cluster_info>();
  wire::cluster_info base;
  base.models = {self->state.cfg.model_name};
  base.max_model_len = self->state.cfg.max_model_len;
  base.draining = self->state.draining;
  self->request(self->state.cfg.router, std::chrono::seconds{5}, workers_atom_v)
    .then(
      [rp, base](const std::vector<router_worker_view>& ws) mutable {
        std::vector<worker_status> states;
        for (const auto& w : ws)
          states.push_back(w.status);
        const auto h = assess_serving(states);
        base.ready = h.ready && !base.draining;
        base.workers = static_cast<int32_t>(ws.size());
        base.healthy_workers = static_cast<int32_t>(h.healthy);
        rp.deliver(std::move(base));
      },
      [rp, base](caf::error&) mutable {
        base.ready = false; // the router is away: nothing can be served
        rp.deliver(std::move(base));
      });
  return rp;
}

void sdk_node_down(frontend_pointer self, const std::string& node) {
  std::vector<uint64_t> keys;
  for (const auto& [who, key] : self->state.sdk_jobs)
    if (who.first == node)
      keys.push_back(key);
  for (auto key : keys) {
    self->state.metrics->cancelled.inc();
    drop_job(self, key, "the client's node went away");
  }
}

void sdk_forget(frontend_state& st, const job& j) {
  if (j.sdk.id != 0)
    st.sdk_jobs.erase({j.sdk.node, j.sdk.id});
}

void sdk_forward(frontend_pointer self, const job& j, const wire::token_chunk& out) {
  auto chunk = out;
  chunk.id = j.sdk.id;
  if (!j.sdk.detokenize)
    chunk.text.clear();
  chunk.error = {};
  tell_client(self, j.sdk.node, token_atom_v, std::move(chunk));
}

void sdk_fail(frontend_pointer self, const job& j, const api_error& e) {
  tell_client(self, j.sdk.node, failed_atom_v, failure_of(j.sdk.id, e));
}

} // namespace tessera::actors::frontend::detail
