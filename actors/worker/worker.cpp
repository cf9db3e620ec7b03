// The worker actor: the shell around its protocols' state machines
// (worker_state.hpp). The hand-off's handlers are in worker_handoff.cpp,
// the prefix fetch's in worker_fetch.cpp.
#include "actors/worker/worker_actor.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include <spdlog/spdlog.h>

#include "actors/worker/kv_event_batches.hpp"
#include "actors/worker/kv_tiering.hpp"
#include "actors/worker/request_start.hpp"
#include "actors/worker/worker_state.hpp"
#include "common/error.hpp"
#include "engine/engine_errc.hpp"

namespace tessera::actors::worker_shell {

using engine::engine_errc;
using engine::make_engine_error;

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

namespace {

/// Sends `msg` to every router (worker_config::router and more_routers).
void tell_routers(worker_pointer self, const caf::message& msg) {
  tell(self, self->state.cfg.router, msg);
  for (const auto& r : self->state.cfg.more_routers)
    tell(self, r, msg);
}

} // namespace

void fail(worker_pointer self, const wire::actor_address& to, uint64_t id, const std::string& why) {
  spdlog::warn("worker {}: request {} failed: {}", self->state.cfg.name, id, why);
  tell(self, to, caf::make_message(failed_atom_v, wire::request_cancel{id, why}));
}

worker_actor peer(worker_pointer self, const wire::actor_address& at) {
  return self->state.peers.get(self->system(), self->state.cfg.bridge, at.node, at.actor);
}

namespace {

void update_kv_gauge(worker_pointer self) {
  if (!self->state.metrics)
    return;
  auto stats = self->state.eng->stats();
  self->state.metrics->kv_used.set(static_cast<double>(stats.num_blocks - stats.free_blocks));
}

/// Sends the engine's prefix-cache changes to the router
/// (kv_event_batches.hpp).
void publish_kv_events(worker_pointer self) {
  auto& st = self->state;
  if (st.cfg.router.empty())
    return;
  for (auto& ev : kv_event_batches(st.eng->drain_kv_events(), st.cfg.worker_id, st.next_event))
    tell_routers(self, caf::make_message(kv_events_atom_v, std::move(ev)));
}

/// Resends the whole prefix cache to the router after it lost events: the
/// changes not yet sent, then the whole view, so the view it rebuilds is
/// exact again.
void resend_kv_view(worker_pointer self) {
  auto& st = self->state;
  if (st.cfg.router.empty())
    return;
  publish_kv_events(self);
  const auto all = st.eng->cached_block_hashes();
  for (auto& ev : kv_view_events(all, st.cfg.worker_id, st.next_event))
    tell_routers(self, caf::make_message(kv_events_atom_v, std::move(ev)));
  spdlog::info("worker {}: resent its KV view to the router ({} blocks)", st.cfg.name, all.size());
}

/// Offers the node's kv store the full blocks of `tokens` this worker's pool
/// caches and the store lacks (kv_tiering.hpp): copies them here, within
/// what offer_max_bytes leaves, and leaves the puts to the store's writer.
void offer(worker_pointer self, std::span<const int32_t> tokens, const std::string& cache_salt) {
  auto& st = self->state;
  if (!st.cfg.store)
    return offer_remote(self, tokens, cache_salt); // worker_remote_offers.cpp
  auto c = copy_offer(*st.eng, *st.cfg.store, tokens, cache_salt, st.offers.room());
  auto ticket = st.offers.sent(c.offer.payload_bytes());
  if (!ticket)
    c.dropped += c.offer.blocks.size();
  st.offers.dropped(c.dropped);
  if (st.metrics)
    st.metrics->offer_dropped.inc(static_cast<double>(c.dropped));
  if (!ticket)
    return;
  c.offer.deadline = std::chrono::steady_clock::now() + st.cfg.offer_timeout;
  self->request(st.cfg.store_writer, st.cfg.offer_timeout, offer_atom_v, std::move(c.offer))
    .then(
      [self, t = *ticket](uint64_t stored) {
        if (self->state.offers.answered(t, stored) && self->state.metrics)
          self->state.metrics->store_offered.inc(static_cast<double>(stored));
      },
      [self, t = *ticket](caf::error& err) {
        self->state.offers.failed(t);
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
  const auto s = st.eng->stats();
  m.preemptions.inc(static_cast<double>(s.preemptions - st.preemptions_exported));
  m.tokens_computed.inc(static_cast<double>(s.tokens_computed - st.tokens_computed_exported));
  st.preemptions_exported = s.preemptions;
  st.tokens_computed_exported = s.tokens_computed;
}

/// Counts what `out` did of `t`'s work in model units: its prompt with its
/// first output, b + d * context per token, c when it is `done` here; what
/// is left is priced from the context it has now.
void account_units(worker_state& st, tracked& t, const engine::request_output& out, bool done) {
  const auto& u = st.cfg.units;
  double served = 0;
  if (!t.prefilled && (!out.tokens.empty() || done)) {
    served += u.per_input_token * static_cast<double>(t.context);
    t.prefilled = true;
  }
  const auto n = static_cast<int64_t>(out.tokens.size());
  served += u.decode(t.context, n);
  t.context += n;
  t.output_left = std::max<int64_t>(0, t.output_left - n);
  if (done)
    served += u.per_request;
  st.units_served += served;
  t.units_left = done ? 0
                      : (t.prefilled ? 0.0 : u.per_input_token * static_cast<double>(t.context))
                          + u.decode(t.context, t.output_left) + u.per_request;
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
      auto held = std::move(t);
      st.requests.erase(it);
      start_handoff(self, id, std::move(held));
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
  h.outstanding_units += st.receiver.outstanding(u);
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
  j.units_a = st.cfg.units.per_input_token;
  j.units_b = st.cfg.units.per_output_token;
  j.units_c = st.cfg.units.per_request;
  j.units_d = st.cfg.units.per_context_token;
  tell_routers(self, caf::make_message(join_atom_v, std::move(j)));
  tell_routers(self, caf::make_message(heartbeat_atom_v, load_of(self)));
  self->delayed_send(self, st.cfg.heartbeat_interval, heartbeat_atom_v);
}

} // namespace

caf::error admit(worker_pointer self, wire::request_handoff h) {
  auto& st = self->state;
  const auto id = h.request.id;
  auto start = plan_start(h, st.cfg.units);
  if (auto err = start_request(*st.eng, std::move(start.request), h.resume_output))
    return err;
  auto& t = st.requests[id] = tracked{h.reply_to, start.prefill_only ? h.decode_at : wire::actor_address{},
                                      std::move(h.request), {}, {}};
  t.units_left = start.units;
  t.context = start.context;
  t.output_left = start.output_left;
  if (offering(st) && !start.prefill_only) {
    t.tokens = t.original.prompt;
    t.tokens.insert(t.tokens.end(), h.resume_output.begin(), h.resume_output.end());
    t.cache_salt = t.original.cache_salt;
  }
  kick(self);
  return {};
}

namespace {

/// Fails every request this worker holds (a crash): each client hears why,
/// and the decode side of a hand-off in progress frees its reservation.
void fail_all(worker_pointer self, const std::string& why) {
  auto& st = self->state;
  for (auto& [id, t] : st.requests) {
    fail(self, t.reply_to, id, why);
    if (!t.decode_at.empty())
      self->send(peer(self, t.decode_at), cancel_atom_v, wire::request_cancel{id, why});
  }
  fail_handoffs(self, why);
  for (auto& [id, f] : st.fetching) // not started: the frontend tells the client
    f.promise.deliver(make_engine_error(engine_errc::device_error, why));
  st.fetching.clear();
  st.requests.clear();
}

worker_impl::behavior_type worker_fn(worker_pointer self, std::shared_ptr<engine::engine> eng,
                                     worker_config cfg) {
  self->state.eng = std::move(eng);
  self->state.cfg = std::move(cfg);
  self->state.fetch_costs = fetch_cost_model{self->state.cfg.fetch_cost};
  self->state.receiver = handoff_receiver{self->state.cfg.name, self->state.cfg.handoff_timeout};
  self->state.offers = store_offers{self->state.cfg.offer_max_bytes};
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
      if (st.requests.contains(id) || st.fetching.contains(id) || st.sender.holds(id) || st.receiver.holds(id))
        return make_engine_error(engine_errc::unknown_request,
                                 "request " + std::to_string(id) + " is already running here");
      if (auto rp = start_fetch(self, h))
        return *rp;
      if (auto err = admit(self, std::move(h)))
        return err;
      return caf::unit;
    },
    [self](handoff_atom, wire::request_handoff h) { return on_handoff(self, std::move(h)); },
    [self](commit_atom, const wire::kv_transfer_batch& d) { return on_commit(self, d); },
    [self](cancel_atom, const wire::request_cancel& c) {
      auto& st = self->state;
      if (auto f = st.fetching.find(c.request_id); f != st.fetching.end()) {
        f->second.promise.deliver(make_engine_error(
          engine_errc::unknown_request, "request " + std::to_string(c.request_id) + " was cancelled: " + c.reason));
        st.fetching.erase(f);
      }
      cancel_handoff(self, c.request_id, c.reason);
      if (auto t = st.requests.find(c.request_id); t != st.requests.end()) {
        if (!st.eng->abort(c.request_id))
          (void) st.eng->release_request(c.request_id); // finished, its KV held
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
        if (!st.requests.contains(id) && !st.fetching.contains(id) && !st.sender.holds(id) && !st.receiver.holds(id))
          r.unknown_ids.push_back(id);
      return r;
    },
    [self](step_atom) { on_step(self); },
    [self](kv_events_atom) { resend_kv_view(self); },
    [self](expire_atom, uint64_t id) { on_expire(self, id); },
  };
}

} // namespace

} // namespace tessera::actors::worker_shell

namespace tessera::actors {

worker_local_actor spawn_worker(caf::actor_system& sys, std::shared_ptr<engine::engine> eng,
                                worker_config cfg) {
  return caf::actor_cast<worker_local_actor>(sys.spawn<caf::detached>(worker_shell::worker_fn, std::move(eng), std::move(cfg)));
}

} // namespace tessera::actors
