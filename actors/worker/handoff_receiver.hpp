#pragma once
/// @file
/// The decode side (D) of a KV hand-off (actors/common/kv_handoff.hpp) as a
/// plain state machine: no actor and no clock of its own, and the pool is
/// the caller's (reserve_fn; the worker passes grant_handoff on its
/// engine). The worker feeds it the prefill side's messages and its timer,
/// and carries out what it answers.
///
///   offered(h) --fits-----------> granted --commit()--> the worker imports
///       |                           |                  (commit_handoff) and
///       |                           |                  decodes
///       |                           +--cancel / expire past its deadline
///       |                           |  (P died, its commit never came)-->
///       |                           |  ended: the worker cancels the import
///       +--too few free blocks--> waiting (first come, first served)
///                                   |--retry(), fits--> granted
///                                   +--past its deadline / cancel--> refused
///
/// A second hand-off of a request that is granted or waiting here (a
/// duplicated message) is refused and leaves the first one as it was. A
/// commit of a request not granted here (never, or ended by a cancel or its
/// deadline) is refused with why; the last ended_memory ends are
/// remembered for that. The hand-off's request passes through untouched:
/// the pool holds it from the reservation on.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include <caf/expected.hpp>

#include "engine/model_units.hpp"
#include "transport/wire/messages.hpp"

namespace tessera::actors {

class handoff_receiver {
public:
  using clock = std::chrono::steady_clock;
  /// Reserves blocks for a hand-off; error no_free_blocks when too few are
  /// free now (the hand-off waits), any other error refuses it.
  using reserve_fn = std::function<caf::expected<transport::wire::kv_grant>(const transport::wire::request_handoff&)>;

  /// A hand-off granted here, waiting for its blocks and commit.
  struct granted {
    transport::wire::kv_grant grant;
    transport::wire::actor_address reply_to;
    /// The exported sequence and its cache salt (offers to the kv store).
    std::vector<int32_t> tokens;
    std::string cache_salt;
    /// The request's max_tokens (the decode's units).
    int32_t max_tokens = 0;
    /// The first decode step's context: the prompt and the token the
    /// prefill worker made.
    int64_t context = 0;
    /// When the commit is late: the worker's timer calls expire() then.
    clock::time_point deadline;
  };

  /// The answer to the hand-off the worker named `ticket` in offered().
  struct answer {
    uint64_t ticket = 0;
    caf::expected<transport::wire::kv_grant> grant;
  };

  /// How many ended hand-offs a refused commit can name the end of.
  static constexpr size_t ended_memory = 256;

  /// `name` (the worker's) is in every error text; a hand-off waits for
  /// blocks, and a grant for its commit, at most `timeout`.
  handoff_receiver(std::string name, std::chrono::milliseconds timeout);

  /// P offers hand-off `h` (h.kv set), to be answered under `ticket`.
  /// Returns the answers due now, in order: h's, unless it waits for
  /// blocks behind others or for blocks to be freed.
  [[nodiscard]] std::vector<answer> offered(transport::wire::request_handoff h, uint64_t ticket,
                                            clock::time_point now, const reserve_fn& reserve);

  /// Blocks may have been freed (a step, a cancel, an expiry): grants the
  /// waiting hand-offs that fit now, in order, and refuses those past their
  /// deadline.
  [[nodiscard]] std::vector<answer> retry(clock::time_point now, const reserve_fn& reserve);

  /// P's puts are done: the grant of request `id` to commit (forgotten
  /// here: the import is the worker's now), or why there is none
  /// (unknown_request).
  [[nodiscard]] caf::expected<granted> commit(uint64_t id);

  /// What a cancel ended.
  struct cancelled {
    /// A grant was held: the worker cancels its import.
    bool cancel_import = false;
    /// The waiting hand-off's refusal, if it waited.
    std::vector<answer> answers;
  };
  /// Request `id` was cancelled (`reason`): ends its grant or waiting
  /// hand-off, if any.
  [[nodiscard]] cancelled cancel(uint64_t id, const std::string& reason);

  /// The worker's timer for request `id`'s grant: true when the grant is
  /// still held past its deadline (its commit never came; P died or gave
  /// up), which ends it: the worker cancels the import. A timer of an
  /// earlier grant of the same id, or one that fires after the commit,
  /// does nothing.
  [[nodiscard]] bool expire(uint64_t id, clock::time_point now);

  /// The worker fails (a crash): every waiting hand-off is refused with
  /// `why`; returns the grants held, so the worker tells their clients.
  [[nodiscard]] std::vector<granted> fail_all(const std::string& why, std::vector<answer>& answers);

  /// Model units of the decodes granted or waiting here (b per output token
  /// after the first, c per request): work accepted, not yet in the engine.
  [[nodiscard]] double outstanding(const engine::model_units& u) const;

  [[nodiscard]] size_t num_granted() const { return grants_.size(); }
  [[nodiscard]] size_t num_waiting() const { return waiting_.size(); }
  [[nodiscard]] bool holds(uint64_t id) const;

private:
  struct waiter {
    transport::wire::request_handoff handoff;
    uint64_t ticket = 0;
    clock::time_point deadline;
  };

  /// Reserves for `w`: true when it is answered (granted or refused),
  /// false when it must wait for blocks.
  bool try_grant(waiter& w, clock::time_point now, const reserve_fn& reserve, std::vector<answer>& out);
  void remember_end(uint64_t id, std::string why);

  std::string name_;
  std::chrono::milliseconds timeout_;
  std::unordered_map<uint64_t, granted> grants_;
  std::deque<waiter> waiting_;
  std::deque<std::pair<uint64_t, std::string>> ended_;
};

} // namespace tessera::actors
