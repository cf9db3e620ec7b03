#include "actors/worker/worker_actor.hpp"

#include <algorithm>
#include <deque>
#include <map>
#include <random>
#include <stdexcept>
#include <unordered_map>
#include <utility>

#include <spdlog/spdlog.h>

#include "actors/bridge/remote_actor.hpp"
#include "actors/common/kv_handoff.hpp"
#include "actors/kvstore/kvstore_actor.hpp"
#include "actors/worker/kv_tiering.hpp"
#include "actors/worker/prefix_fetch.hpp"
#include "actors/worker/worker_metrics.hpp"
#include "common/error.hpp"
#include "engine/engine_errc.hpp"

namespace tessera::actors {

namespace {

namespace wire = transport::wire;
using engine::engine_errc;
using engine::make_engine_error;

/// The worker's interface plus its own loop messages.
using worker_impl = worker_local_actor::extend<
  /// Runs one engine step (the worker sends it to itself while busy).
  caf::reacts_to<step_atom>,
  /// A granted hand-off whose commit never came: free its blocks.
  caf::reacts_to<expire_atom, uint64_t>,
  /// Time to tell the router we are here and how busy.
  caf::reacts_to<heartbeat_atom>>;

/// A request this worker generates for (or prefills, then hands over).
struct tracked {
  wire::actor_address reply_to;
  /// Set while this worker only prefills: the worker that continues.
  wire::actor_address decode_at;
  /// The request as the client asked for it (the hand-off carries it).
  engine::request original;
  /// With a kv store: the sequence so far (prompt and output) and its
  /// cache salt, offered to the store when it finishes.
  std::vector<int32_t> tokens;
  std::string cache_salt;
  /// Model units of its work still to do here (worker_config::units): a *
  /// prompt until prefilled, b per output token left, c until it ends.
  double units_left = 0;
  /// Whether its prompt is computed (its first output came, or its KV was
  /// handed over from a prefill worker).
  bool prefilled = false;
};

/// A hand-off granted here, waiting for its blocks and commit.
struct granted {
  wire::kv_grant grant;
  wire::actor_address reply_to;
  /// With a kv store: the exported sequence and its cache salt.
  std::vector<int32_t> tokens;
  std::string cache_salt;
  /// Units of the decode left once committed: b * (max_tokens - 1) + c.
  double units = 0;
};

/// A hand-off that found too few free blocks: it waits (first come, first
/// served) until steps free some, for at most handoff_timeout, as a
/// request waits in a scheduler queue; the prefill side holds its KV
/// meanwhile.
struct waiting_grant {
  wire::request_handoff handoff;
  caf::typed_response_promise<wire::kv_grant> promise;
  std::chrono::steady_clock::time_point deadline;
};

/// A request waiting for the stores' blocks before it enters the engine.
struct pending_fetch {
  wire::request_handoff handoff;
  caf::typed_response_promise<caf::unit_t> promise;
  prefix_fetch fetch;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
};

struct worker_state {
  static inline const char* name = "worker";

