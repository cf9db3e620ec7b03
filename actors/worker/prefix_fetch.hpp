#pragma once
/// @file
/// One prompt's prefix fetch as a plain state machine (no actor, no clock
/// of its own): the worker feeds it what the stores answer and does what
/// it says next. The stores are asked in order: the node's own store
/// (again while it has more to send), then the peer store the router named
/// (request_handoff::kv_source) when that one holds more than the pool has
/// by then; each ask covers the blocks the pool still lacks, at most
/// max_blocks per reply. The fetch ends when the pool holds the whole
/// prefix, both stores have said all they hold, or its deadline
/// (fetch_cost.hpp) has passed; what arrived stays in the pool either way.
///
///   prefix_fetch f{need, local, peer, peer_blocks, deadline};
///   while (auto a = f.next(now)) {       // ask a->store for hashes [a->first, a->end)
///     ... reply: insert the blocks, then f.answered(a->peer, cached, refused, busy, more)
///     ... error: f.failed(a->peer, timed_out)
///   }
///   f.outcome()                          // hit, partial, miss, rejected, late, failed

#include <chrono>
#include <cstddef>
#include <optional>

#include "actors/worker/kv_tiering.hpp"
#include "transport/wire/messages.hpp"

namespace tessera::actors {

class prefix_fetch {
public:
  using clock = std::chrono::steady_clock;

  /// The next request to a store.
  struct ask {
    transport::wire::actor_address store;
    /// Whether it is the peer store (not the node's own).
    bool peer = false;
    /// The hashes of need().hashes to ask for: [first, end).
    size_t first = 0;
    size_t end = 0;
    /// How long to wait for the answer: until the fetch's deadline.
    std::chrono::milliseconds timeout{0};
  };

  /// A fetch of what `need` lacks, from `local` (empty: the node has no
  /// store) then `peer` (empty: none), which the router says holds the
  /// prompt's first `peer_blocks` blocks; at most `max_blocks` per ask.
  prefix_fetch(prefix_need need, transport::wire::actor_address local, transport::wire::actor_address peer,
               size_t peer_blocks, size_t max_blocks, clock::time_point deadline);

  /// The next store to ask, or nullopt when the fetch is over (then
  /// outcome() says how it went). Past the deadline it is over, late.
  [[nodiscard]] std::optional<ask> next(clock::time_point now);

  /// The store of an ask answered: the pool now caches `cached` leading
  /// blocks of the chain, `refused` blocks of the answer failed their
  /// checks, `busy` if the store was at its bound, `more` if it holds more
  /// than one reply carried.
  void answered(bool peer, size_t cached, size_t refused, bool busy, bool more);

  /// The store of an ask did not answer: timed out, or another error.
  void failed(bool peer, bool timed_out);

  /// What the pool had, and what the fetch is about.
  [[nodiscard]] const prefix_need& need() const { return need_; }
  /// Blocks the fetch brought so far.
  [[nodiscard]] size_t fetched() const { return need_.cached - cached_at_start_; }
  /// hit (every block wanted came), partial, late (the deadline passed,
  /// nothing came), rejected (a store was busy), failed (another error),
  /// miss (the stores had none). The value of
  /// tessera_kvstore_fetch_total{outcome}.
  [[nodiscard]] const char* outcome() const;

private:
  prefix_need need_;
  transport::wire::actor_address local_;
  transport::wire::actor_address peer_;
  size_t max_blocks_;
  clock::time_point deadline_;
  size_t cached_at_start_;
  bool asked_local_;
  bool asked_peer_;
  bool busy_ = false;
  bool late_ = false;
  bool failed_ = false;
};

} // namespace tessera::actors
