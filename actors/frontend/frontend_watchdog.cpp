// The frontend's stream watchdog: every watch_interval it moves to another
// worker each stream whose worker is unhealthy, whose chunks wait behind a
// lost one, that stalled, or that its workers no longer hold.
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "actors/frontend/frontend_state.hpp"

namespace tessera::actors::frontend::detail {

namespace {

/// Asks the workers of every placed stream quiet for probe_after whether
/// they still hold it (request_status); a stream that every worker it may
/// be on disowns in two rounds in a row lost its request or its last chunk
/// on the way, and moves (migrate: the client's tokens so far go with it).
/// A reply that is lost or late changes nothing; the next round asks again.
void probe_quiet_streams(frontend_pointer self) {
  auto& st = self->state;
  const auto now = clock_type::now();
  // Per worker, the attempts to ask about; per attempt, how many workers.
  std::map<std::pair<std::string, std::string>, std::pair<wire::actor_address, wire::request_status>> asks;
  auto asked = std::make_shared<std::map<uint64_t, int>>();
  for (auto& [key, j] : st.jobs)
    for (auto& c : j.choices) {
      if (c.done || !c.routed || now - c.progress < st.cfg.probe_after)
        continue;
      // Before its first token a disaggregated stream is on its prefill
      // worker, on its way, or on its decode worker: only all three
      // disowning it means it is lost.
      std::vector<const wire::actor_address*> on{&c.route.prefill};
      if (c.route.disaggregated)
        on = c.order.received() > 0 ? std::vector<const wire::actor_address*>{&c.route.decode}
                                    : std::vector<const wire::actor_address*>{&c.route.prefill, &c.route.decode};
      for (const auto* at : on) {
        auto& a = asks[{at->node, at->actor}];
        a.first = *at;
        if (a.second.request_ids.size() < wire::wire_limits{}.max_status_ids) {
          a.second.request_ids.push_back(c.engine_id);
          ++(*asked)[c.engine_id];
        }
      }
    }
  auto disowned = std::make_shared<std::map<uint64_t, int>>();
  auto pending = std::make_shared<size_t>(asks.size());
  for (auto& [name, ask] : asks) {
    auto done = [self, asked, disowned, pending](const std::vector<uint64_t>& unknown) {
      for (auto id : unknown)
        if (asked->contains(id))
          ++(*disowned)[id];
      if (--*pending != 0)
        return;
      auto& st = self->state;
      std::vector<std::pair<uint64_t, size_t>> lost;
      for (const auto& [id, n] : *asked) {
        auto where = st.by_engine_id.find(id);
        if (where == st.by_engine_id.end())
          continue;
        auto& c = st.jobs.at(where->second.first).choices[where->second.second];
        if (c.engine_id != id || c.done || clock_type::now() - c.progress < st.cfg.probe_after)
          continue;
        auto d = disowned->find(id);
        c.unknown_rounds = d != disowned->end() && d->second == n ? c.unknown_rounds + 1 : 0;
        if (c.unknown_rounds >= 2)
          lost.push_back(where->second);
      }
      for (const auto& [key, index] : lost) {
        auto e = no_worker("its worker no longer holds it (its request or its last tokens were lost on the way)");
        e.code = "worker_failed";
        migrate(self, key, index, e);
      }
    };
    self->request(worker_at(self, ask.first), st.cfg.watch_interval, status_atom_v, std::move(ask.second))
      .then([done](const wire::request_status_reply& r) { done(r.unknown_ids); },
            [done](caf::error&) { done({}); }); // no answer: nothing learned this round
  }
}

} // namespace

/// The stream watchdog (frontend_config::watch_interval): moves every
/// running stream whose worker the router reports unhealthy (one only late
/// keeps its streams for late_grace, or while in panic), whose chunks
/// wait behind a lost one, or that stalled, to another worker.
void watch_streams(frontend_pointer self) {
  auto& st = self->state;
  self->delayed_send(self, st.cfg.watch_interval, step_atom_v);
  if (st.jobs.empty())
    return;
  probe_quiet_streams(self);
  self->request(st.cfg.router, st.cfg.watch_interval * 4, workers_atom_v)
    .then(
      [self](const std::vector<router_worker_view>& ws) {
        auto& st = self->state;
        std::map<std::pair<std::string, std::string>, std::string> unhealthy;
        for (const auto& w : ws) {
          // Only late, and either briefly or with nowhere better to go:
          // its streams stay (frontend_config::late_grace).
          const bool late = w.status.fault == health_fault::late;
          const bool keep = late && (w.panic_target || w.status.last_seen_ms < st.cfg.late_grace.count());
          if (!w.status.healthy && !keep)
            unhealthy[{w.status.node, w.status.name}] = w.status.reason;
        }
        const auto now = clock_type::now();
        std::vector<std::tuple<uint64_t, size_t, std::string>> moving;
        for (const auto& [key, j] : st.jobs)
          for (size_t i = 0; i < j.choices.size(); ++i) {
            const auto& c = j.choices[i];
            if (c.done || !c.admitted || c.moving)
              continue;
            // The worker the stream is on: the decode worker once the
            // prefill is done (or both are in play before).
            std::vector<const wire::actor_address*> on{&c.route.prefill};
            if (c.route.disaggregated)
              on = c.order.received() > 0 ? std::vector{&c.route.decode}
                                          : std::vector{&c.route.prefill, &c.route.decode};
            std::string why;
            for (const auto* at : on)
              if (auto u = unhealthy.find({at->node, at->actor}); u != unhealthy.end())
                why = "worker " + at->actor + " on node '" + at->node + "' is unhealthy: " + u->second;
            if (why.empty() && c.order.waiting() > 0 && now - c.progress > st.cfg.gap_timeout)
              why = "a token chunk never came";
            if (why.empty() && now - c.progress > st.cfg.stall_timeout)
              why = "no token for " + std::to_string(std::chrono::duration_cast<std::chrono::seconds>(
                                                       st.cfg.stall_timeout)
                                                       .count()) +
                    " s";
            if (!why.empty())
              moving.emplace_back(key, i, std::move(why));
          }
        for (auto& [key, index, why] : moving) {
          auto e = no_worker(why);
          e.code = "worker_failed";
          migrate(self, key, index, e);
        }
      },
      [](caf::error&) {}); // the router is away: its own failure shows elsewhere
}

} // namespace tessera::actors::frontend::detail