  std::shared_ptr<engine::engine> eng;
  worker_config cfg;
  std::unordered_map<uint64_t, tracked> requests;
  std::unordered_map<uint64_t, granted> grants;
  std::deque<waiting_grant> waiting_grants;
  std::unordered_map<uint64_t, pending_fetch> fetching;
  remote_actor_cache<worker_actor> peers;
  remote_actor_cache<kvstore_actor> stores;
  std::unique_ptr<worker_metrics> metrics;
  bool stepping = false;
  /// When the step message now queued was sent (step delay, worker_metrics).
  std::chrono::steady_clock::time_point step_due;
  /// The backend's emulated wall seconds already exported
  /// (tessera_sim_step_wall_seconds_total).
  double emulated_exported = 0;
  /// Payload bytes of offers the store's writer has not answered yet.
  uint64_t offer_bytes_in_flight = 0;
  uint64_t next_batch = 1;
  uint64_t next_event = 0; // the router expects a worker's first event to be 0
  /// Whether a prefix fetch pays (fetch_cost.hpp), and the engine's
  /// tokens computed already fed to it.
  fetch_cost_model fetch_costs;
  uint64_t tokens_computed_seen = 0;
  /// Model units of work done since the worker started (heartbeat).
  double units_served = 0;
};

using worker_pointer = worker_impl::stateful_pointer<worker_state>;

/// Whether finished sequences are offered to the node's kv store.
bool offering(const worker_state& st) {
  return st.cfg.store && st.cfg.store_writer;
}

void update_kv_gauge(worker_pointer self) {
  if (!self->state.metrics)
    return;
  auto stats = self->state.eng->stats();
  self->state.metrics->kv_used.set(static_cast<double>(stats.num_blocks - stats.free_blocks));
}

void kick(worker_pointer self) {
  if (!self->state.stepping && self->state.eng->has_unfinished()) {
    self->state.stepping = true;
    self->state.step_due = std::chrono::steady_clock::now();
    self->send(self, step_atom_v);
  }
}

/// Sends `msg` to `to` (any node) through the bridge, one-way.
void tell(worker_pointer self, const wire::actor_address& to, caf::message msg) {
  if (to.empty())
    return;
  // anon: the bridge answers a forward with a message this actor does not take.
  caf::anon_send(self->state.cfg.bridge, forward_atom_v, to.node, to.actor, std::move(msg));
}

void fail(worker_pointer self, const wire::actor_address& to, uint64_t id, const std::string& why) {
  spdlog::warn("worker {}: request {} failed: {}", self->state.cfg.name, id, why);
  tell(self, to, caf::make_message(failed_atom_v, wire::request_cancel{id, why}));
}

worker_actor peer(worker_pointer self, const wire::actor_address& at) {
  return self->state.peers.get(self->system(), self->state.cfg.bridge, at.node, at.actor);
}

/// Ends a hand-off this worker prefilled: frees the held blocks and tells
/// the client (and the decode side) if it failed.
void drop_handoff(worker_pointer self, uint64_t id, const caf::error& err) {
  auto it = self->state.requests.find(id);
  if (it == self->state.requests.end())
    return;
  (void) self->state.eng->release_request(id);
  if (err) {
    fail(self, it->second.reply_to, id, "hand-off to " + it->second.decode_at.actor + " on node '" +
                                          it->second.decode_at.node + "' failed: " + error_text(err));
    self->send(peer(self, it->second.decode_at), cancel_atom_v,
               wire::request_cancel{id, "the hand-off failed"});
  }
  self->state.requests.erase(it);
}

/// P's side of a hand-off, after the prefill finished: export, get a grant,
/// put the blocks, commit (the state diagram in worker_actor.hpp).
void start_handoff(worker_pointer self, uint64_t id) {
  auto& st = self->state;
  auto& t = st.requests.at(id);
  auto src = st.eng->export_request_blocks(id);
  if (!src)
    return drop_handoff(self, id, src.error());
  auto h = make_handoff(t.original, *src);
  h.reply_to = t.reply_to;
  auto d = peer(self, t.decode_at);
  const auto timeout = st.cfg.handoff_timeout;
  self->request(d, timeout, handoff_atom_v, h)
    .then(
      [self, id, d, timeout, src = std::move(*src)](wire::kv_grant& grant) {
        auto& st = self->state;
        auto it = st.requests.find(id);
        if (it == st.requests.end()) // cancelled meanwhile
          return self->send(d, cancel_atom_v, wire::request_cancel{id, "cancelled"});
        auto puts = plan_puts(*st.eng, src, st.cfg.pool_region, grant, st.next_batch++);
        if (!puts)
          return drop_handoff(self, id, puts.error());
        uint64_t bytes = 0;
        for (const auto& b : puts->batch.blocks)
          bytes += b.size;
        const auto started = std::chrono::steady_clock::now();
        self->request(st.cfg.bridge, timeout, transfer_atom_v, it->second.decode_at.node, puts->batch)
          .then(
            [self, id, d, timeout, bytes, started, descriptor = std::move(puts->descriptor)]() {
              if (auto* m = self->state.metrics.get()) {
                m->transfer_bytes.inc(static_cast<double>(bytes));
                m->transfer_seconds.inc(
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
              }
              (void) self->state.eng->release_request(id);
              self->request(d, timeout, commit_atom_v, descriptor)
                .then([self, id]() { self->state.requests.erase(id); },
                      [self, id](caf::error& err) { drop_handoff(self, id, err); });
            },
            [self, id](caf::error& err) { drop_handoff(self, id, err); });
      },
      [self, id](caf::error& err) { drop_handoff(self, id, err); });
}

/// Reserves blocks for hand-off `h` and records the grant.
caf::expected<wire::kv_grant> try_grant(worker_pointer self, const wire::request_handoff& h) {
  auto& st = self->state;
  auto grant = grant_handoff(*st.eng, h, st.cfg.pool_region);
  if (!grant)
    return grant.error();
  auto& g = st.grants[grant->request_id] = granted{*grant, h.reply_to, {}, {}};
  g.units = st.cfg.units.per_output_token * static_cast<double>(std::max(0, h.request.params.max_tokens - 1))
            + st.cfg.units.per_request;
  if (offering(st)) {
    g.tokens = h.kv->tokens;
    g.cache_salt = h.request.cache_salt;
  }
  self->delayed_send(self, st.cfg.handoff_timeout, expire_atom_v, grant->request_id);
  return grant;
}


/// Grants the waiting hand-offs that fit now, in order; fails those past
/// their deadline.
void grant_waiting(worker_pointer self) {
  auto& q = self->state.waiting_grants;
  const auto now = std::chrono::steady_clock::now();
  while (!q.empty()) {
    auto& w = q.front();
    if (now > w.deadline) {
      w.promise.deliver(make_engine_error(engine_errc::no_free_blocks,
                                          "worker " + self->state.cfg.name + " freed too few KV blocks for request " +
                                            std::to_string(w.handoff.request.id) + " within the hand-off timeout"));
      q.pop_front();
      continue;
    }
    auto g = try_grant(self, w.handoff);
    if (!g && g.error() == engine_errc::no_free_blocks)
      return;
    if (g)
      w.promise.deliver(std::move(*g));
    else
      w.promise.deliver(g.error());
    q.pop_front();
  }
}

/// Sends the engine's prefix-cache changes to the router, one kv_event per
/// run of same-kind changes, in order.
void publish_kv_events(worker_pointer self) {
  auto& st = self->state;
  if (st.cfg.router.empty())
    return;
  auto changes = st.eng->drain_kv_events();
  using kind = engine::kv_cache_event::kind;
  for (size_t i = 0; i < changes.size();) {
    wire::kv_event ev;
    ev.worker_id = st.cfg.worker_id;
    ev.event_id = st.next_event++;
    ev.tier = wire::kv_tier::g1_pool;
    const auto what = changes[i].what;
    ev.kind = what == kind::stored    ? wire::kv_event_kind::stored
              : what == kind::removed ? wire::kv_event_kind::removed
                                      : wire::kv_event_kind::cleared;
    for (; i < changes.size() && changes[i].what == what; ++i)
      if (what != kind::cleared)
        ev.block_hashes.push_back(changes[i].hash);
    tell(self, st.cfg.router, caf::make_message(kv_events_atom_v, std::move(ev)));
  }
}

/// Resends the whole prefix cache to the router after it lost events: the
/// changes not yet sent, then "cleared" and the cached hashes, in events
/// of at most wire_limits::max_event_hashes, so the view it rebuilds is
/// exact again.
void resend_kv_view(worker_pointer self) {
  auto& st = self->state;
  if (st.cfg.router.empty())
    return;
  publish_kv_events(self);
  auto send = [&](wire::kv_event_kind kind, std::vector<engine::kv_block_hash> hashes) {
    wire::kv_event ev;
    ev.worker_id = st.cfg.worker_id;
    ev.event_id = st.next_event++;
    ev.tier = wire::kv_tier::g1_pool;
    ev.kind = kind;
    ev.block_hashes = std::move(hashes);
    tell(self, st.cfg.router, caf::make_message(kv_events_atom_v, std::move(ev)));
  };
  send(wire::kv_event_kind::cleared, {});
  const auto all = st.eng->cached_block_hashes();
  const size_t chunk = wire::wire_limits{}.max_event_hashes;
  for (size_t i = 0; i < all.size(); i += chunk)
    send(wire::kv_event_kind::stored,
         {all.begin() + i, all.begin() + std::min(all.size(), i + chunk)});
  spdlog::info("worker {}: resent its KV view to the router ({} blocks)", st.cfg.name, all.size());
}

/// Offers the node's kv store the full blocks of `tokens` this worker's pool
/// caches and the store lacks (kv_tiering.hpp): copies them here, within
/// what offer_max_bytes leaves, and leaves the puts to the store's writer.
void offer(worker_pointer self, std::span<const int32_t> tokens, const std::string& cache_salt) {
  auto& st = self->state;
  const auto max = st.cfg.offer_max_bytes;
  const auto room = max > st.offer_bytes_in_flight ? max - st.offer_bytes_in_flight : 0;
  auto c = copy_offer(*st.eng, *st.cfg.store, tokens, cache_salt, room);
  if (st.metrics)
    st.metrics->offer_dropped.inc(static_cast<double>(c.dropped));
  if (c.offer.blocks.empty())
    return;
  const auto bytes = c.offer.payload_bytes();
  st.offer_bytes_in_flight += bytes;
  c.offer.deadline = std::chrono::steady_clock::now() + st.cfg.offer_timeout;
  self->request(st.cfg.store_writer, st.cfg.offer_timeout, offer_atom_v, std::move(c.offer))
    .then(
      [self, bytes](uint64_t stored) {
        self->state.offer_bytes_in_flight -= bytes;
        if (auto* m = self->state.metrics.get())
          m->store_offered.inc(static_cast<double>(stored));
      },
      [self, bytes](caf::error& err) {
        self->state.offer_bytes_in_flight -= bytes;
        spdlog::warn("worker {}: offering blocks to the kv store failed: {}", self->state.cfg.name,
                     error_text(err));
      });
}

/// Counts a step that started at `started` and took `took` seconds (see
/// worker_metrics.hpp).
void count_step(worker_state& st, std::chrono::steady_clock::time_point started, double took) {
  auto& m = *st.metrics;
  m.steps.inc();
  m.busy_seconds.inc(took);
  m.step_delay_seconds.inc(std::max(0.0, std::chrono::duration<double>(started - st.step_due).count()));
  const double emulated = st.eng->get_backend().emulated_wall_seconds();
  m.sim_wall_seconds.inc(emulated - st.emulated_exported);
  st.emulated_exported = emulated;
}

/// Counts what `out` did of `t`'s work in model units: its prompt with its
/// first output, b per token, c when it is `done` here.
void account_units(worker_state& st, tracked& t, const engine::request_output& out, bool done) {
  const auto& u = st.cfg.units;
  double served = 0;
  if (!t.prefilled && (!out.tokens.empty() || done)) {
    served += u.per_input_token * static_cast<double>(t.original.prompt.size());
    t.prefilled = true;
  }
  served += u.per_output_token * static_cast<double>(out.tokens.size());
  if (done)
    served += u.per_request;
  st.units_served += served;
  t.units_left = done ? 0 : std::max(0.0, t.units_left - served);
}

void on_step(worker_pointer self) {
  auto& st = self->state;
  const auto started = std::chrono::steady_clock::now();
  auto outputs = st.eng->step();
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const auto computed = st.eng->stats().tokens_computed;
  st.fetch_costs.observe_compute(computed - st.tokens_computed_seen, took);
  st.tokens_computed_seen = computed;
  if (st.metrics)
    count_step(st, started, took);
  // KV events first: a client that saw this step's tokens and asks the
  // router again finds the router already knows what this step cached
  // (both go through the bridge, in order).
  publish_kv_events(self);
  for (auto& out : outputs) {
    auto it = st.requests.find(out.id);
    if (it == st.requests.end())
      continue;
    auto& t = it->second;
    const bool prefill_done = !t.decode_at.empty() && out.finish == engine::finish_reason::length;
    if (prefill_done)
      out.finish = engine::finish_reason::none; // the client's request goes on elsewhere
    const auto finished = out.finish != engine::finish_reason::none;
    const auto id = out.id;
    account_units(st, t, out, finished || prefill_done || static_cast<bool>(out.error));
    if (offering(st) && prefill_done) {
      // The prompt's blocks serve the node's other workers from now on, not
      // only once the turn ends on the decode worker.
      auto seq = t.original.prompt;
      seq.insert(seq.end(), out.tokens.begin(), out.tokens.end());
      offer(self, seq, t.original.cache_salt);
    } else if (offering(st)) {
      t.tokens.insert(t.tokens.end(), out.tokens.begin(), out.tokens.end());
      if (finished && out.finish != engine::finish_reason::abort)
        offer(self, t.tokens, t.cache_salt);
    }
    if (out.error) {
      // A bad number (NaN logits: corrupt KV or weights) ends this one
      // request with an error naming this worker; the worker goes on.
      fail(self, t.reply_to, id, "worker " + st.cfg.name + ": " + error_message(out.error));
      st.requests.erase(it);
      continue;
    }
    tell(self, t.reply_to, caf::make_message(token_atom_v, std::move(out)));
    if (prefill_done) {
      start_handoff(self, id);
    } else if (finished) {
      if (!t.decode_at.empty()) // finished by a stop during prefill: held by keep_kv
        (void) st.eng->release_request(id);
      st.requests.erase(it);
    }
  }
  update_kv_gauge(self);
  grant_waiting(self);
  st.stepping = false;
  kick(self);
}

wire::heartbeat load_of(worker_pointer self) {
  auto& st = self->state;
  auto stats = st.eng->stats();
  const auto bb = st.eng->get_backend().layout().block_bytes();
  wire::heartbeat h;
  h.node_id = st.cfg.node + "/" + st.cfg.name; // the router's key for this worker
  h.queue_depth = static_cast<uint32_t>(st.eng->num_unfinished());
  h.load = static_cast<float>(st.eng->num_unfinished()) / static_cast<float>(std::max<size_t>(1, st.cfg.max_waiting));
  // Work accepted but not in the engine yet counts too: hand-offs granted
  // or waiting for blocks, and requests waiting for a prefix fetch.
  const auto& u = st.cfg.units;
  for (const auto& [id, t] : st.requests)
    h.outstanding_units += t.units_left;
  for (const auto& [id, g] : st.grants)
    h.outstanding_units += g.units;
  for (const auto& w : st.waiting_grants)
    h.outstanding_units += u.per_output_token * static_cast<double>(std::max(0, w.handoff.request.params.max_tokens - 1))
                           + u.per_request;
  for (const auto& [id, f] : st.fetching)
    h.outstanding_units += u.cost(static_cast<int64_t>(f.handoff.request.prompt.size()),
                                  std::max(0, f.handoff.request.params.max_tokens));
  h.units_served = st.units_served;
  h.kv_usage.push_back({wire::kv_tier::g1_pool,
                        static_cast<uint64_t>(stats.num_blocks - stats.free_blocks) * bb,
                        static_cast<uint64_t>(stats.num_blocks) * bb});
  return h;
}

void report_to_router(worker_pointer self) {
  auto& st = self->state;
  if (st.cfg.router.empty())
    return;
  const auto& be = st.eng->get_backend();
  wire::worker_join j;
  j.worker_id = st.cfg.worker_id;
  j.at = {st.cfg.node, st.cfg.name};
  j.roles = st.cfg.roles;
  j.model_fingerprint = be.model_fingerprint();
  j.block_tokens = be.layout().block_tokens;
  j.num_blocks = be.num_blocks();
  j.hash_seed = st.eng->hash_seed();
  tell(self, st.cfg.router, caf::make_message(join_atom_v, std::move(j)));
  tell(self, st.cfg.router, caf::make_message(heartbeat_atom_v, load_of(self)));
  self->delayed_send(self, st.cfg.heartbeat_interval, heartbeat_atom_v);
}

/// Puts request h into the engine (as a prefill for h.decode_at, or to
/// generate to the end) and starts stepping.
/// Adds `r` to `eng`; with `output` (request_handoff::resume_output), as
/// the continuation of a run that already produced it: an import of r's
/// prompt + output with no KV, which the engine computes (its prefix cache
/// serving what it holds) before it samples at output position
/// output.size() with r's seed.
caf::error start_request(engine::engine& eng, engine::request r, const std::vector<int32_t>& output) {
  if (output.empty())
    return eng.add_request(std::move(r));
  engine::kv_export resume;
  resume.model_fingerprint = eng.get_backend().model_fingerprint();
  resume.layout = eng.get_backend().layout();
  resume.tokens = r.prompt;
  resume.tokens.insert(resume.tokens.end(), output.begin(), output.end());
  resume.prompt_len = static_cast<int32_t>(r.prompt.size());
  resume.num_computed = 0;
  resume.seed = r.params.seed ? *r.params.seed : std::random_device{}();
  return eng.import_request(std::move(r), resume);
}

caf::error admit(worker_pointer self, wire::request_handoff h) {
  auto& st = self->state;
  const auto id = h.request.id;
  auto r = h.request;
  const bool prefill_only = !h.decode_at.empty() && r.params.max_tokens > 1;
  if (prefill_only) {
    r.keep_kv = true;
    r.continues_elsewhere = true; // the decode worker emits what could start a stop string
    r.params.max_tokens = 1;
    r.params.min_tokens = std::min(r.params.min_tokens, 1);
  }
  if (auto err = start_request(*st.eng, std::move(r), h.resume_output))
    return err;
  const auto& u = st.cfg.units;
  const auto prompt = static_cast<int64_t>(h.request.prompt.size());
  const double units_left =
    prefill_only ? u.cost(prompt, 1)
                 : u.cost(prompt, std::max<int64_t>(0, int64_t{h.request.params.max_tokens}
                                                         - static_cast<int64_t>(h.resume_output.size())));
  auto& t = st.requests[id] = tracked{h.reply_to, prefill_only ? h.decode_at : wire::actor_address{},
                                      std::move(h.request), {}, {}};
  t.units_left = units_left;
  if (offering(st) && !prefill_only) {
    t.tokens = t.original.prompt;
    t.tokens.insert(t.tokens.end(), h.resume_output.begin(), h.resume_output.end());
    t.cache_salt = t.original.cache_salt;
  }
  kick(self);
  return {};
}

/// Ends the fetch of request `id`: the request enters the engine with what
/// the stores brought, and generate gets its answer.
void finish_fetch(worker_pointer self, uint64_t id) {
  auto node = self->state.fetching.extract(id);
  if (node.empty())
    return;
  auto& f = node.mapped();
  if (auto* m = self->state.metrics.get()) {
    m->fetch_ended(f.fetch.outcome());
    m->fetch_seconds.observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - f.started).count());
  }
  if (auto err = admit(self, std::move(f.handoff)))
    f.promise.deliver(std::move(err));
  else
    f.promise.deliver(caf::unit);
}

/// Whether to fetch the blocks `need` lacks for request `h` from the
/// first store it would ask, and the fetch's deadline (fetch_cost.hpp).
fetch_plan plan_fetch(worker_state& st, const prefix_need& need, const wire::request_handoff& h) {
  const auto& layout = st.eng->get_backend().layout();
  const auto& from = st.cfg.store_at.empty() ? h.kv_source : st.cfg.store_at;
  const auto blocks = static_cast<int64_t>(need.hashes.size() - need.cached);
  const int64_t tokens = blocks * layout.block_tokens;
  const int64_t start = static_cast<int64_t>(need.cached) * layout.block_tokens;
  return st.fetch_costs.plan(from.node + "/" + from.actor, static_cast<uint64_t>(blocks) * layout.block_bytes(),
                             tokens, st.eng->get_backend().prefill_wall_seconds(tokens, start));
}

/// Sends request `id`'s next ask (prefix_fetch::next) to its store and
/// feeds the answer back; when the fetch says it is over, finish_fetch.
void fetch_next(worker_pointer self, uint64_t id) {
  auto& st = self->state;
  auto it = st.fetching.find(id);
  if (it == st.fetching.end())
    return;
  const auto now = std::chrono::steady_clock::now();
  auto ask = it->second.fetch.next(now);
  if (!ask)
    return finish_fetch(self, id);
  const auto& hashes = it->second.fetch.need().hashes;
  wire::kv_fetch_request q{st.eng->hash_seed(),
                           {hashes.begin() + static_cast<std::ptrdiff_t>(ask->first),
                            hashes.begin() + static_cast<std::ptrdiff_t>(ask->end)},
                           st.cfg.fetch_max_bytes};
  const auto at = ask->store;
  const bool peer = ask->peer;
  const size_t first = ask->first;
  auto store = st.stores.get(self->system(), st.cfg.bridge, at.node, at.actor);
  auto took = [now] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - now).count(); };
  self->request(store, ask->timeout, fetch_atom_v, std::move(q))
    .then(
      [self, id, first, peer, at, took](wire::kv_fetch_reply& reply) {
        auto& st = self->state;
        uint64_t bytes = 0;
        for (const auto& b : reply.blocks)
          bytes += b.data.size();
        if (!reply.busy)
          st.fetch_costs.observe_fetch(at.node + "/" + at.actor, bytes, took());
        auto it = st.fetching.find(id);
        if (it == st.fetching.end())
          return; // computed (or cancelled) meanwhile
        auto& f = it->second.fetch;
        const auto r = insert_fetched(*st.eng, f.need().hashes, first, reply);
        const size_t got = r.cached > f.need().cached ? r.cached - f.need().cached : 0;
        if (auto* m = st.metrics.get()) {
          (peer ? m->peer_fetched : m->store_fetched).inc(static_cast<double>(got));
          m->fetch_refused.inc(static_cast<double>(r.refused));
        }
        if (r.refused > 0)
          spdlog::warn("worker {}: refused {} block(s) fetched for request {} (hash, layout or checksum "
                       "mismatch); computing them instead",
                       st.cfg.name, r.refused, id);
        f.answered(peer, r.cached, r.refused, reply.busy, reply.more);
        fetch_next(self, id);
      },
      [self, id, peer, at, took](caf::error& err) {
        const bool timed_out = err == caf::sec::request_timeout;
        if (timed_out) // the store took at least this long
          self->state.fetch_costs.observe_fetch(at.node + "/" + at.actor, 0, took());
        auto it = self->state.fetching.find(id);
        if (it == self->state.fetching.end())
          return;
        spdlog::warn("worker {}: fetching request {}'s prefix from {} on node '{}' failed ({}); computing it instead",
                     self->state.cfg.name, id, at.actor, at.node, error_text(err));
        it->second.fetch.failed(peer, timed_out);
        fetch_next(self, id);
      });
}

