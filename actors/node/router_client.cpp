#include "actors/node/router_client.hpp"

#include <map>
#include <memory>

#include <spdlog/spdlog.h>

#include "actors/bridge/remote_actor.hpp"
#include "actors/router/router_errc.hpp"
#include "common/error.hpp"

namespace tessera::actors {

namespace wire = transport::wire;

namespace {

using clock_type = std::chrono::steady_clock;

struct link_state {
  router_link link;
  router_api_actor remote; // set when link.local is not
  clock_type::time_point down_until{};
  bool down_logged = false;
};

struct client_state {
  router_client_config cfg;
  std::vector<link_state> links;
  /// Which router placed each request still running (prefilled and
  /// finished go there, whose load estimate counts it).
  std::map<uint64_t, size_t> placed;
};

using client_pointer = router_local_actor::stateful_pointer<client_state>;

/// The routers to ask, in order: the live ones first.
std::vector<size_t> order_of(const client_state& st) {
  const auto now = clock_type::now();
  std::vector<size_t> live;
  std::vector<size_t> down;
  for (size_t i = 0; i < st.links.size(); ++i)
    (now >= st.links[i].down_until ? live : down).push_back(i);
  live.insert(live.end(), down.begin(), down.end());
  return live;
}

void mark_down(client_pointer self, size_t i, const std::string& why) {
  auto& l = self->state.links[i];
  l.down_until = clock_type::now() + self->state.cfg.down_for;
  if (!l.down_logged)
    spdlog::warn("router client: the router on node '{}' failed ({}): asking the others", l.link.node, why);
  l.down_logged = true;
}

void mark_up(client_pointer self, size_t i) {
  auto& l = self->state.links[i];
  if (l.down_logged)
    spdlog::info("router client: the router on node '{}' answers again", l.link.node);
  l.down_logged = false;
  l.down_until = {};
}

/// The router's own answer (it is alive): no worker can take the request.
bool router_answer(const caf::error& err) {
  return err == router_errc::no_healthy_worker;
}

/// One call that goes to the routers in turn until one answers.
template <class Reply>
struct attempt_chain {
  std::vector<size_t> order;
  size_t next = 0;
  caf::typed_response_promise<Reply> promise;
  caf::error answer; // a router's own error
  caf::error failure; // the last failed call
};

template <class Reply>
void give_up(attempt_chain<Reply>& c) {
  if (c.answer)
    c.promise.deliver(std::move(c.answer));
  else if (c.failure)
    c.promise.deliver(std::move(c.failure));
  else
    c.promise.deliver(caf::make_error(caf::sec::invalid_argument, "router client: no router"));
}

/// Error handler of attempt i: remembers why, marks the router down when it
/// failed (not when it answered), and tries the next.
template <class Reply, class Retry>
auto on_error(client_pointer self, std::shared_ptr<attempt_chain<Reply>> c, size_t i, Retry retry) {
  return [self, c, i, retry](caf::error& err) {
    if (router_answer(err)) {
      mark_up(self, i);
      c->answer = std::move(err);
    } else {
      mark_down(self, i, error_text(err));
      c->failure = std::move(err);
    }
    retry(self, c);
  };
}

/// Tells router `i` about request `id` (prefilled or finished).
template <class Atom>
void tell_router(client_pointer self, size_t i, Atom atom, uint64_t id) {
  auto& l = self->state.links[i];
  if (l.link.local)
    self->send(l.link.local, atom, id);
  else
    self->send(l.remote, atom, wire::request_status{{id}});
}

void route_next(client_pointer self, std::shared_ptr<attempt_chain<route_answer>> c, route_query q) {
  if (c->next == c->order.size())
    return give_up(*c);
  const auto i = c->order[c->next++];
  auto& l = self->state.links[i];
  const auto t = self->state.cfg.attempt_timeout;
  // A router may hold a route while no decode worker has KV room
  // (kv_admission.hpp): at most half this attempt, so that a router that
  // holds is not taken for one that hangs.
  q.max_wait = t / 2;
  auto retry = [q](client_pointer s, std::shared_ptr<attempt_chain<route_answer>> ch) { route_next(s, ch, q); };
  auto done = [self, c, i, id = q.request_id](route_answer a) {
    mark_up(self, i);
    self->state.placed[id] = i;
    c->promise.deliver(std::move(a));
  };
  // A failed attempt (not the router's own answer) may still be held
  // there for KV room, or routed after this side stopped waiting, and
  // counted on its workers: that router forgets it (it drops a held call,
  // releases a routed one; an id it never saw is nothing to it).
  auto failed = [self, i, id = q.request_id, next = on_error(self, c, i, retry)](caf::error& err) mutable {
    if (!router_answer(err))
      tell_router(self, i, finished_atom_v, id);
    next(err);
  };
  if (l.link.local)
    self->request(l.link.local, t, route_atom_v, q)
      .then([done](route_answer& a) { done(std::move(a)); }, std::move(failed));
  else
    self->request(l.remote, t, route_atom_v, to_wire(q))
      .then([done](wire::route_reply& r) { done(from_wire(std::move(r))); }, std::move(failed));
}

void workers_next(client_pointer self, std::shared_ptr<attempt_chain<std::vector<router_worker_view>>> c) {
  if (c->next == c->order.size())
    return give_up(*c);
  const auto i = c->order[c->next++];
  auto& l = self->state.links[i];
  const auto t = self->state.cfg.attempt_timeout;
  auto retry = [](client_pointer s, std::shared_ptr<attempt_chain<std::vector<router_worker_view>>> ch) {
    workers_next(s, ch);
  };
  auto done = [self, c, i](std::vector<router_worker_view> ws) {
    mark_up(self, i);
    c->promise.deliver(std::move(ws));
  };
  if (l.link.local)
    self->request(l.link.local, t, workers_atom_v)
      .then([done](std::vector<router_worker_view>& ws) { done(std::move(ws)); }, on_error(self, c, i, retry));
  else
    self->request(l.remote, t, workers_atom_v)
      .then([done](wire::worker_views& v) { done(from_wire(v)); }, on_error(self, c, i, retry));
}

/// Tells the router that placed `id` (prefilled or finished).
template <class Atom>
void tell_placer(client_pointer self, Atom atom, uint64_t id, bool forget) {
  auto& st = self->state;
  auto it = st.placed.find(id);
  if (it == st.placed.end())
    return;
  tell_router(self, it->second, atom, id);
  if (forget)
    st.placed.erase(it);
}

router_local_actor::behavior_type client_fn(client_pointer self, router_client_config cfg) {
  auto& st = self->state;
  for (const auto& r : cfg.routers) {
    link_state l{r, {}, {}, false};
    if (!r.local)
      l.remote = remote_actor<router_api_actor>(self->system(), cfg.bridge, r.node, router_api_name);
    st.links.push_back(std::move(l));
  }
  st.cfg = std::move(cfg);
  return {
    // The router's worker-facing messages: never sent here (the client is
    // not published), ignored.
    [](join_atom, const wire::worker_join&) {},
    [](kv_events_atom, const wire::kv_event&) {},
    [](heartbeat_atom, const wire::heartbeat&) {},
    [](token_atom, const wire::token_chunk&) {},
    [](failed_atom, const wire::request_cancel&) {},
    [self](route_atom, const route_query& q) -> caf::result<route_answer> {
      auto c = std::make_shared<attempt_chain<route_answer>>();
      c->order = order_of(self->state);
      c->promise = self->make_response_promise<route_answer>();
      route_next(self, c, q);
      return c->promise;
    },
    [self](prefilled_atom, uint64_t id) { tell_placer(self, prefilled_atom_v, id, false); },
    [self](finished_atom, uint64_t id) { tell_placer(self, finished_atom_v, id, true); },
    [self](workers_atom) -> caf::result<std::vector<router_worker_view>> {
      auto c = std::make_shared<attempt_chain<std::vector<router_worker_view>>>();
      c->order = order_of(self->state);
      c->promise = self->make_response_promise<std::vector<router_worker_view>>();
      workers_next(self, c);
      return c->promise;
    },
    [self](node_down_atom, const std::string& node) {
      for (size_t i = 0; i < self->state.links.size(); ++i)
        if (self->state.links[i].link.node == node && !self->state.links[i].link.local)
          mark_down(self, i, "node '" + node + "' is down");
    },
    [](forget_atom, const std::string&) {}, // the routers hear it from their own nodes
    [self](drain_atom, const std::string& node, bool drain) -> caf::result<int32_t> {
      // Draining is per router: only a router on this node can be told.
      for (const auto& l : self->state.links)
        if (l.link.local)
          return self->delegate(l.link.local, drain_atom_v, node, drain);
      return caf::make_error(caf::sec::invalid_argument,
                             "drain needs a router on the frontend's node (this frontend uses routers on other "
                             "nodes only)");
    },
  };
}

} // namespace

caf::expected<router_local_actor> spawn_router_client(caf::actor_system& sys, router_client_config cfg) {
  if (cfg.routers.empty())
    return caf::make_error(caf::sec::invalid_argument, "router client: no router given");
  for (const auto& r : cfg.routers)
    if (!r.local && r.node.empty())
      return caf::make_error(caf::sec::invalid_argument, "router client: a remote router needs its node");
  return sys.spawn(client_fn, std::move(cfg));
}

} // namespace tessera::actors
