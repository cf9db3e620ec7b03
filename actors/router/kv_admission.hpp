#pragma once
/// @file
/// Admission by the decode workers' KV memory: what the router counts as
/// committed in each decode worker's pool, so that it sends a request only
/// where the request's KV fits beside everything already there, and holds
/// it (first come, first served) while no decode worker has room.
///
/// Without it, the router sends a decode worker more long contexts than
/// its pool holds while their prompts are still prefilling elsewhere; they
/// all arrive, the pool runs out as they decode, and the engine preempts:
/// it drops a running request's blocks and computes its whole context
/// again (documents of 66k tokens at twice their load: each decode worker
/// preempted 121-142 requests and computed ten times the prefill workers'
/// tokens; bench/README.md, "Workloads of our own"). vLLM's scheduler
/// makes the same check before it admits a waiting request (free blocks
/// for the prompt, above a watermark); here it is made once for the
/// cluster, before the prefill, so a prompt waits in the router's queue
/// instead of in a prefill pool or a hand-off.
///
/// A decode worker `w` with a pool of N blocks has room for a request when
///
///   used(w) + sum over requests r routed to w of
///       growth(r) + (pending(r) ? need(r) : 0)  + need + growth  <=  N
///
///  - used(w): blocks its running requests reference, from its last
///    heartbeat (shared prefix blocks once);
///  - need(r): r's prompt blocks beyond the longest prefix it shares with
///    a request routed to w before it and still running or on its way
///    there (those blocks are referenced once, by both), counted until a
///    heartbeat heard after r's prompt arrived (its first token) shows
///    them in used(w). A prefix w holds only in its cache, referenced by
///    no request, is not taken off: importing it takes those blocks out
///    of the free ones as fresh blocks would;
///  - growth(r): blocks for r's next growth_tokens output tokens (at most
///    its max_tokens), kept for every request routed to w until it ends.
///
/// A worker with no request routed to it always has room (so a request
/// larger than a pool still runs, alone), and a request that waited
/// max_wait is routed without the check: admission delays, it never
/// refuses. A held request that is said to have finished (its caller gave
/// up on it) leaves the queue unrouted.

#include <chrono>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine/block_hash.hpp"

namespace tessera::actors {

/// How the router admits by KV memory (router_config::kv_admission).
struct kv_admission_options {
  /// Off: every request is routed at once, as before (an over-committed
  /// decode worker preempts). Default: true.
  bool enabled = true;
  /// Output tokens of room kept for each request (at most its
  /// max_tokens). >= 0. Default: 256 (a decode worker granting hand-offs
  /// only with room for its running requests' next 256 tokens halved the
  /// preemptions of documents at 2x; 64 did not reduce them).
  int32_t growth_tokens = 256;
  /// Most time a request waits for room; then it is routed anyway (the
  /// decode worker may preempt). Below the frontend's admit_timeout
  /// (30 s). A caller with a shorter timeout of its own asks for less
  /// (route_query::max_wait): a router client half its attempt timeout,
  /// which the router gateway passes on for remote frontends (at most
  /// 5 s; 1 s for a caller that names none). Default: 8 s.
  std::chrono::milliseconds max_wait{8000};
};

/// The router's account of what is committed in each decode worker's KV
/// pool (see the file comment). Plain bookkeeping, no actor, no clock of
/// its own: the router feeds it its events with their times.
class kv_commitments {
public:
  using clock = std::chrono::steady_clock;

  /// Worker `worker`'s heartbeat, heard at `at`: `used_blocks` of its pool
  /// are referenced by its requests.
  void heard(uint64_t worker, int64_t used_blocks, clock::time_point at);

  /// Request `request`, whose prompt's full blocks hash to `blocks`, was
  /// routed to decode worker `worker`: `need` prompt blocks it will add
  /// there (need_of), `growth` blocks kept for its output. A request routed
  /// again (a new attempt under the same id) replaces its old entry.
  void routed(uint64_t request, uint64_t worker, std::span<const engine::kv_block_hash> blocks, int64_t need,
              int64_t growth);

  /// Leading blocks of `blocks` that a request routed to `worker` and not
  /// ended shares (the longest such prefix): blocks a new request with
  /// this prompt finds referenced there.
  [[nodiscard]] int64_t shared_blocks(uint64_t worker, std::span<const engine::kv_block_hash> blocks) const;

  /// Request `request`'s prompt is on its decode worker (its first token
  /// came) at `at`: its need leaves the count once a heartbeat heard
  /// after `at` includes it.
  void prefilled(uint64_t request, clock::time_point at);

  /// Request `request` ended: nothing of it is committed any more.
  void finished(uint64_t request);

  /// Worker `worker` is gone (replaced, forgotten): its figures and its
  /// requests' entries go (a route answer or `finished` for one of them
  /// later finds nothing).
  void forget_worker(uint64_t worker);

  /// Blocks left in `worker`'s pool of `num_blocks` beside what is
  /// committed; negative when over-committed.
  [[nodiscard]] int64_t room(uint64_t worker, int64_t num_blocks) const;

  /// Requests routed to `worker` that have not ended.
  [[nodiscard]] int64_t active(uint64_t worker) const;

  /// Whether `worker` (a pool of `num_blocks`) can take a request adding
  /// `need` + `growth` blocks: it has nothing routed to it, or room for them.
  [[nodiscard]] bool fits(uint64_t worker, int64_t num_blocks, int64_t need, int64_t growth) const;

  /// Requests tracked (routed and not ended).
  [[nodiscard]] size_t size() const { return requests_.size(); }

private:
  struct entry {
    uint64_t worker = 0;
    std::vector<engine::kv_block_hash> blocks;
    int64_t need = 0;
    int64_t growth = 0;
    bool prefilled = false;
    clock::time_point prefilled_at;
  };
  struct worker_figures {
    int64_t used = 0;
    clock::time_point heard_at;
    bool heard = false;
    /// Requests routed to this worker that have not ended (keys of
    /// requests_): what room, active and shared_blocks look at.
    std::unordered_set<uint64_t> requests;
  };
  /// Whether `e`'s need is not yet in its worker `w`'s used figure.
  [[nodiscard]] bool pending(const entry& e, const worker_figures& w) const;
  /// `worker`'s figures; null when nothing is known of it.
  [[nodiscard]] const worker_figures* figures(uint64_t worker) const;

  std::unordered_map<uint64_t, entry> requests_;
  std::unordered_map<uint64_t, worker_figures> workers_;
};

} // namespace tessera::actors
