// The worker's prefix fetches: the shell that asks the stores what
// prefix_fetch says and feeds their answers back.
#include "actors/worker/worker_state.hpp"

#include <algorithm>
#include <utility>

#include <spdlog/spdlog.h>

#include "actors/worker/kv_tiering.hpp"
#include "common/error.hpp"

namespace tessera::actors::worker_shell {

namespace {

/// The most payload bytes one ask brings (less when worker_config::
/// fetch_max_bytes is smaller). A prefix comes as a run of such chunks, each
/// imported into the pool as it lands, so a fetch cut short (its deadline,
/// a busy or failing store) keeps every chunk before the cut and computes
/// only the rest; a chunk is also what the next ask waits for, which is
/// why it is not smaller (a chunk's round trip is small beside reading and
/// sending 4 MiB).
constexpr uint64_t fetch_chunk_bytes = uint64_t{4} << 20;

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
  const auto bytes = static_cast<uint64_t>(blocks) * layout.block_bytes();
  const auto& backend = st.eng->get_backend();
  return st.fetch_costs.plan(from.node + "/" + from.actor, bytes, tokens,
                             backend.prefill_wall_seconds(tokens, start), backend.load_wall_seconds(bytes));
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
                           std::min(st.cfg.fetch_max_bytes, fetch_chunk_bytes),
                           // The store skips a fetch still queued when this has passed.
                           static_cast<uint32_t>(std::clamp<int64_t>(ask->timeout.count(), 1, UINT32_MAX))};
  const auto at = ask->store;
  const bool peer = ask->peer;
  const size_t first = ask->first;
  auto store = st.stores.get(self->system(), st.cfg.bridge, at.node, at.actor);
  // From the store another node keeps for this worker: what it brings (or
  // lacks) tells which blocks not to offer it again (remote_offers.hpp).
  std::vector<engine::kv_block_hash> asked;
  if (!peer && !st.cfg.remote_store.empty())
    asked = q.block_hashes;
  auto took = [now] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - now).count(); };
  self->request(store, ask->timeout, fetch_atom_v, std::move(q))
    .then(
      [self, id, first, peer, at, took, asked = std::move(asked)](wire::kv_fetch_reply& reply) {
        auto& st = self->state;
        if (!asked.empty())
          note_fetched(st.remote_held, asked, reply);
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
          self->state.fetch_costs.observe_timeout(at.node + "/" + at.actor, took());
        auto it = self->state.fetching.find(id);
        if (it == self->state.fetching.end())
          return;
        // Once per 5 s: a store node that is down fails every fetch at once.
        const auto now = std::chrono::steady_clock::now();
        if (now - self->state.fetch_failure_logged >= std::chrono::seconds{5}) {
          self->state.fetch_failure_logged = now;
          spdlog::warn("worker {}: fetching request {}'s prefix from {} on node '{}' failed ({}); computing it "
                       "instead (logged once per 5 s)",
                       self->state.cfg.name, id, at.actor, at.node, error_text(err));
        }
        it->second.fetch.failed(peer, timed_out);
        fetch_next(self, id);
      });
}

} // namespace

std::optional<caf::typed_response_promise<caf::unit_t>> start_fetch(worker_pointer self, wire::request_handoff& h) {
  auto& st = self->state;
  if (!h.resume_output.empty() || (st.cfg.store_at.empty() && h.kv_source.empty()))
    return std::nullopt;
  auto need = prefix_need_of(*st.eng, h.request.prompt, h.request.cache_salt);
  if (need.satisfied())
    return std::nullopt;
  const auto plan = plan_fetch(st, need, h);
  if (!plan.fetch) {
    if (st.metrics)
      st.metrics->fetch_ended("skipped");
    return std::nullopt;
  }
  auto rp = self->make_response_promise<caf::unit_t>();
  const auto now = std::chrono::steady_clock::now();
  const auto id = h.request.id;
  prefix_fetch fetch{std::move(need), st.cfg.store_at, h.kv_source,
                     static_cast<size_t>(std::max(0, h.kv_source_blocks)),
                     transport::wire::wire_limits{}.max_blocks_per_batch, now + plan.deadline};
  st.fetching.emplace(id, pending_fetch{std::move(h), rp, std::move(fetch), now});
  fetch_next(self, id);
  return rp;
}

} // namespace tessera::actors::worker_shell
