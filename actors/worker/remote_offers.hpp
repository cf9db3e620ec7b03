#pragma once
/// @file
/// A worker's offers to a kv store on another node (a node with the role
/// kvstore, named by the cluster TOML's `store`; actors/kvstore/
/// kvstore_intake.hpp), without an actor: what to copy out of the pool and
/// what the worker knows that store holds.
///
/// The worker cannot look into a remote store's index as it does into its
/// node's (kv_tiering.hpp: copy_offer), so it remembers which blocks that
/// store holds: those it stored (an answered offer) and those a fetch
/// brought from it. Blocks it remembers are not offered again. What it
/// remembers is only a hint and heals itself: a failed offer (the store
/// node down, busy, restarted) forgets everything, and a fetch from the
/// store that misses blocks forgets those.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "engine/engine.hpp"
#include "transport/wire/messages.hpp"

namespace tessera::actors {

/// Blocks a remote kv store is known to hold: a set of at most
/// max_entries hashes, the oldest forgotten first.
class remote_store_memory {
public:
  explicit remote_store_memory(size_t max_entries = 65536) : max_(max_entries) {}

  [[nodiscard]] bool holds(const engine::kv_block_hash& h) const { return set_.contains(h); }
  void remember(std::span<const engine::kv_block_hash> hashes);
  void forget(std::span<const engine::kv_block_hash> hashes);
  void clear();
  [[nodiscard]] size_t size() const { return set_.size(); }

private:
  size_t max_;
  std::unordered_set<engine::kv_block_hash> set_;
  std::deque<engine::kv_block_hash> order_; // insertion order; may hold forgotten ones
};

/// What copy_remote_offer copied.
struct remote_offer_copy {
  /// The offers, in chain order, each at most chunk_bytes of payload (at
  /// least one block), in the wire shape the intake takes.
  std::vector<transport::wire::kv_fetch_reply> offers;
  /// Blocks the store may lack that did not fit in max_bytes (not copied).
  size_t dropped = 0;
};

/// Copies out of `eng`'s pool the full blocks of a finished sequence
/// (`tokens`: prompt then output; the last token has no KV) that `held`
/// does not list, in chain order, up to the first block the pool no longer
/// holds, within `max_bytes` of payload in all; the rest are counted in
/// `dropped`. On the engine thread: a copy per block and its checksum.
[[nodiscard]] remote_offer_copy copy_remote_offer(const engine::engine& eng, const remote_store_memory& held,
                                                  std::span<const int32_t> tokens, std::string_view cache_salt,
                                                  uint64_t max_bytes, uint64_t chunk_bytes);

/// Hashes of an offer's blocks.
[[nodiscard]] std::vector<engine::kv_block_hash> hashes_of(const transport::wire::kv_fetch_reply& offer);

/// Feeds `held` the answer of a fetch of `asked` from the remote store:
/// the blocks it brought are held there; unless it was busy, those it did
/// not bring after them are not (up to the reply's end when `more`).
void note_fetched(remote_store_memory& held, std::span<const engine::kv_block_hash> asked,
                  const transport::wire::kv_fetch_reply& reply);

} // namespace tessera::actors
