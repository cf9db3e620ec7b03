#pragma once
/// @file
/// A worker's series in its process's metrics registry (one label:
/// worker). Besides what the worker did (steps, transfers, fetches,
/// offers), two series tell whether the host kept up with a sim engine's
/// model (bench trace's host-bound guard, bench/README.md):
/// - tessera_engine_step_delay_seconds_total: how long each step waited to
///   start after it was due (the worker's own step message queued behind
///   other actors on starved cores);
/// - tessera_sim_step_wall_seconds_total: the wall seconds the sim's model
///   asked its steps to last (modelled seconds x time_scale).
/// Over an interval of continuous work, busy + delay equals the asked wall
/// time when the host keeps up; what exceeds it is the host's share.

#include <string>

#include "cluster/metrics.hpp"

namespace tessera::actors {

struct worker_metrics {
  worker_metrics(cluster::metrics_registry& r, const std::string& worker);

  /// Counts one ended fetch: hit (every block wanted came), partial,
  /// late (a store timed out, nothing came), rejected (a store was busy),
  /// skipped (fetching was estimated slower than computing), failed,
  /// miss (the stores had none).
  void fetch_ended(const char* outcome);

  cluster::metric_gauge& kv_used;
  cluster::metric_counter& aborted;
  cluster::metric_counter& transfer_bytes;
  cluster::metric_counter& transfer_seconds;
  cluster::metric_counter& store_fetched;
  cluster::metric_counter& peer_fetched;
  cluster::metric_counter& fetch_refused;
  cluster::metric_counter& store_offered;
  cluster::metric_counter& offer_dropped;
  cluster::metric_counter& steps;
  cluster::metric_counter& busy_seconds;
  cluster::metric_counter& step_delay_seconds;
  cluster::metric_counter& sim_wall_seconds;
  /// Running requests the engine preempted (their KV blocks freed for
  /// others; each is computed again when it resumes), and the tokens whose
  /// KV it computed (prompts, recomputes after a preemption, decoded
  /// tokens): under memory pressure the first grows and the second grows
  /// faster than the tokens served.
  cluster::metric_counter& preemptions;
  cluster::metric_counter& tokens_computed;
  cluster::metric_histogram& fetch_seconds;
  cluster::metrics_registry& registry;
  std::string worker_name;
};

} // namespace tessera::actors