/// Fails every request this worker holds (a crash): each client hears why,
/// and the decode side of a hand-off in progress frees its reservation.
void fail_all(worker_pointer self, const std::string& why) {
  auto& st = self->state;
  for (auto& [id, t] : st.requests) {
    fail(self, t.reply_to, id, why);
    if (!t.decode_at.empty())
      self->send(peer(self, t.decode_at), cancel_atom_v, wire::request_cancel{id, why});
  }
  for (auto& [id, g] : st.grants)
    fail(self, g.reply_to, id, why);
  for (auto& w : st.waiting_grants) // the prefill side tells the client
    w.promise.deliver(make_engine_error(engine_errc::device_error, why));
  for (auto& [id, f] : st.fetching) // not started: the frontend tells the client
    f.promise.deliver(make_engine_error(engine_errc::device_error, why));
  st.fetching.clear();
  st.requests.clear();
  st.grants.clear();
  st.waiting_grants.clear();
}

worker_impl::behavior_type worker_fn(worker_pointer self, std::shared_ptr<engine::engine> eng,
                                     worker_config cfg) {
  self->state.eng = std::move(eng);
  self->state.cfg = std::move(cfg);
  self->state.fetch_costs = fetch_cost_model{self->state.cfg.fetch_cost};
  self->state.eng->record_kv_events(!self->state.cfg.router.empty());
  if (self->state.cfg.metrics)
    self->state.metrics =
      std::make_unique<worker_metrics>(*self->state.cfg.metrics, self->state.cfg.name);
  self->set_exception_handler([self](caf::scheduled_actor*, std::exception_ptr& ep) -> caf::error {
    std::string what = "an unknown exception";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    const auto why = "worker " + self->state.cfg.name + " on node '" + self->state.cfg.node +
                     "' crashed: " + what;
    spdlog::error("{}", why);
    fail_all(self, why);
    return caf::make_error(caf::sec::runtime_error, why);
  });
  report_to_router(self);
  return {
    [self](heartbeat_atom) { report_to_router(self); },
    [self](fault_atom, const std::string& fault) {
      const auto& name = self->state.cfg.name;
      if (!self->state.cfg.fault_injection)
        return spdlog::warn("worker {}: fault '{}' ignored (fault injection is off)", name, fault);
      if (fault != "crash")
        return spdlog::warn("worker {}: unknown fault '{}' ignored", name, fault);
      throw std::runtime_error("injected fault '" + fault + "'");
    },
    [self](generate_atom, wire::request_handoff h) -> caf::result<void> {
      auto& st = self->state;
      const auto id = h.request.id;
      const auto queued = st.eng->num_unfinished() + st.fetching.size();
      // A health canary gets in even so: a full queue is not a dead worker.
      if (queued >= st.cfg.max_waiting && h.request.priority != canary_priority)
        return make_engine_error(engine_errc::overloaded,
                                 "worker " + st.cfg.name + " has " + std::to_string(queued) + " requests; retry later");
      if (st.requests.contains(id) || st.fetching.contains(id))
        return make_engine_error(engine_errc::unknown_request,
                                 "request " + std::to_string(id) + " is already running here");
      if (h.resume_output.empty() && (!st.cfg.store_at.empty() || !h.kv_source.empty())) {
        auto need = prefix_need_of(*st.eng, h.request.prompt, h.request.cache_salt);
        if (!need.satisfied()) {
          const auto plan = plan_fetch(st, need, h);
          if (plan.fetch) {
            auto rp = self->make_response_promise<caf::unit_t>();
            const auto now = std::chrono::steady_clock::now();
            prefix_fetch fetch{std::move(need), st.cfg.store_at, h.kv_source,
                               static_cast<size_t>(std::max(0, h.kv_source_blocks)),
                               transport::wire::wire_limits{}.max_blocks_per_batch, now + plan.deadline};
            st.fetching.emplace(id, pending_fetch{std::move(h), rp, std::move(fetch), now});
            fetch_next(self, id);
            return rp;
          }
          if (st.metrics)
            st.metrics->fetch_ended("skipped");
        }
      }
      if (auto err = admit(self, std::move(h)))
        return err;
      return caf::unit;
    },
    [self](handoff_atom, const wire::request_handoff& h) -> caf::result<wire::kv_grant> {
      auto& st = self->state;
      if (st.waiting_grants.empty()) {
        auto grant = try_grant(self, h);
        if (grant)
          return std::move(*grant);
        if (grant.error() != engine_errc::no_free_blocks)
          return grant.error();
      }
      auto rp = self->make_response_promise<wire::kv_grant>();
      st.waiting_grants.push_back({h, rp, std::chrono::steady_clock::now() + st.cfg.handoff_timeout});
      return rp;
    },
    [self](commit_atom, const wire::kv_transfer_batch& d) -> caf::result<void> {
      auto& st = self->state;
      auto it = st.grants.find(d.request_id);
      if (it == st.grants.end())
        return make_engine_error(engine_errc::unknown_request,
                                 "worker " + st.cfg.name + " granted no hand-off for request " +
                                   std::to_string(d.request_id));
      auto g = std::move(it->second);
      st.grants.erase(it);
      if (auto err = commit_handoff(*st.eng, g.grant, d))
        return err;
      auto& t = st.requests[d.request_id] = tracked{g.reply_to, {}, {}, std::move(g.tokens), std::move(g.cache_salt)};
      t.units_left = g.units;
      t.prefilled = true;
      kick(self);
      return caf::unit;
    },
    [self](cancel_atom, const wire::request_cancel& c) {
      auto& st = self->state;
      if (auto f = st.fetching.find(c.request_id); f != st.fetching.end()) {
        f->second.promise.deliver(make_engine_error(
          engine_errc::unknown_request, "request " + std::to_string(c.request_id) + " was cancelled: " + c.reason));
        st.fetching.erase(f);
      }
      for (auto w = st.waiting_grants.begin(); w != st.waiting_grants.end(); ++w)
        if (w->handoff.request.id == c.request_id) {
          w->promise.deliver(make_engine_error(engine_errc::unknown_request, "request " + std::to_string(c.request_id) +
                                                                                " was cancelled: " + c.reason));
          st.waiting_grants.erase(w);
          break;
        }
      if (auto g = st.grants.find(c.request_id); g != st.grants.end()) {
        (void) st.eng->cancel_import(c.request_id);
        st.grants.erase(g);
      }
      if (auto t = st.requests.find(c.request_id); t != st.requests.end()) {
        if (!st.eng->abort(c.request_id))
          (void) st.eng->release_request(c.request_id); // held for a hand-off
        else if (st.metrics)
          st.metrics->aborted.inc();
        st.requests.erase(t);
      }
      update_kv_gauge(self);
      grant_waiting(self);
    },
    [self](load_atom) { return load_of(self); },
    [self](status_atom, const wire::request_status& q) {
      const auto& st = self->state;
      wire::request_status_reply r;
      for (auto id : q.request_ids)
        if (!st.requests.contains(id) && !st.fetching.contains(id) && !st.grants.contains(id))
          r.unknown_ids.push_back(id);
      return r;
    },
    [self](step_atom) { on_step(self); },
    [self](kv_events_atom) { resend_kv_view(self); },
    [self](expire_atom, uint64_t id) {
      auto& st = self->state;
      if (auto g = st.grants.find(id); g != st.grants.end()) {
        spdlog::warn("worker {}: hand-off of request {} was granted but never committed; freed",
                     st.cfg.name, id);
        (void) st.eng->cancel_import(id);
        st.grants.erase(g);
        grant_waiting(self);
      }
    },
  };
}

} // namespace

worker_local_actor spawn_worker(caf::actor_system& sys, std::shared_ptr<engine::engine> eng,
                                worker_config cfg) {
  return caf::actor_cast<worker_local_actor>(sys.spawn<caf::detached>(worker_fn, std::move(eng), std::move(cfg)));
}

} // namespace tessera::actors
