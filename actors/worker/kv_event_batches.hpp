#pragma once
/// @file
/// A worker's prefix-cache changes as the router's wire::kv_event batches
/// (plain functions): ids count up by one per batch from the worker's next
/// event id, so the router sees a lost batch and asks for the whole view.

#include <cstdint>
#include <span>
#include <vector>

#include "engine/kv_cache.hpp"
#include "transport/wire/limits.hpp"
#include "transport/wire/messages.hpp"

namespace tessera::actors {

/// One kv_event per run of same-kind `changes`, in order, numbered from
/// `next_event` (advanced past them), for worker `worker_id`.
[[nodiscard]] std::vector<transport::wire::kv_event>
kv_event_batches(std::span<const engine::kv_cache_event> changes, uint64_t worker_id, uint64_t& next_event);

/// The whole view `cached` (every hash the prefix cache holds): a
/// "cleared" event, then "stored" events of at most
/// wire_limits::max_event_hashes hashes each, numbered as above.
[[nodiscard]] std::vector<transport::wire::kv_event>
kv_view_events(std::span<const engine::kv_block_hash> cached, uint64_t worker_id, uint64_t& next_event);

} // namespace tessera::actors
