#pragma once
/// @file
/// The prefill side (P) of a KV hand-off (actors/common/kv_handoff.hpp) as a
/// plain state machine: no actor, no engine, no clock. The worker exports
/// the request's blocks, sends the messages, runs the transfer (each with
/// the hand-off timeout) and feeds each outcome here; what comes back says
/// what to do next (effects).
///
///   started --granted--> putting --put_done--> committing --committed--> done
///   (asks D)   (puts the     |     (releases the    |       (D decodes)
///              blocks)       |      blocks, commits)|
///      any step: failed(why) -> release the blocks (if still held), fail the
///                client, cancel at D; done
///      cancel while asking: the blocks are released now; the grant (or its
///                failure) then only cancels at D
///      cancel while putting: the puts finish (they read the blocks), then
///                the blocks are released and D is cancelled: no commit
///      cancel while committing: D is cancelled (the commit may have landed)
///
/// A grant or put completion in the wrong step (a duplicated message) and
/// any event for a request not handing off here (a late answer after a
/// failure) do nothing.

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "transport/wire/messages.hpp"

namespace tessera::actors {

class handoff_sender {
public:
  /// Where a hand-off is.
  enum class step { granting, putting, committing };

  /// What the worker does after an event; several may be set, carried out
  /// in this order.
  struct effects {
    /// Plan and run the puts of the grant just received.
    bool put = false;
    /// Release the request's KV blocks held here (at most once per
    /// hand-off).
    bool release = false;
    /// Ask D to commit.
    bool commit = false;
    /// Non-empty: tell D (decode_at) to drop the request, with this reason.
    std::string cancel_peer;
    /// Non-empty: tell the client (reply_to) the request failed, with this
    /// text.
    std::string fail_client;
    /// The hand-off's request and addresses (kept after it ends).
    uint64_t id = 0;
    transport::wire::actor_address decode_at;
    transport::wire::actor_address reply_to;
  };

  /// Request `id`'s prefill is done and its blocks are held: the worker
  /// asks `decode_at` for a grant. False (and nothing changes) when `id`
  /// hands off already.
  bool started(uint64_t id, transport::wire::actor_address decode_at, transport::wire::actor_address reply_to);

  /// D granted: put the blocks, or (cancelled meanwhile) cancel at D.
  [[nodiscard]] effects granted(uint64_t id);
  /// The puts completed: release the blocks and commit, or (cancelled
  /// meanwhile) release and cancel at D.
  [[nodiscard]] effects put_done(uint64_t id);
  /// D committed: the hand-off is over; D streams the rest.
  [[nodiscard]] effects committed(uint64_t id);
  /// A step failed (`error`: the error's text; a timeout, D gone, a
  /// refused grant or commit): release, fail the client naming D and the
  /// error, cancel at D.
  [[nodiscard]] effects failed(uint64_t id, const std::string& error);
  /// The client's cancel (`reason`), see the diagram.
  [[nodiscard]] effects cancel(uint64_t id, const std::string& reason);
  /// The worker fails (a crash, `why`): every hand-off fails; its client
  /// hears why, D is cancelled. The engine is gone: nothing is released.
  [[nodiscard]] std::vector<effects> fail_all(const std::string& why);

  [[nodiscard]] bool holds(uint64_t id) const { return handoffs_.contains(id); }
  /// The step of request `id`'s hand-off; call only when holds(id).
  [[nodiscard]] step at(uint64_t id) const { return handoffs_.at(id).at; }
  [[nodiscard]] size_t size() const { return handoffs_.size(); }

private:
  struct handoff {
    transport::wire::actor_address decode_at;
    transport::wire::actor_address reply_to;
    step at = step::granting;
    bool released = false;
    /// Set by a cancel: its reason.
    bool cancelled = false;
    std::string cancel_reason;
  };

  static effects base(uint64_t id, const handoff& h);
  /// Ends `id`: returns its effects base and forgets it.
  effects end(uint64_t id);

  std::unordered_map<uint64_t, handoff> handoffs_;
};

} // namespace tessera::actors
