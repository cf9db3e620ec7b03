#include "actors/worker/kv_event_batches.hpp"

#include <algorithm>

namespace tessera::actors {

namespace wire = transport::wire;

namespace {

wire::kv_event make_event(uint64_t worker_id, uint64_t& next_event, wire::kv_event_kind kind) {
  wire::kv_event ev;
  ev.worker_id = worker_id;
  ev.event_id = next_event++;
  ev.tier = wire::kv_tier::g1_pool;
  ev.kind = kind;
  return ev;
}

} // namespace

std::vector<wire::kv_event> kv_event_batches(std::span<const engine::kv_cache_event> changes, uint64_t worker_id,
                                             uint64_t& next_event) {
  using kind = engine::kv_cache_event::kind;
  std::vector<wire::kv_event> out;
  for (size_t i = 0; i < changes.size();) {
    const auto what = changes[i].what;
    auto ev = make_event(worker_id, next_event,
                         what == kind::stored    ? wire::kv_event_kind::stored
                         : what == kind::removed ? wire::kv_event_kind::removed
                                                 : wire::kv_event_kind::cleared);
    for (; i < changes.size() && changes[i].what == what; ++i)
      if (what != kind::cleared)
        ev.block_hashes.push_back(changes[i].hash);
    out.push_back(std::move(ev));
  }
  return out;
}

std::vector<wire::kv_event> kv_view_events(std::span<const engine::kv_block_hash> cached, uint64_t worker_id,
                                           uint64_t& next_event) {
  std::vector<wire::kv_event> out;
  out.push_back(make_event(worker_id, next_event, wire::kv_event_kind::cleared));
  const size_t chunk = wire::wire_limits{}.max_event_hashes;
  for (size_t i = 0; i < cached.size(); i += chunk) {
    auto ev = make_event(worker_id, next_event, wire::kv_event_kind::stored);
    ev.block_hashes.assign(cached.begin() + static_cast<std::ptrdiff_t>(i),
                           cached.begin() + static_cast<std::ptrdiff_t>(std::min(cached.size(), i + chunk)));
    out.push_back(std::move(ev));
  }
  return out;
}

} // namespace tessera::actors
