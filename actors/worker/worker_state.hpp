#pragma once
/// @file
/// The worker actor's state and the shell functions its handlers share
/// (private to actors/worker: worker.cpp, worker_handoff.cpp,
/// worker_fetch.cpp). The protocols' decisions live in plain classes the
/// state holds: handoff_sender, handoff_receiver, prefix_fetch,
/// store_offers; the functions here feed them events and carry out what
/// they answer (messages, engine calls, timers).

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include <caf/all.hpp>

#include "actors/bridge/remote_actor.hpp"
#include "actors/kvstore/kvstore_actor.hpp"
#include "actors/kvstore/kvstore_intake.hpp"
#include "actors/worker/handoff_receiver.hpp"
#include "actors/worker/handoff_sender.hpp"
#include "actors/worker/prefix_fetch.hpp"
#include "actors/worker/remote_offers.hpp"
#include "actors/worker/store_offers.hpp"
#include "actors/worker/worker_actor.hpp"
#include "actors/worker/worker_metrics.hpp"

namespace tessera::actors::worker_shell {

namespace wire = transport::wire;

/// The worker's interface plus its own loop messages.
using worker_impl = worker_local_actor::extend<
  /// Runs one engine step (the worker sends it to itself while busy).
  caf::reacts_to<step_atom>,
  /// A granted hand-off whose commit never came: free its blocks.
  caf::reacts_to<expire_atom, uint64_t>,
  /// Time to tell the router we are here and how busy.
  caf::reacts_to<heartbeat_atom>>;

/// A request this worker generates for (or prefills, then hands over).
struct tracked {
  wire::actor_address reply_to;
  /// Set while this worker only prefills: the worker that continues.
  wire::actor_address decode_at;
  /// The request as the client asked for it (the hand-off carries it).
  engine::request original;
  /// With a kv store: the sequence so far (prompt and output) and its
  /// cache salt, offered to the store when it finishes.
  std::vector<int32_t> tokens;
  std::string cache_salt;
  /// Model units of its work still to do here (worker_config::units): a *
  /// prompt until prefilled, b + d * context per output token left (from
  /// its current context), c until it ends.
  double units_left = 0;
  /// Tokens before its next output (the KV its next decode step reads),
  /// and the output tokens it has left to generate here.
  int64_t context = 0;
  int64_t output_left = 0;
  /// Whether its prompt is computed (its first output came, or its KV was
  /// handed over from a prefill worker).
  bool prefilled = false;
};

/// A request waiting for the stores' blocks before it enters the engine.
struct pending_fetch {
  wire::request_handoff handoff;
  caf::typed_response_promise<caf::unit_t> promise;
  prefix_fetch fetch;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
};

struct worker_state {
  static inline const char* name = "worker";

