#pragma once
/// @file
/// Keeps a node's workers running (internal to actors/node).
///
/// A worker that dies of an error (an exception out of its engine, an
/// injected fault) has already failed the requests it held: each client got
/// an error naming the worker (worker_actor.hpp). The supervisor then starts
/// a new worker in its place: a fresh engine, a new worker id (the router
/// sees a new worker and drops the old one with its cache entries), the
/// same name, so routes and proxies reach the new one. At most
/// max_restarts within restart_window; after that the worker stays down
/// (the router stops routing to it when its heartbeats stop) and it is
/// logged as an error.
///
///   start(spec) --> worker --crash--> down_msg --> start(spec, new id)
///                                                  restarts_total{worker}++
///
/// A dead worker's engine is kept until the supervisor is destroyed: its
/// KV pool is registered with the bridge's transport, and a peer may still
/// be putting blocks into it. Destroy the supervisor after the bridge.

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/node/node_parts.hpp"

namespace tessera::actors::detail {

struct supervisor_options {
  /// Restarts of one worker allowed within restart_window. Default: 3.
  int max_restarts = 3;
  std::chrono::seconds restart_window{60};
  /// Where tessera_worker_restarts_total{worker} goes; null: nowhere.
  std::shared_ptr<cluster::metrics_registry> metrics;
};

class worker_supervisor {
public:
  /// `br` and `model` must outlive the supervisor's stop().
  worker_supervisor(caf::actor_system& sys, bridge& br, loaded_model model, supervisor_options opts);
  /// stop(), then the engines are freed.
  ~worker_supervisor();
  worker_supervisor(const worker_supervisor&) = delete;
  worker_supervisor& operator=(const worker_supervisor&) = delete;

  /// Starts a worker (start_worker) and supervises it. Blocks until it is
  /// started; errors: start_worker's.
  [[nodiscard]] caf::expected<started_worker> start(worker_spec spec);

  /// The supervisor actor. It takes (fault_atom, worker name, fault) and
  /// replies with nothing, or an error when no worker has that name.
  [[nodiscard]] const caf::actor& actor() const { return actor_; }

  /// Stops supervising, stops every worker and waits (bounded) until they
  /// are gone. Idempotent.
  void stop();

  /// Keeps engines alive until the supervisor is destroyed (shared with
  /// the actor).
  struct engine_keep {
    std::mutex mutex;
    std::vector<std::shared_ptr<engine::engine>> engines;
  };

private:
  caf::actor_system& sys_;
  std::shared_ptr<engine_keep> keep_;
  caf::actor actor_;
  bool stopped_ = false;
};

} // namespace tessera::actors::detail
