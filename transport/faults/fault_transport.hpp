#pragma once
/// @file
/// fault_transport: a decorator over any transport that injects the faults
/// a fault_plan describes (drop, delay, duplicate, reorder, corrupt, fail,
/// partition) into sends and transfers, deterministically for a given plan,
/// seed and operation sequence, and counts what it injected.
///
///   user ──send/transfer──> fault_transport ──(decide: one rule or none)──>
///       inner transport          │ delayed ops: timer on its event loop
///                                │ reorder: held until the next op to the peer
///   user <──callbacks── event loop <── relay (drops events from
///                                       partitioned peers) <── inner
///
/// Threading: the decorator has its own event_loop; every user-visible
/// callback (handler events relayed from the inner transport, completions,
/// injected completions) runs there, one at a time. All methods are
/// thread-safe; the destructor must not run on the decorator's callbacks.

#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <vector>

#include "transport/event_loop.hpp"
#include "transport/faults/fault_plan.hpp"
#include "transport/transport.hpp"

namespace tessera::transport {

/// Settings of a fault_transport.
struct fault_options {
  /// The clock rules' `after` is measured on (tests inject a fake one).
  /// Default (empty): std::chrono::steady_clock::now.
  std::function<std::chrono::steady_clock::time_point()> clock;
};

/// One injected fault, as recorded in fault_transport::history().
struct fault_event {
  /// The operation's number: sends and transfers through this decorator,
  /// counted from 1.
  uint64_t op_index = 0;
  fault_op op = fault_op::send;
  peer_id peer = 0;
  fault_kind kind = fault_kind::drop;

  friend bool operator==(const fault_event&, const fault_event&) = default;
};

/// What a fault_transport saw and injected.
struct fault_counters {
  /// Sends and transfers seen.
  uint64_t operations = 0;
  /// Operations a fault was injected into, by kind. `partition` counts
  /// operations refused because their peer was partitioned.
  std::array<uint64_t, fault_kind_count> injected{};

  /// Injected faults of kind `k`.
  [[nodiscard]] uint64_t of(fault_kind k) const { return injected[static_cast<size_t>(k)]; }
};

/// The decorator. Owns the inner transport (set_handler on the inner is
/// reserved to the decorator). Thread-safe.
///
/// capabilities: the inner's, with backend "faults(<inner backend>)".
class fault_transport final : public transport {
public:
  /// Wraps `inner` (not null) with `plan`.
  fault_transport(std::unique_ptr<transport> inner, fault_plan plan, fault_options options = {});

  /// Stops the event loop (delayed and held operations complete with
  /// `closed`; queued events are discarded), then destroys the inner
  /// transport; no callback runs after it returns.
  ~fault_transport() override;

  fault_transport(const fault_transport&) = delete;
  fault_transport& operator=(const fault_transport&) = delete;

  [[nodiscard]] const capabilities& caps() const override { return caps_; }
  void set_handler(transport_handler* handler) override;
  [[nodiscard]] caf::expected<std::string> listen(const std::string& address) override;
  [[nodiscard]] caf::expected<peer_id> connect(const std::string& address) override;

  /// Forwards, remembering the region so a `corrupt` transfer can stage the
  /// bytes it flips. The memory must outlive the decorator.
  [[nodiscard]] caf::expected<region_id> register_region(std::span<std::byte> memory) override;

  /// Forwards, remembering the region as register_region does.
  [[nodiscard]] caf::expected<allocated_region> allocate_region(uint64_t bytes) override;

  /// One operation of the plan; see fault_kind for what each fault does.
  void send(peer_id to, message msg, completion done) override;

  /// One operation of the plan; see fault_kind for what each fault does.
  /// A corrupt transfer stages its first non-empty block in a scratch
  /// region the decorator registers with the inner transport (kept until
  /// destruction: memory grows by that block per corrupt transfer).
  void transfer(peer_id to, transfer_batch batch, completion done) override;

  /// Releases an operation held for `peer` by reorder, then forwards.
  void disconnect(peer_id peer) override;

  /// Grants, identities and rejections are the wrapped transport's.
  [[nodiscard]] caf::expected<grant_id> grant(peer_id peer,
                                              std::vector<memory_range> ranges) override {
    return inner_->grant(peer, std::move(ranges));
  }
  void revoke(grant_id id) override { inner_->revoke(id); }
  [[nodiscard]] std::string peer_identity(peer_id peer) const override {
    return inner_->peer_identity(peer);
  }
  [[nodiscard]] std::vector<std::pair<std::string, uint64_t>> rejections() const override {
    return inner_->rejections();
  }

  /// Partitions `peer` now (as a partition rule firing would).
  void partition(peer_id peer);

  /// Ends a partition of `peer`; later operations reach it again.
  void heal(peer_id peer);

  /// True while `peer` is partitioned.
  [[nodiscard]] bool partitioned(peer_id peer) const;

  /// Forwards every operation held by reorder now, in peer order.
  void flush();

  /// Replaces the plan at run time (a fault harness driving a running
  /// node): rule counters start over, the generator is reseeded with the
  /// new plan's seed, rules' `after` counts from now, every partition
  /// heals and held operations are forwarded. An empty plan injects
  /// nothing.
  void set_plan(fault_plan plan);

  /// The plan in force.
  [[nodiscard]] fault_plan plan() const;

  /// A snapshot of the counters.
  [[nodiscard]] fault_counters counters() const;

  /// Every injected fault so far, in decision order.
  [[nodiscard]] std::vector<fault_event> history() const;

  /// The wrapped transport (e.g. for a backend's test hooks). Owned here.
  [[nodiscard]] transport& inner() { return *inner_; }

private:
  class relay;
  struct operation {
    fault_op op = fault_op::send;
    peer_id to = 0;
    message msg;
    transfer_batch batch;
    completion done;
  };
  struct decision {
    /// The firing rule's delay and error (copies: set_plan may replace
    /// the rules while the decision is applied).
    std::chrono::milliseconds delay{0};
    transport_errc error = transport_errc::injected_fault;
    fault_kind kind = fault_kind::drop;
    uint64_t draw = 0;
    bool faulted = false;
  };
  struct rule_state {
    uint64_t matched = 0;
    uint64_t fired = 0;
  };

  void submit(operation op);
  decision decide_locked(const operation& op, bool corruptible, const std::string& peer_name);
  void apply(operation op, const decision& d);
  void forward(operation op);
  bool corrupt_transfer(operation& op, uint64_t draw);
  void release_held(peer_id peer);
  void complete(const completion& done, caf::error err);
  completion wrap(completion done);
  [[nodiscard]] std::chrono::steady_clock::time_point now() const;

  std::unique_ptr<transport> inner_;
  std::unique_ptr<relay> relay_;
  fault_plan plan_;
  fault_options options_;
  capabilities caps_;
  std::chrono::steady_clock::time_point start_;
  std::atomic<transport_handler*> handler_{nullptr};

  mutable std::mutex mu_;
  fault_rng rng_;                                          // guarded by mu_
  std::vector<rule_state> rule_states_;                    // guarded by mu_
  fault_counters counters_;                                // guarded by mu_
  std::vector<fault_event> history_;                       // guarded by mu_
  std::set<peer_id> partitioned_;                          // guarded by mu_
  std::map<peer_id, operation> held_;                      // guarded by mu_
  std::map<region_id, std::span<std::byte>> regions_;      // guarded by mu_
  std::vector<std::unique_ptr<std::byte[]>> scratch_;      // guarded by mu_

  // Declared last: stopped first, before anything its tasks touch.
  event_loop loop_;
};

} // namespace tessera::transport
