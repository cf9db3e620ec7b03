#pragma once
/// @file
/// Helpers shared by the router tests: KV events, hash chains, worker
/// loads and a prefix index fed with in-sequence events.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <gtest/gtest.h>

#include "actors/router/prefix_index.hpp"
#include "actors/router/route_types.hpp"
#include "actors/router/router_policy.hpp"
#include "common/error.hpp"
#include "tests/support/block_hash_util.hpp"
#include "transport/wire/messages.hpp"

namespace tessera::actors::test {

namespace wire = transport::wire;
using engine::kv_block_hash;

/// A KV event of `worker` with sequence number `id`.
inline wire::kv_event make_event(uint64_t worker, uint64_t id, wire::kv_event_kind kind,
                                 std::vector<kv_block_hash> hashes = {},
                                 std::optional<kv_block_hash> parent = std::nullopt,
                                 wire::kv_tier tier = wire::kv_tier::g1_pool) {
  wire::kv_event ev;
  ev.worker_id = worker;
  ev.event_id = id;
  ev.tier = tier;
  ev.kind = kind;
  ev.parent_hash = parent;
  ev.block_hashes = std::move(hashes);
  return ev;
}

/// `n` distinct stand-ins for chained hashes: bh(base+1), ..., bh(base+n)
/// (the index never recomputes hashes, so any distinct values do).
inline std::vector<kv_block_hash> chain(size_t n, uint64_t base = 1000) {
  std::vector<kv_block_hash> out;
  for (size_t i = 0; i < n; ++i)
    out.push_back(tessera::test::bh(base + 1 + i));
  return out;
}

/// The first `n` hashes of `c`.
inline std::vector<kv_block_hash> prefix(const std::vector<kv_block_hash>& c, size_t n) {
  return {c.begin(), c.begin() + static_cast<std::ptrdiff_t>(n)};
}

/// A prefix index fed through apply() with each worker's events in
/// sequence, as a worker would send them.
class fed_index {
public:
  explicit fed_index(prefix_index_options opts = {}) : index(opts) {}

  /// `worker` stores `hashes` (a chain after `parent`) in `tier`.
  void store(uint64_t worker, std::vector<kv_block_hash> hashes,
             std::optional<kv_block_hash> parent = std::nullopt,
             wire::kv_tier tier = wire::kv_tier::g1_pool) {
    send(make_event(worker, next_[worker]++, wire::kv_event_kind::stored, std::move(hashes),
                    parent, tier));
  }

  /// `worker` removes `hashes` from `tier`.
  void remove(uint64_t worker, std::vector<kv_block_hash> hashes,
              wire::kv_tier tier = wire::kv_tier::g1_pool) {
    send(make_event(worker, next_[worker]++, wire::kv_event_kind::removed, std::move(hashes),
                    std::nullopt, tier));
  }

  /// `worker` drops everything.
  void clear(uint64_t worker) {
    send(make_event(worker, next_[worker]++, wire::kv_event_kind::cleared));
  }

  /// The leading blocks of `c` that `worker` holds (0 if none).
  [[nodiscard]] int32_t overlap_of(uint64_t worker, const std::vector<kv_block_hash>& c) const {
    for (const auto& o : index.overlap(c))
      if (o.worker_id == worker)
        return o.blocks;
    return 0;
  }

  prefix_index index;
  /// The result of the last event sent.
  kv_event_result last;

private:
  void send(const wire::kv_event& ev) {
    last = index.apply(ev.worker_id, ev);
  }

  std::unordered_map<uint64_t, uint64_t> next_;
};

/// A worker's load.
inline worker_load make_worker(uint64_t id, worker_role role, int64_t decode_blocks = 0,
                               int64_t queued_prefill_tokens = 0, int32_t active_requests = 0) {
  worker_load w;
  w.id = id;
  w.role = role;
  w.active_decode_blocks = decode_blocks;
  w.queued_prefill_tokens = queued_prefill_tokens;
  w.active_requests = active_requests;
  return w;
}

/// A request of `prompt_tokens` whose full blocks are the first
/// prompt_tokens / block_tokens hashes of `c`.
inline route_request make_request(const std::vector<kv_block_hash>& c, int32_t prompt_tokens,
                                  std::string session = {}, int32_t block_tokens = 16) {
  route_request r;
  r.prompt_tokens = prompt_tokens;
  r.block_tokens = block_tokens;
  r.block_hashes = prefix(c, std::min(c.size(), static_cast<size_t>(prompt_tokens / block_tokens)));
  r.session_id = std::move(session);
  return r;
}

/// The policy `name`; a test failure (and nullptr) if it cannot be made.
/// The policy tests check the block-count formulas (Dynamo's cost), so
/// their policies count load in blocks; units_routing_test covers units.
inline std::unique_ptr<router_policy> policy(std::string_view name, router_options opts = {}) {
  opts.load = load_measure::blocks;
  auto p = make_router_policy(name, std::move(opts));
  if (!p) {
    ADD_FAILURE() << "make_router_policy(" << name << "): " << error_text(p.error());
    return nullptr;
  }
  return std::move(*p);
}

/// Routes `req`; a test failure (and an empty decision) on an error.
inline route_decision must_route(router_policy& p, const route_request& req,
                                 const std::vector<worker_load>& workers,
                                 const prefix_index& index) {
  auto d = p.route(req, workers, index);
  if (!d) {
    ADD_FAILURE() << "route: " << error_text(d.error());
    return {};
  }
  return *d;
}

} // namespace tessera::actors::test
