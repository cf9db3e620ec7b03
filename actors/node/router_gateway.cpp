#include "actors/node/router_gateway.hpp"

#include <algorithm>

#include "transport/wire/limits.hpp"

namespace tessera::actors {

namespace wire = transport::wire;

namespace {

/// How long the gateway waits for its (local) router: twice the longest
/// hold it lets a caller ask for, so that a held call is answered.
constexpr std::chrono::milliseconds router_timeout = 2 * max_remote_route_wait;

/// Most time the router may hold a remote frontend's route call for KV
/// room (kv_admission.hpp) when the call names none (an older caller):
/// half a router client's default attempt timeout, so the caller does not
/// take a holding router for a hung one.
constexpr std::chrono::milliseconds remote_route_default_wait{1000};

std::string cut(std::string s, size_t max) {
  if (s.size() > max)
    s.resize(max);
  return s;
}

} // namespace

wire::route_call to_wire(const route_query& q) {
  // A caller that sets no limit sends none (0: the gateway's default).
  const int32_t wait_ms =
    q.max_wait.count() < 0 ? 0
                           : static_cast<int32_t>(std::clamp<int64_t>(q.max_wait.count(), 1, wire::max_route_wait_ms));
  return {q.request_id, q.prompt, q.cache_salt, q.session_id, q.max_tokens, wait_ms};
}

route_query from_wire(wire::route_call c) {
  route_query q;
  q.request_id = c.request_id;
  q.prompt = std::move(c.prompt);
  q.cache_salt = std::move(c.cache_salt);
  q.session_id = std::move(c.session_id);
  q.max_tokens = c.max_tokens;
  q.max_wait = c.max_wait_ms > 0 ? std::min(std::chrono::milliseconds{c.max_wait_ms}, max_remote_route_wait)
                                 : remote_route_default_wait;
  return q;
}

wire::route_reply to_wire(const route_answer& a) {
  wire::route_reply r;
  r.prefill = a.prefill;
  r.decode = a.decode;
  r.disaggregated = a.disaggregated;
  r.cached_blocks = std::max(0, a.cached_blocks);
  r.reason = cut(a.reason, wire::wire_limits{}.max_name_bytes);
  if (!a.kv_source.empty() && a.kv_source_blocks > 0) {
    r.kv_source = a.kv_source;
    r.kv_source_blocks = a.kv_source_blocks;
  }
  return r;
}

route_answer from_wire(wire::route_reply r) {
  route_answer a;
  a.prefill = std::move(r.prefill);
  a.decode = std::move(r.decode);
  a.disaggregated = r.disaggregated;
  a.cached_blocks = r.cached_blocks;
  a.reason = std::move(r.reason);
  a.kv_source = std::move(r.kv_source);
  a.kv_source_blocks = r.kv_source_blocks;
  return a;
}

wire::worker_views to_wire(const std::vector<router_worker_view>& ws) {
  wire::worker_views out;
  const auto max = wire::wire_limits{}.max_worker_views;
  for (const auto& w : ws) {
    if (out.workers.size() == max)
      break;
    wire::worker_view v;
    v.worker_id = w.join.worker_id;
    v.at = w.join.at;
    v.role = static_cast<uint8_t>(w.status.role);
    v.healthy = w.status.healthy;
    v.reason = cut(w.status.reason, wire::wire_limits{}.max_name_bytes);
    v.last_seen_ms = std::max<int64_t>(0, w.status.last_seen_ms);
    v.canary_ms = std::max<int64_t>(-1, w.status.canary_ms);
    out.workers.push_back(std::move(v));
  }
  return out;
}

std::vector<router_worker_view> from_wire(const wire::worker_views& v) {
  std::vector<router_worker_view> out;
  out.reserve(v.workers.size());
  for (const auto& w : v.workers) {
    router_worker_view r;
    const auto role = static_cast<worker_role>(w.role); // validated: 0..2
    r.join.worker_id = w.worker_id;
    r.join.at = w.at;
    r.load.id = w.worker_id;
    r.load.role = role;
    r.load.healthy = w.healthy;
    r.status.name = w.at.actor;
    r.status.node = w.at.node;
    r.status.role = role;
    r.status.healthy = w.healthy;
    r.status.reason = w.reason;
    r.status.last_seen_ms = w.last_seen_ms;
    r.status.canary_ms = w.canary_ms;
    out.push_back(std::move(r));
  }
  return out;
}

namespace {

router_api_actor::behavior_type gateway_fn(router_api_actor::pointer self, router_local_actor router) {
  return {
    [self, router](route_atom, const wire::route_call& c) -> caf::result<wire::route_reply> {
      auto rp = self->make_response_promise<wire::route_reply>();
      auto q = from_wire(c);
      self->request(router, router_timeout, route_atom_v, std::move(q))
        .then([rp](const route_answer& a) mutable { rp.deliver(to_wire(a)); },
              [rp](caf::error& err) mutable { rp.deliver(std::move(err)); });
      return rp;
    },
    [self, router](prefilled_atom, const wire::request_status& s) {
      for (auto id : s.request_ids)
        self->send(router, prefilled_atom_v, id);
    },
    [self, router](finished_atom, const wire::request_status& s) {
      for (auto id : s.request_ids)
        self->send(router, finished_atom_v, id);
    },
    [self, router](workers_atom) -> caf::result<wire::worker_views> {
      auto rp = self->make_response_promise<wire::worker_views>();
      self->request(router, router_timeout, workers_atom_v)
        .then([rp](const std::vector<router_worker_view>& ws) mutable { rp.deliver(to_wire(ws)); },
              [rp](caf::error& err) mutable { rp.deliver(std::move(err)); });
      return rp;
    },
  };
}

} // namespace

router_api_actor spawn_router_gateway(caf::actor_system& sys, router_local_actor router) {
  return sys.spawn(gateway_fn, std::move(router));
}

} // namespace tessera::actors
