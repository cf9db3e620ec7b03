#pragma once
/// @file
/// A worker's offers to its node's kv store writer (kv_tiering.hpp,
/// actors/kvstore/kvstore_writer.hpp) as a plain state machine: at most
/// max_bytes of offered payload wait for the writer's answer at any time;
/// blocks beyond that are dropped and counted, never queued, so a slow
/// store never stalls the worker's batch. No actor, no engine: the worker
/// copies the blocks (copy_offer within room()), sends them, and feeds the
/// writer's answer (or its timeout) back.
///
///   room() -> copy_offer(..., room) -> dropped(n) -> sent(bytes) -> ticket
///   writer answers: answered(ticket, stored)   fails / times out: failed(ticket)
///   each returns the offer's bytes to room(); a ticket counts once.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <unordered_map>

namespace tessera::actors {

class store_offers {
public:
  /// At most `max_bytes` of payload in flight; 0 drops every offer.
  explicit store_offers(uint64_t max_bytes) : max_bytes_(max_bytes) {}

  /// Payload bytes a new offer may carry now.
  [[nodiscard]] uint64_t room() const { return max_bytes_ > in_flight_ ? max_bytes_ - in_flight_ : 0; }

  /// `blocks` did not fit in room() and were not copied.
  void dropped(size_t blocks) { dropped_ += blocks; }

  /// An offer of `bytes` goes to the writer: its ticket, or nullopt (and
  /// nothing counted) when it is empty or more than room().
  [[nodiscard]] std::optional<uint64_t> sent(uint64_t bytes);

  /// The writer stored `stored` blocks of offer `ticket`. False for a
  /// ticket not in flight (answered already).
  bool answered(uint64_t ticket, uint64_t stored);

  /// Offer `ticket` got no answer (an error or the offer timeout): its
  /// bytes return. False for a ticket not in flight.
  bool failed(uint64_t ticket);

  [[nodiscard]] uint64_t bytes_in_flight() const { return in_flight_; }
  [[nodiscard]] size_t offers_in_flight() const { return offers_.size(); }
  /// Blocks dropped, and blocks the writer said it stored, so far.
  [[nodiscard]] uint64_t dropped_blocks() const { return dropped_; }
  [[nodiscard]] uint64_t stored_blocks() const { return stored_; }

private:
  bool settle(uint64_t ticket);

  uint64_t max_bytes_;
  uint64_t in_flight_ = 0;
  uint64_t next_ticket_ = 1;
  uint64_t dropped_ = 0;
  uint64_t stored_ = 0;
  std::unordered_map<uint64_t, uint64_t> offers_; // ticket -> bytes
};

} // namespace tessera::actors