  std::shared_ptr<engine::engine> eng;
  worker_config cfg;
  /// Requests in the engine here (a prefill leaves when its hand-off starts).
  std::unordered_map<uint64_t, tracked> requests;
  /// Hand-offs of prefills done here (handoff_sender.hpp).
  handoff_sender sender;
  /// Hand-offs to this worker (handoff_receiver.hpp), and the promises of
  /// those that wait for blocks, by ticket.
  handoff_receiver receiver{{}, {}};
  std::unordered_map<uint64_t, caf::typed_response_promise<wire::kv_grant>> grant_promises;
  uint64_t next_ticket = 1;
  std::unordered_map<uint64_t, pending_fetch> fetching;
  remote_actor_cache<worker_actor> peers;
  remote_actor_cache<kvstore_actor> stores;
  std::unique_ptr<worker_metrics> metrics;
  bool stepping = false;
  /// When the step message now queued was sent (step delay, worker_metrics).
  std::chrono::steady_clock::time_point step_due;
  /// The backend's emulated wall seconds already exported
  /// (tessera_sim_step_wall_seconds_total).
  double emulated_exported = 0;
  /// The engine's preemptions and computed tokens already counted in the
  /// metrics (count_step adds what grew since).
  uint64_t preemptions_exported = 0;
  uint64_t tokens_computed_exported = 0;
  /// Offers the store's writer has not answered yet (store_offers.hpp).
  store_offers offers{0};
  /// With worker_config::remote_store: its intake, the blocks that store
  /// is known to hold (remote_offers.hpp), and when a failed offer was
  /// last logged.
  remote_actor_cache<kvstore_intake_actor> intakes;
  remote_store_memory remote_held;
  std::chrono::steady_clock::time_point offer_failure_logged;
  /// When a failed prefix fetch was last logged (worker_fetch.cpp).
  std::chrono::steady_clock::time_point fetch_failure_logged;
  uint64_t next_batch = 1;
  uint64_t next_event = 0; // the router expects a worker's first event to be 0
  /// Whether a prefix fetch pays (fetch_cost.hpp), and the engine's
  /// tokens computed already fed to it.
  fetch_cost_model fetch_costs;
  uint64_t tokens_computed_seen = 0;
  /// Model units of work done since the worker started (heartbeat).
  double units_served = 0;
};

using worker_pointer = worker_impl::stateful_pointer<worker_state>;

/// Whether finished sequences are offered to a kv store (the node's, or
/// another node's: worker_config::remote_store).
[[nodiscard]] inline bool offering(const worker_state& st) {
  return (st.cfg.store && st.cfg.store_writer) || !st.cfg.remote_store.empty();
}

// worker.cpp
/// Starts stepping the engine if it has work and no step is queued.
void kick(worker_pointer self);
/// Sends `msg` to `to` (any node) through the bridge, one-way.
void tell(worker_pointer self, const wire::actor_address& to, caf::message msg);
/// Tells `to` that request `id` failed, and why.
void fail(worker_pointer self, const wire::actor_address& to, uint64_t id, const std::string& why);
/// The worker at `at` (through the bridge when remote).
[[nodiscard]] worker_actor peer(worker_pointer self, const wire::actor_address& at);
/// Puts request h into the engine (request_start.hpp) and starts stepping.
[[nodiscard]] caf::error admit(worker_pointer self, wire::request_handoff h);

// worker_handoff.cpp
/// P's side of a hand-off, after the prefill of `t` finished.
void start_handoff(worker_pointer self, uint64_t id, tracked t);
/// Grants the waiting hand-offs that fit now, in order; fails those past
/// their deadline.
void grant_waiting(worker_pointer self);
/// The handlers of the decode side: handoff, commit, the grant's timer.
[[nodiscard]] caf::result<wire::kv_grant> on_handoff(worker_pointer self, wire::request_handoff h);
[[nodiscard]] caf::result<void> on_commit(worker_pointer self, const wire::kv_transfer_batch& d);
void on_expire(worker_pointer self, uint64_t id);
/// Request `id` was cancelled (`reason`): ends its hand-off, either side.
void cancel_handoff(worker_pointer self, uint64_t id, const std::string& reason);
/// Fails every hand-off in progress here, both sides (a crash).
void fail_handoffs(worker_pointer self, const std::string& why);

// worker_remote_offers.cpp
/// Offers the blocks of `tokens` to the remote store's intake
/// (worker_config::remote_store), in chunks, within offer_max_bytes.
void offer_remote(worker_pointer self, std::span<const int32_t> tokens, const std::string& cache_salt);

// worker_fetch.cpp
/// Starts the prefix fetch of `h` when its prompt's prefix is in a store
/// and fetching pays: the promise generate answers with once the request is
/// in the engine. Nullopt: admit `h` now.
[[nodiscard]] std::optional<caf::typed_response_promise<caf::unit_t>> start_fetch(worker_pointer self,
                                                                                  wire::request_handoff& h);

} // namespace tessera::actors::worker_shell
