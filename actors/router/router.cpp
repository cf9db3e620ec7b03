#include "actors/router/router_actor.hpp"

#include <algorithm>
#include <array>
#include <deque>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <span>
#include <unordered_map>

#include <spdlog/spdlog.h>

#include "actors/bridge/remote_actor.hpp"
#include "actors/router/autoscale_signal.hpp"
#include "actors/router/kv_admission.hpp"
#include "actors/router/load_policies.hpp"
#include "actors/router/prefix_index.hpp"
#include "actors/router/router_errc.hpp"
#include "cluster/metrics.hpp"
#include "actors/router/router_policy.hpp"
#include "actors/worker/worker_actor.hpp"
#include "common/error.hpp"
#include "engine/block_hash.hpp"

namespace tessera::actors {

namespace {

namespace wire = transport::wire;
using clock_type = std::chrono::steady_clock;

/// The router's interface plus its own timer.
using router_impl = router_local_actor::extend<
  /// Time to expire late canaries and send the due ones.
  caf::reacts_to<step_atom>>;

struct known_worker {
  wire::worker_join join;
  worker_load load;
  /// Heartbeats, node_down and canaries (worker_health.hpp).
  worker_health health{clock_type::time_point{}};
  /// Whether its turning unhealthy was logged (health_tick logs changes).
  bool logged_unhealthy = false;
  /// Bytes of one KV block (from its heartbeats' pool capacity).
  uint64_t block_bytes = 0;
  /// Units routed to it since its last heartbeat (the heartbeat may have
  /// left before they arrived, so they are added to its figure).
  double units_since_heartbeat = 0;
  /// Its last heartbeat's units_served; negative before the first.
  double units_served = -1;
};

/// What a routed request added to its workers' load estimates.
struct inflight {
  uint64_t prefill = 0;
  uint64_t decode = 0;
  int64_t decode_blocks = 0;
  int64_t prefill_tokens = 0;
  /// Model units: a * uncached prompt on the prefill worker (until the
  /// first token), b * max_tokens + c on the decode worker.
  double prefill_units = 0;
  double decode_units = 0;
};

struct router_state {
  static inline const char* name = "router";
  router_config cfg;
  std::shared_ptr<router_policy> policy;
  prefix_index index;
  std::map<uint64_t, known_worker> workers;
  std::unordered_map<std::string, uint64_t> by_address; // "node/actor"
  std::unordered_map<uint64_t, inflight> requests;
  /// Kv stores (joins with role kvstore): their id in the index and when
  /// they last reported, by node.
  struct known_store {
    uint64_t id = 0;
    std::string actor;
    clock_type::time_point last_seen;
  };
  std::unordered_map<std::string, known_store> stores;
  /// Canaries in flight: canary id -> worker id. Ids count up from a
  /// random base, apart from the frontends' request ids.
  std::unordered_map<uint64_t, uint64_t> canaries;
  uint64_t next_canary = 0;
  remote_actor_cache<worker_actor> worker_proxies;
  /// Nodes an operator drained (POST /admin/drain): their workers get no
  /// new request and show as unhealthy until undrained.
  std::set<std::string> drained;
  autoscale_signal scale;
  /// Workers and stores whose KV events showed a gap before this router
  /// knew where they are (a restarted router hears events before joins):
  /// asked to resend their view when they join.
  std::set<uint64_t> resync_on_join;
  /// Panic routing (router_options::panic_routing): whether the workers
  /// called for it when last looked at, since when, and the policy's
  /// panic_routes() then (each episode is logged once, when it starts and
  /// when it ends).
  bool panic = false;
  clock_type::time_point panic_since;
  uint64_t panic_routes_before = 0;
  /// tessera_router_panic_routes_total; null without cfg.metrics.
  cluster::metric_counter* panic_routes = nullptr;
  /// What each decode worker's KV pool has committed (kv_admission.hpp).
  kv_commitments kv;
  /// Requests waiting for KV room, first come first served.
  struct waiting_route {
    route_query query;
    caf::typed_response_promise<route_answer> promise;
    clock_type::time_point since;
  };
  std::deque<waiting_route> waiting;
  /// tessera_router_kv_admission_*; null without cfg.metrics.
  cluster::metric_counter* kv_waits = nullptr;
  cluster::metric_counter* kv_wait_timeouts = nullptr;
  cluster::metric_gauge* kv_waiting = nullptr;
  /// tessera_router_index_*; null without cfg.metrics.
  cluster::metric_gauge* index_entries = nullptr;
  cluster::metric_counter* index_evicted = nullptr;
  /// Evictions already counted (and whether the first was logged).
  uint64_t index_evicted_seen = 0;
};

/// Adds `units` of work routed to worker `w` to its load and its
/// estimate since the heartbeat.
void add_units(known_worker& w, double units) {
  w.load.outstanding_units += units;
  w.units_since_heartbeat += units;
}

void drop_units(router_state& st, uint64_t id, double units) {
  if (auto w = st.workers.find(id); w != st.workers.end())
    w->second.load.outstanding_units = std::max(0.0, w->second.load.outstanding_units - units);
}

/// Why a worker on a drained node takes no request.
constexpr const char* drained_reason = "drained by an operator (POST /admin/drain)";

using router_pointer = router_impl::stateful_pointer<router_state>;

/// tessera_router_panic_routes_total in `reg`.
cluster::metric_counter& panic_routes_counter(cluster::metrics_registry& reg) {
  return reg.counter("tessera_router_panic_routes_total",
                     "Requests routed while no worker that can decode was healthy, among the workers that were "
                     "only late (panic routing).");
}

/// The KV admission's series in `reg`.
cluster::metric_counter& kv_waits_counter(cluster::metrics_registry& reg) {
  return reg.counter("tessera_router_kv_admission_waits_total",
                     "Requests that waited at the router because no decode worker's KV pool had room for them.");
}
cluster::metric_counter& kv_wait_timeouts_counter(cluster::metrics_registry& reg) {
  return reg.counter("tessera_router_kv_admission_timeouts_total",
                     "Requests routed without KV room after waiting the admission's max_wait.");
}
cluster::metric_gauge& kv_waiting_gauge(cluster::metrics_registry& reg) {
  return reg.gauge("tessera_router_kv_admission_waiting", "Requests waiting at the router for KV room now.");
}

/// The prefix index's series in `reg`.
cluster::metric_gauge& index_entries_gauge(cluster::metrics_registry& reg) {
  return reg.gauge("tessera_router_index_entries",
                   "(block, worker or kv store) entries in the router's prefix index now.");
}
cluster::metric_counter& index_evicted_counter(cluster::metrics_registry& reg) {
  return reg.counter("tessera_router_index_evicted_entries_total",
                     "Prefix index entries dropped at its router_index_max_entries cap (the router no longer "
                     "credits those blocks to their holders).");
}

/// Publishes the prefix index's size and evictions; logs the first
/// eviction, which says the cap is below what the cluster caches.
void note_index(router_state& st) {
  const auto evicted = st.index.stats().evicted_entries;
  if (evicted > st.index_evicted_seen) {
    if (st.index_evicted_seen == 0)
      spdlog::warn("router: the prefix index is full ({} entries): it now forgets the oldest, and the router no "
                   "longer credits those cached blocks; raise router_index_max_entries (--router-index-max-entries) "
                   "if the workers' pools and stores hold more",
                   st.index.entries());
    if (st.index_evicted)
      st.index_evicted->inc(static_cast<double>(evicted - st.index_evicted_seen));
    st.index_evicted_seen = evicted;
  }
  if (st.index_entries)
    st.index_entries->set(static_cast<double>(st.index.entries()));
}

std::string key_of(const wire::actor_address& a) {
  return a.node + "/" + a.actor;
}

worker_role role_of(const wire::worker_join& j) {
  bool prefill = false, decode = false;
  for (auto r : j.roles) {
    prefill |= r == wire::node_role::prefill;
    decode |= r == wire::node_role::decode;
  }
  return prefill && decode ? worker_role::both : prefill ? worker_role::prefill : worker_role::decode;
}

bool is_store(const wire::worker_join& j) {
  return std::find(j.roles.begin(), j.roles.end(), wire::node_role::kvstore) != j.roles.end();
}

/// A node's kv store joins (or repeats its join): workers of that node are
/// credited with what it holds (router_options::host_tier_credit).
/// Asks the worker or store `j` to resend its whole KV view if its events
/// showed a gap before it joined here.
void resync_if_pending(router_pointer self, const wire::worker_join& j) {
  auto& st = self->state;
  if (st.resync_on_join.erase(j.worker_id) == 0 || !st.cfg.bridge)
    return;
  spdlog::info("router: asked {} on node '{}' to resend its KV view (events were lost before it joined)",
               j.at.actor, j.at.node);
  caf::anon_send(st.cfg.bridge, forward_atom_v, j.at.node, j.at.actor, caf::make_message(kv_events_atom_v));
}

void on_store_join(router_pointer self, const wire::worker_join& j) {
  auto& st = self->state;
  resync_if_pending(self, j);
  auto& s = st.stores[j.at.node];
  if (s.id != j.worker_id) {
    if (s.id != 0)
      st.index.remove_worker(s.id); // a restarted store: its old view is gone
    s.id = j.worker_id;
    s.actor = j.at.actor;
    spdlog::info("router: kv store {} ({} on node '{}') joined", j.worker_id, j.at.actor, j.at.node);
  }
  s.last_seen = clock_type::now();
}

void on_join(router_pointer self, const wire::worker_join& j) {
  auto& st = self->state;
  if (is_store(j))
    return on_store_join(self, j);
  resync_if_pending(self, j);
  if (auto old = st.workers.find(j.worker_id); old != st.workers.end()) {
    // Workers repeat their join with every heartbeat (so a router that
    // started late or restarted learns them); a restarted worker comes
    // back under a new id.
    old->second.health.heard(clock_type::now());
    return;
  }
  if (auto prev = st.by_address.find(key_of(j.at)); prev != st.by_address.end()) {
    // A restarted worker: same address, new id. The old one is gone, and
    // so is its cache.
    st.index.remove_worker(prev->second);
    st.kv.forget_worker(prev->second);
    st.workers.erase(prev->second);
    spdlog::info("router: worker {} at {} was replaced", prev->second, prev->first);
  }
  known_worker w;
  w.join = j;
  w.load.id = j.worker_id;
  w.load.role = role_of(j);
  if (j.units_a > 0 || j.units_b > 0 || j.units_c > 0 || j.units_d > 0)
    w.load.units = engine::model_units{j.units_a, j.units_b, j.units_c, j.units_d};
  w.health = worker_health{clock_type::now()};
  st.workers[j.worker_id] = w;
  st.by_address[key_of(j.at)] = j.worker_id;
  spdlog::info("router: worker {} ({} on node '{}', {}) joined{}", j.worker_id, j.at.actor, j.at.node,
               to_string(w.load.role),
               w.load.units ? fmt::format(", units a {:.4g} b {:.4g} c {:.4g} d {:.4g}", j.units_a, j.units_b,
                                          j.units_c, j.units_d)
                            : std::string{});
}

void on_heartbeat(router_pointer self, const wire::heartbeat& h) {
  auto& st = self->state;
  auto id = st.by_address.find(h.node_id);
  if (id == st.by_address.end())
    return; // not joined (yet): its join carries what we need
  auto& w = st.workers.at(id->second);
  w.health.heard(clock_type::now());
  w.load.active_requests = static_cast<int32_t>(h.queue_depth);
  // The worker's own figure, plus what was routed to it since it may
  // not have seen yet (validated finite and >= 0 by the wire).
  w.load.outstanding_units = h.outstanding_units + w.units_since_heartbeat;
  w.units_since_heartbeat = 0;
  if (w.units_served >= 0 && h.units_served >= w.units_served)
    st.scale.served(w.load.role, h.units_served - w.units_served);
  w.units_served = h.units_served;
  for (const auto& u : h.kv_usage)
    if (u.tier == wire::kv_tier::g1_pool && w.join.num_blocks > 0) {
      w.block_bytes = u.capacity_bytes / static_cast<uint64_t>(w.join.num_blocks);
      if (w.block_bytes > 0) {
        w.load.active_decode_blocks = static_cast<int64_t>(u.used_bytes / w.block_bytes);
        st.kv.heard(id->second, w.load.active_decode_blocks, clock_type::now());
      }
    }
}

/// Every worker's load as of `now`, with its health (healthy, late) and
/// its usable kv store brought up to date.
std::vector<worker_load> current_loads(router_state& st, clock_type::time_point now) {
  std::vector<worker_load> loads;
  loads.reserve(st.workers.size());
  for (auto& [id, w] : st.workers) {
    set_health(w.load, w.health.check(now, st.cfg.health), st.drained.contains(w.join.at.node));
    const auto uses = st.cfg.store_nodes.find(w.join.at.node); // a store node's, else its own
    auto store = st.stores.find(uses != st.cfg.store_nodes.end() ? uses->second : w.join.at.node);
    w.load.store_id = store != st.stores.end() && now - store->second.last_seen <= st.cfg.store_timeout
                        ? store->second.id
                        : 0;
    loads.push_back(w.load);
  }
  return loads;
}

/// Logs a panic episode (router_options::panic_routing) once as it starts
/// and once as it ends: routing is decided per request, but a host that
/// stays saturated would otherwise log every request.
void note_panic(router_state& st, std::span<const worker_load> loads, clock_type::time_point now) {
  const bool panic = panic_applies(loads, st.policy->options());
  if (panic == st.panic)
    return;
  st.panic = panic;
  if (panic) {
    st.panic_since = now;
    st.panic_routes_before = st.policy->panic_routes();
    size_t late = 0;
    for (const auto& l : loads)
      late += !l.healthy && l.late ? 1 : 0;
    spdlog::warn("router: no worker that can decode is healthy, {} of {} are only late (heartbeats or canaries "
                 "overdue, nothing failed): panic routing, requests go to the healthy and the late workers "
                 "until one that can decode is healthy again (/health still reports them unhealthy)",
                 late, loads.size());
  } else {
    spdlog::info("router: panic routing ended after {:.1f} s ({} request(s) routed in panic): {}",
                 std::chrono::duration<double>(now - st.panic_since).count(),
                 st.policy->panic_routes() - st.panic_routes_before,
                 std::any_of(loads.begin(), loads.end(),
                             [](const worker_load& l) { return l.healthy && l.role != worker_role::prefill; })
                   ? "a worker that can decode is healthy again"
                   : "no worker that can decode is only late any more");
  }
}

/// The prompt's tokens leave `f`'s prefill worker's queue estimate (once).
void dequeue_prefill(router_state& st, inflight& f) {
  if (auto p = st.workers.find(f.prefill); p != st.workers.end())
    p->second.load.queued_prefill_tokens =
      std::max<int64_t>(0, p->second.load.queued_prefill_tokens - f.prefill_tokens);
  f.prefill_tokens = 0;
  drop_units(st, f.prefill, f.prefill_units);
  f.prefill_units = 0;
}

/// Request `request_id` no longer counts where it was routed: its
/// workers' load and its KV commitment go (nothing if it was not routed).
void release(router_state& st, uint64_t request_id) {
  st.kv.finished(request_id);
  auto it = st.requests.find(request_id);
  if (it == st.requests.end())
    return;
  auto f = it->second;
  st.requests.erase(it);
  if (auto d = st.workers.find(f.decode); d != st.workers.end()) {
    d->second.load.active_requests = std::max(0, d->second.load.active_requests - 1);
    d->second.load.active_decode_blocks =
      std::max<int64_t>(0, d->second.load.active_decode_blocks - f.decode_blocks);
  }
  drop_units(st, f.decode, f.decode_units);
  dequeue_prefill(st, f);
}

/// Routes `q`; nullopt: it waits for KV room (kv_admission.hpp), which
/// `check_room` false skips.
std::optional<caf::expected<route_answer>> route(router_pointer self, const route_query& q, bool check_room) {
  auto& st = self->state;
  if (st.workers.empty())
    return make_router_error(router_errc::no_healthy_worker, "no worker has joined yet");
  // A new attempt under the same id: the old one is over. It counts
  // nowhere any more (not in the loads this decision reads), nor as
  // sharing the prompt with itself.
  release(st, q.request_id);
  const auto now = clock_type::now();
  auto loads = current_loads(st, now);
  note_panic(st, loads, now);
  // Every worker serves the same model: the first one's seed and block
  // size name the prompt's blocks.
  const auto& ref = st.workers.begin()->second.join;
  route_request req;
  req.prompt_tokens = static_cast<int32_t>(q.prompt.size());
  req.block_tokens = ref.block_tokens;
  req.session_id = q.session_id;
  req.max_tokens = std::max(0, q.max_tokens);
  engine::kv_hash_blocks(st.cfg.hash_key, engine::kv_hash_root(st.cfg.hash_key, ref.hash_seed, q.cache_salt), q.prompt,
                         ref.block_tokens, q.prompt.size(), req.block_hashes);
  // KV admission: what the request adds to a decode worker's pool, less
  // the prompt blocks its requests there reference already; workers
  // without room for it are left out of this decision.
  const auto& adm = st.cfg.kv_admission;
  const int64_t bt = std::max(1, ref.block_tokens);
  const auto prompt_len = static_cast<int64_t>(q.prompt.size());
  const int64_t prompt_blocks = (prompt_len + bt - 1) / bt;
  const int64_t growth =
    (prompt_len + std::min<int64_t>(req.max_tokens, adm.growth_tokens) + bt - 1) / bt - prompt_blocks;
  // Each decode worker's need, worked out once (each is a scan of what
  // is routed there).
  std::unordered_map<uint64_t, int64_t> needs;
  auto need_on = [&](uint64_t worker) {
    auto [it, fresh] = needs.try_emplace(worker, 0);
    if (fresh)
      it->second = prompt_blocks - st.kv.shared_blocks(worker, req.block_hashes);
    return it->second;
  };
  bool short_of_room = false;
  if (adm.enabled && check_room)
    for (auto& l : loads)
      if (l.role != worker_role::prefill &&
          !st.kv.fits(l.id, st.workers.at(l.id).join.num_blocks, need_on(l.id), growth)) {
        l.kv_full = true;
        short_of_room = true;
      }
  auto d = st.policy->route(req, loads, st.index);
  if (!d) {
    if (short_of_room && d.error() == router_errc::no_healthy_worker)
      return std::nullopt;
    return d.error();
  }
  if (adm.enabled)
    st.kv.routed(q.request_id, d->decode_worker, req.block_hashes, need_on(d->decode_worker), growth);
  if (d->panic && st.panic_routes)
    st.panic_routes->inc();
  auto& decode = st.workers.at(d->decode_worker);
  auto& prefill = st.workers.at(d->prefill_worker);
  inflight f;
  f.prefill = d->prefill_worker;
  f.decode = d->decode_worker;
  f.decode_blocks = (static_cast<int64_t>(q.prompt.size()) + q.max_tokens + ref.block_tokens - 1) /
                    ref.block_tokens;
  f.prefill_tokens = static_cast<int64_t>(q.prompt.size()) -
                     static_cast<int64_t>(d->cached_blocks) * ref.block_tokens;
  decode.load.active_requests += 1;
  decode.load.active_decode_blocks += f.decode_blocks;
  prefill.load.queued_prefill_tokens += f.prefill_tokens;
  // Each worker prices its part in its own units (a slower device's are
  // larger), as its heartbeats do.
  const auto& prefill_units = units_of(prefill.load, st.cfg.options.units);
  const auto& decode_units = units_of(decode.load, st.cfg.options.units);
  f.prefill_units =
    prefill_units.per_input_token * static_cast<double>(std::max<int64_t>(0, f.prefill_tokens));
  f.decode_units =
    decode_units.decode(static_cast<int64_t>(q.prompt.size()), req.max_tokens) + decode_units.per_request;
  add_units(prefill, f.prefill_units);
  add_units(decode, f.decode_units);
  st.scale.demanded(prefill.load.role, f.prefill_units);
  st.scale.demanded(decode.load.role, f.decode_units);
  st.requests[q.request_id] = f;
  st.index.touch(d->prefill_worker, req.block_hashes);
  route_answer a{prefill.join.at, decode.join.at, d->disaggregated, d->cached_blocks, std::move(d->reason), {}, 0};
  if (d->fetch_store != 0)
    for (const auto& [node, s] : st.stores)
      if (s.id == d->fetch_store) {
        a.kv_source = {node, s.actor};
        a.kv_source_blocks = d->fetch_store_blocks;
      }
  return a;
}

/// Answers the waiting requests that fit now, in order, and those that
/// waited kv_admission.max_wait without the check; stops at the first
/// that still waits (first come, first served).
void admit_waiting(router_pointer self) {
  auto& st = self->state;
  const auto now = clock_type::now();
  while (!st.waiting.empty()) {
    const auto& front = st.waiting.front();
    const auto limit = front.query.max_wait.count() >= 0 ? std::min(front.query.max_wait, st.cfg.kv_admission.max_wait)
                                                          : st.cfg.kv_admission.max_wait;
    const bool expired = now - front.since >= limit;
    auto a = route(self, st.waiting.front().query, !expired);
    if (!a)
      break;
    auto promise = std::move(st.waiting.front().promise);
    st.waiting.pop_front();
    // The figures first: whoever reads them after the answer sees them.
    if (expired && st.kv_wait_timeouts)
      st.kv_wait_timeouts->inc();
    if (st.kv_waiting)
      st.kv_waiting->set(static_cast<double>(st.waiting.size()));
    if (*a)
      promise.deliver(std::move(**a));
    else
      promise.deliver(a->error());
  }
}

/// A route call: answered now, or held in the queue for KV room (behind
/// every request waiting already).
caf::result<route_answer> on_route(router_pointer self, const route_query& q) {
  auto& st = self->state;
  if (st.waiting.empty()) {
    auto a = route(self, q, true);
    if (a && !*a)
      return a->error();
    if (a)
      return std::move(**a);
  }
  auto rp = self->make_response_promise<route_answer>();
  st.waiting.push_back({q, rp, clock_type::now()});
  if (st.kv_waits)
    st.kv_waits->inc();
  if (st.kv_waiting)
    st.kv_waiting->set(static_cast<double>(st.waiting.size()));
  return rp;
}

/// The first token arrived: the prefill worker is done with the prompt
/// (Dynamo's router does the same at prefill completion). Until the
/// request finished, its prompt used to count as queued prefill work for
/// as long as it decoded, so a disaggregated prefill worker looked busy
/// with prompts it had finished long ago.
void on_prefilled(router_pointer self, uint64_t request_id) {
  self->state.kv.prefilled(request_id, clock_type::now());
  if (auto it = self->state.requests.find(request_id); it != self->state.requests.end())
    dequeue_prefill(self->state, it->second);
}

void on_finished(router_pointer self, uint64_t request_id) {
  auto& st = self->state;
  // Still held for KV room: its caller has given up on it (a frontend
  // whose client left, a router client whose attempt timed out). It
  // leaves the queue now instead of being routed to nobody later.
  if (auto w = std::find_if(st.waiting.begin(), st.waiting.end(),
                            [&](const auto& r) { return r.query.request_id == request_id; });
      w != st.waiting.end()) {
    w->promise.deliver(caf::make_error(caf::sec::request_receiver_down,
                                       "request " + std::to_string(request_id) +
                                         " finished while it waited for KV room"));
    st.waiting.erase(w);
    if (st.kv_waiting)
      st.kv_waiting->set(static_cast<double>(st.waiting.size()));
    return; // the caller admits those behind it
  }
  release(st, request_id);
}

/// The worker's state now, for /health and /ready.
worker_status status_of(const known_worker& w, clock_type::time_point now, const health_options& opts) {
  auto v = w.health.check(now, opts);
  worker_status s;
  s.name = w.join.at.actor;
  s.node = w.join.at.node;
  s.role = w.load.role;
  s.healthy = v.healthy;
  s.reason = std::move(v.reason);
  s.fault = v.fault;
  s.last_seen_ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - w.health.last_seen()).count();
  if (auto l = w.health.last_canary_latency())
    s.canary_ms = l->count();
  return s;
}

/// Canary `id` ended: passed (no error) or failed with `why` (timed out
/// on its way when `timed_out`: lateness).
void on_canary_result(router_pointer self, uint64_t id, const std::string* why, bool timed_out = false) {
  auto& st = self->state;
  auto c = st.canaries.find(id);
  if (c == st.canaries.end())
    return; // expired already, or its worker was replaced
  const auto worker_id = c->second;
  st.canaries.erase(c);
  auto w = st.workers.find(worker_id);
  if (w == st.workers.end())
    return;
  const auto now = clock_type::now();
  if (!why) {
    w->second.health.canary_passed(id, now);
    return;
  }
  if (timed_out)
    w->second.health.canary_timed_out(id, *why, now);
  else
    w->second.health.canary_failed(id, *why, now);
}

/// Sends worker `w` a canary: a 1-token prompt, max_tokens 1, greedy, at
/// canary_priority (ahead of every user request in its engine, and taken
/// even when its queue is full). Its token comes back as token_atom.
void send_canary(router_pointer self, uint64_t worker_id, known_worker& w, clock_type::time_point now) {
  auto& st = self->state;
  const auto id = st.next_canary++;
  wire::request_handoff h;
  h.request.id = id;
  h.request.prompt = {1};
  h.request.params.max_tokens = 1;
  h.request.params.temperature = 0;
  h.request.params.ignore_eos = true;
  h.request.priority = canary_priority;
  h.reply_to = {st.cfg.node, st.cfg.name};
  w.health.canary_sent(id, now);
  st.canaries[id] = worker_id;
  auto proxy = st.worker_proxies.get(self->system(), caf::actor_cast<bridge_actor>(st.cfg.bridge),
                                     w.join.at.node, w.join.at.actor);
  self->request(proxy, st.cfg.health.canary_timeout, generate_atom_v, std::move(h))
    .then([]() {}, // admitted; its token decides
          [self, id](caf::error& err) {
            const std::string why = "not admitted: " + error_text(err);
            // No answer in time is lateness (a busy host), not a failure.
            on_canary_result(self, id, &why, err == caf::sec::request_timeout);
          });
}

/// Whether the router sends canaries (it needs its own address for their
/// tokens, and the bridge).
bool canaries_on(const router_state& st) {
  return !st.cfg.node.empty() && st.cfg.bridge && st.cfg.health.canary_interval.count() > 0;
}

/// Ticks the autoscaling signal (autoscale_signal.hpp) with the healthy
/// workers of each role present.
void autoscale_tick(router_state& st) {
  if (!st.cfg.metrics)
    return;
  const auto now = clock_type::now();
  per_role<int32_t> healthy{};
  per_role<bool> present{};
  for (const auto& [id, w] : st.workers) {
    const auto r = role_index(w.load.role);
    present[r] = true;
    if (w.health.check(now, st.cfg.health).healthy && !st.drained.contains(w.join.at.node))
      ++healthy[r];
  }
  st.scale.tick(*st.cfg.metrics, st.cfg.autoscale, healthy, present, now);
}

/// Every quarter canary interval (250 ms without canaries): late canaries
/// become failures (and are cancelled on their worker), due ones are sent,
/// and a worker that turned unhealthy, or healthy again, is logged once.
void health_tick(router_pointer self) {
  auto& st = self->state;
  autoscale_tick(st);
  const auto now = clock_type::now();
  std::erase_if(st.canaries, [&](const auto& c) { return !st.workers.contains(c.second); });
  for (auto& [worker_id, w] : st.workers) {
    if (auto late = w.health.expire_canary(now, st.cfg.health)) {
      st.canaries.erase(*late);
      caf::anon_send(st.cfg.bridge, forward_atom_v, w.join.at.node, w.join.at.actor,
                     caf::make_message(cancel_atom_v, wire::request_cancel{*late, "health canary timed out"}));
    }
    if (canaries_on(st) && w.health.canary_due(now, st.cfg.health))
      send_canary(self, worker_id, w, now);
    auto v = w.health.check(now, st.cfg.health);
    if (!v.healthy && !w.logged_unhealthy)
      spdlog::warn("router: worker {} ({} on node '{}') is unhealthy: {}", worker_id, w.join.at.actor,
                   w.join.at.node, v.reason);
    else if (v.healthy && w.logged_unhealthy)
      spdlog::info("router: worker {} ({} on node '{}') is healthy again", worker_id, w.join.at.actor,
                   w.join.at.node);
    w.logged_unhealthy = !v.healthy;
  }
  if (!st.workers.empty())
    note_panic(st, current_loads(st, now), now);
  admit_waiting(self);
  note_index(st);
  const auto tick = canaries_on(st) ? std::max(st.cfg.health.canary_interval / 4, std::chrono::milliseconds{50})
                                    : std::chrono::milliseconds{250};
  self->delayed_send(self, tick, step_atom_v);
}

router_impl::behavior_type router_fn(router_pointer self, std::shared_ptr<router_policy> policy,
                                     router_config cfg) {
  // Shared only because spawn arguments are copied; the router is its
  // only user.
  self->state.policy = std::move(policy);
  self->state.cfg = std::move(cfg);
  self->state.index = prefix_index{self->state.cfg.index};
  self->state.next_canary = std::random_device{}() | (uint64_t{std::random_device{}()} << 32);
  if (auto& reg = self->state.cfg.metrics) {
    self->state.panic_routes = &panic_routes_counter(*reg);
    self->state.kv_waits = &kv_waits_counter(*reg);
    self->state.kv_wait_timeouts = &kv_wait_timeouts_counter(*reg);
    self->state.kv_waiting = &kv_waiting_gauge(*reg);
    self->state.index_entries = &index_entries_gauge(*reg);
    self->state.index_evicted = &index_evicted_counter(*reg);
  }
  self->send(self, step_atom_v);
  return {
    [self](join_atom, const wire::worker_join& j) { on_join(self, j); },
    [self](kv_events_atom, const wire::kv_event& ev) {
      auto& st = self->state;
      auto r = st.index.apply(ev.worker_id, ev);
      if (!r.resync_requested)
        return;
      // Events were lost: ask the worker or kv store for its whole view
      // (it answers with "cleared" and every hash it holds, which ends
      // the resync).
      std::optional<wire::actor_address> at;
      if (auto w = st.workers.find(ev.worker_id); w != st.workers.end())
        at = w->second.join.at;
      for (const auto& [node, s] : st.stores)
        if (s.id == ev.worker_id)
          at = wire::actor_address{node, s.actor};
      if (st.cfg.bridge && at) {
        spdlog::warn("router: lost {} KV events of {} ({}); asked it to resend its view", r.missed, ev.worker_id,
                     key_of(*at));
        caf::anon_send(st.cfg.bridge, forward_atom_v, at->node, at->actor, caf::make_message(kv_events_atom_v));
      } else {
        st.resync_on_join.insert(ev.worker_id); // asked when it joins
        spdlog::warn("router: lost {} KV events of {}; asking for its view once it joins", r.missed, ev.worker_id);
      }
    },
    [self](heartbeat_atom, const wire::heartbeat& h) {
      on_heartbeat(self, h);
      admit_waiting(self);
    },
    [self](route_atom, const route_query& q) -> caf::result<route_answer> { return on_route(self, q); },
    [self](prefilled_atom, uint64_t id) { on_prefilled(self, id); },
    [self](finished_atom, uint64_t id) {
      on_finished(self, id);
      admit_waiting(self);
    },
    [self](node_down_atom, const std::string& node) {
      for (auto& [id, w] : self->state.workers)
        if (w.join.at.node == node) {
          w.health.node_down(node, clock_type::now()); // unhealthy until it reports again
          w.logged_unhealthy = true; // here
          self->state.index.remove_worker(id);
          spdlog::warn("router: worker {} ({} on node '{}') is down", id, w.join.at.actor, node);
        }
      if (auto s = self->state.stores.find(node); s != self->state.stores.end()) {
        self->state.index.remove_worker(s->second.id);
        self->state.stores.erase(s);
      }
    },
    [self](forget_atom, const std::string& node) {
      auto& st = self->state;
      std::vector<uint64_t> gone;
      for (const auto& [id, w] : st.workers)
        if (w.join.at.node == node)
          gone.push_back(id);
      for (auto id : gone) {
        st.index.remove_worker(id);
        st.kv.forget_worker(id);
        st.by_address.erase(key_of(st.workers.at(id).join.at));
        st.workers.erase(id);
      }
      if (auto s = st.stores.find(node); s != st.stores.end()) {
        st.index.remove_worker(s->second.id);
        st.stores.erase(s);
      }
      st.drained.erase(node);
      if (!gone.empty())
        spdlog::warn("router: node '{}' left the cluster: its {} worker(s) are forgotten", node, gone.size());
    },
    [self](drain_atom, const std::string& node, bool drain) -> int32_t {
      auto& st = self->state;
      int32_t workers = 0;
      for (const auto& [id, w] : st.workers)
        workers += w.join.at.node == node ? 1 : 0;
      if (workers > 0 && drain && st.drained.insert(node).second)
        spdlog::warn("router: node '{}' drained: its {} worker(s) get no new request", node, workers);
      if (workers > 0 && !drain && st.drained.erase(node) > 0)
        spdlog::info("router: node '{}' takes requests again", node);
      return workers;
    },
    [self](workers_atom) {
      std::vector<router_worker_view> out;
      const auto now = clock_type::now();
      auto& st = self->state;
      const auto loads = current_loads(st, now);
      const bool panic = panic_applies(loads, st.policy->options());
      for (const auto& [id, w] : st.workers) {
        router_worker_view v{w.join, w.load, status_of(w, now, st.cfg.health)};
        if (st.drained.contains(w.join.at.node)) {
          v.status.healthy = false;
          v.status.reason = drained_reason;
        }
        v.load.healthy = v.status.healthy;
        v.panic_target = panic && !w.load.healthy && w.load.late;
        out.push_back(std::move(v));
      }
      return out;
    },
    [self](token_atom, const wire::token_chunk& c) {
      if (!c.tokens.empty() || c.finish != engine::finish_reason::none)
        on_canary_result(self, c.id, nullptr);
    },
    [self](failed_atom, const wire::request_cancel& c) { on_canary_result(self, c.request_id, &c.reason); },
    [self](step_atom) { health_tick(self); },
  };
}

} // namespace

caf::expected<router_local_actor> spawn_router(caf::actor_system& sys, router_config cfg) {
  auto policy = make_router_policy(cfg.policy, cfg.options);
  if (!policy)
    return policy.error();
  if (cfg.metrics) { // on /metrics (at 0) from now, not from the actor's start
    panic_routes_counter(*cfg.metrics);
    kv_waits_counter(*cfg.metrics);
    kv_wait_timeouts_counter(*cfg.metrics);
    kv_waiting_gauge(*cfg.metrics);
  }
  if (cfg.kv_admission.growth_tokens < 0 || cfg.kv_admission.max_wait.count() < 0)
    return make_router_error(router_errc::invalid_options,
                             "kv_admission: growth_tokens and max_wait must be >= 0");
  std::shared_ptr<router_policy> shared = std::move(*policy);
  return caf::actor_cast<router_local_actor>(sys.spawn(router_fn, shared, std::move(cfg)));
}

} // namespace tessera::actors
