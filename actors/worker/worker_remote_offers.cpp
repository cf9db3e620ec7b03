// The worker's offers to a kv store on another node (worker_config::
// remote_store): the shell that copies them (remote_offers.hpp), sends them
// to the store's intake through the bridge and feeds store_offers the
// answers. A store node that is down answers at once (the bridge has no
// connection, or fails the calls in flight when the connection drops): the
// offer is dropped and counted, its blocks stay in the pool.
#include <utility>

#include <spdlog/spdlog.h>

#include "actors/worker/worker_state.hpp"
#include "common/error.hpp"

namespace tessera::actors::worker_shell {

namespace {

/// Payload bytes of one offer message (the wire's frames carry 64 MiB).
constexpr uint64_t remote_offer_chunk_bytes = uint64_t{8} << 20;

void count_dropped(worker_state& st, size_t blocks) {
  st.offers.dropped(blocks);
  if (st.metrics && blocks > 0)
    st.metrics->offer_dropped.inc(static_cast<double>(blocks));
}

} // namespace

void offer_remote(worker_pointer self, std::span<const int32_t> tokens, const std::string& cache_salt) {
  auto& st = self->state;
  auto c = copy_remote_offer(*st.eng, st.remote_held, tokens, cache_salt, st.offers.room(), remote_offer_chunk_bytes);
  count_dropped(st, c.dropped);
  if (c.offers.empty())
    return;
  const auto& at = st.cfg.remote_store;
  auto intake = st.intakes.get(self->system(), st.cfg.bridge, at.node, at.actor);
  for (auto& o : c.offers) {
    uint64_t bytes = 0;
    for (const auto& b : o.blocks)
      bytes += b.data.size();
    const auto ticket = st.offers.sent(bytes);
    if (!ticket) {
      count_dropped(st, o.blocks.size());
      continue;
    }
    auto hashes = hashes_of(o);
    const auto n = hashes.size();
    self->request(intake, st.cfg.offer_timeout, offer_atom_v, std::move(o))
      .then(
        [self, t = *ticket, hashes = std::move(hashes)]() {
          auto& st = self->state;
          if (!st.offers.answered(t, hashes.size()))
            return;
          st.remote_held.remember(hashes);
          if (st.metrics)
            st.metrics->store_offered.inc(static_cast<double>(hashes.size()));
        },
        [self, t = *ticket, n](caf::error& err) {
          auto& st = self->state;
          if (!st.offers.failed(t))
            return;
          // The store may have restarted empty, or be gone: what this
          // worker remembers of it is no longer worth anything.
          st.remote_held.clear();
          count_dropped(st, n);
          const auto now = std::chrono::steady_clock::now();
          if (now - st.offer_failure_logged >= std::chrono::seconds{5}) {
            st.offer_failure_logged = now;
            spdlog::warn("worker {}: offering {} block(s) to the kv store on node '{}' failed ({}); dropped, they "
                         "stay in this worker's pool (logged once per 5 s)",
                         st.cfg.name, n, st.cfg.remote_store.node, error_text(err));
          }
        });
  }
}

} // namespace tessera::actors::worker_shell
