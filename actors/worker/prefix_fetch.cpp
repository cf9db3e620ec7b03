#include "actors/worker/prefix_fetch.hpp"

#include <algorithm>

namespace tessera::actors {

prefix_fetch::prefix_fetch(prefix_need need, transport::wire::actor_address local,
                           transport::wire::actor_address peer, size_t peer_blocks, size_t max_blocks,
                           clock::time_point deadline)
  : need_(std::move(need)),
    local_(std::move(local)),
    peer_(std::move(peer)),
    max_blocks_(std::max<size_t>(1, max_blocks)),
    deadline_(deadline),
    cached_at_start_(need_.cached),
    asked_local_(local_.empty()),
    // Nothing the peer holds beyond what the pool has: not worth asking.
    asked_peer_(peer_.empty() || peer_blocks <= need_.cached) {}

std::optional<prefix_fetch::ask> prefix_fetch::next(clock::time_point now) {
  if (need_.satisfied() || (asked_local_ && asked_peer_) || late_)
    return std::nullopt;
  if (now >= deadline_) {
    late_ = true; // what arrived stays in the pool; the rest is computed
    return std::nullopt;
  }
  ask a;
  a.peer = asked_local_;
  a.store = a.peer ? peer_ : local_;
  a.first = need_.cached;
  a.end = std::min(need_.hashes.size(), a.first + max_blocks_);
  a.timeout = std::max(std::chrono::ceil<std::chrono::milliseconds>(deadline_ - now), std::chrono::milliseconds{1});
  return a;
}

void prefix_fetch::answered(bool peer, size_t cached, size_t refused, bool busy, bool more) {
  const size_t got = cached > need_.cached ? cached - need_.cached : 0;
  need_.cached = std::max(need_.cached, cached);
  busy_ |= busy;
  // Ask the same store again only while it sends more that is usable.
  if (!(more && got > 0 && refused == 0))
    (peer ? asked_peer_ : asked_local_) = true;
}

void prefix_fetch::failed(bool peer, bool timed_out) {
  (timed_out ? late_ : failed_) = true;
  (peer ? asked_peer_ : asked_local_) = true;
}

const char* prefix_fetch::outcome() const {
  const size_t wanted = need_.hashes.size() - cached_at_start_;
  const size_t got = fetched();
  if (got == wanted)
    return "hit";
  if (got > 0)
    return "partial";
  if (late_)
    return "late";
  if (busy_)
    return "rejected";
  return failed_ ? "failed" : "miss";
}

} // namespace tessera::actors
