#pragma once
/// @file
/// The cost model of a prompt's prefix fetch (kv_tiering.hpp): is fetching
/// the blocks a pool lacks from a store estimated cheaper than computing
/// them, and how long may the fetch take. A plain class, fed by the worker
/// with what it measures; no actor, no clock of its own.
///
/// Fetch time: the prefix's bytes over the bandwidth measured on that
/// store's earlier answers, plus their latency (an exponentially weighted
/// average of each; optimistic priors until a store has answered).
/// Compute time: the backend's own estimate where it has one (the sim
/// engine prices a prefill with its roofline model, engine::backend::
/// prefill_wall_seconds), else the prompt tokens over the engine's measured
/// token rate.
///
/// Like with like. Where the backend models a device (the sim engine), it
/// also prices loading the prefix's bytes into the pool
/// (engine::backend::load_wall_seconds), and the decision compares that
/// modelled load with the modelled compute: on a busy host a fetch waits
/// for CPU as every message does, but the modelled compute does not stretch
/// with it, so a host-measured fetch against a modelled compute would give
/// up hits a real device would take, and make the sim's hit rate a figure
/// of the host (issue 14). The measured fetch time still sets the deadline,
/// which is wall time on this host.
///
/// Decision: skip the fetch (compute at once, counted as outcome "skipped")
/// only when the store has answered before and the fetch is estimated
/// slower than `skip_ratio` x computing (the compute estimate leaves out
/// the queue a computed prompt waits in) and than `min_skip_fetch` (a
/// fetch of a few milliseconds is never worth the cache hits it gives up,
/// however fast a tiny model computes); every `probe_every`-th skip of a
/// store fetches anyway, so a store that was slow once is measured again.
/// Otherwise fetch, with a deadline that follows the
/// prefix's size and the compute it saves: floor + 4 x the estimated fetch
/// time + 2 x the compute time, at most `max_deadline`. A fetch that runs
/// past its deadline keeps the blocks that arrived and computes the rest.
///
/// The floor follows the store's tail, not only its mean: it is at least
/// `tail_factor` x the slowest answer the store gave lately (a maximum that
/// decays by `tail_keep` per answer), up to `max_tail_floor`. A store whose
/// reads are fast on average but sometimes wait behind a large one (a long
/// prefix read from disk) would otherwise run the asks queued behind that
/// read past a floor sized for its mean (issue 14's late fetches).
///
/// Only answers feed the deadline (its mean and its tail). An ask that
/// timed out says the store takes at least its timeout: that counts toward
/// skipping the store until it answers again, but if it also raised the
/// next deadline, that deadline's timeout would raise the one after, and a
/// stuck store would hold every request up to `max_deadline`.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace tessera::actors {

struct fetch_cost_options {
  /// The shortest deadline (a store's round trip on a busy node). Default: 250 ms.
  std::chrono::milliseconds min_deadline{250};
  /// The longest. Default: 30 s.
  std::chrono::milliseconds max_deadline{30000};
  /// The floor is at least this many times the store's recent slowest answer ... Default: 2.
  double tail_factor = 2;
  /// ... which decays by this much per answer (about 350 answers to halve). Default: 0.998.
  double tail_keep = 0.998;
  /// ... up to this. Default: 2 s.
  std::chrono::milliseconds max_tail_floor{2000};
  /// Priors before a store has answered. Defaults: 1 GB/s, 1 ms.
  double prior_bytes_per_s = 1e9;
  double prior_latency_s = 1e-3;
  /// Weight of a new observation in the averages. Default: 0.2.
  double weight = 0.2;
  /// Skip when fetching is estimated slower than this many times computing. Default: 2.
  double skip_ratio = 2;
  /// ... and slower than this. Default: 50 ms.
  std::chrono::milliseconds min_skip_fetch{50};
  /// Fetch anyway after this many skips of a store in a row. Default: 16.
  uint32_t probe_every = 16;
};

/// What the model says of one fetch.
struct fetch_plan {
  /// Estimated seconds to fetch (measured on this host's earlier fetches;
  /// at least the last timeout while the store has not answered since),
  /// and to compute instead (nullopt: unknown).
  double fetch_s = 0;
  /// The backend's modelled seconds to load the blocks, where it models a
  /// device: then the decision compares it, not fetch_s, with compute_s.
  std::optional<double> modelled_fetch_s;
  std::optional<double> compute_s;
  /// Whether to fetch at all.
  bool fetch = true;
  /// The whole fetch's deadline, from its start.
  std::chrono::milliseconds deadline{0};
};

class fetch_cost_model {
public:
  explicit fetch_cost_model(fetch_cost_options o = {}) : opts_(o) {}

  /// A store at `source` answered `bytes` of blocks in `seconds`.
  void observe_fetch(const std::string& source, uint64_t bytes, double seconds);
  /// An ask of the store at `source` went unanswered for `seconds` (its
  /// timeout): the store takes at least that long until it answers again.
  void observe_timeout(const std::string& source, double seconds);
  /// The engine computed `tokens` in `seconds` of steps.
  void observe_compute(uint64_t tokens, double seconds);

  /// The plan for fetching `bytes` from `source` instead of computing
  /// `tokens`; `backend_compute_s` and `backend_load_s` are the backend's
  /// estimates of computing them and of loading the bytes, if it has them.
  /// A plan that skips counts toward the store's next probe.
  [[nodiscard]] fetch_plan plan(const std::string& source, uint64_t bytes, int64_t tokens,
                                std::optional<double> backend_compute_s,
                                std::optional<double> backend_load_s = std::nullopt);

private:
  struct source_rate {
    double bytes_per_s = 0;
    double latency_s = 0;
    /// The slowest answer lately (decayed).
    double slowest_s = 0;
    /// The longest unanswered ask since the last answer (0: none).
    double stalled_s = 0;
    uint64_t answers = 0;
    uint32_t skips = 0; // in a row
  };
  fetch_cost_options opts_;
  std::map<std::string, source_rate> sources_;
  /// Decayed sums of tokens computed and their seconds.
  double tokens_ = 0;
  double compute_seconds_ = 0;
};

} // namespace tessera::actors
