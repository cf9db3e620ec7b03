#pragma once
/// @file
/// What `tessera bench transport` measured: per round, our transport's
/// figures for each selection and ucx_perftest's for each UCX_TLS, and the
/// per-figure medians over the rounds that the table, JSON and chart show.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bench/transport_peer.hpp"
#include "bench/transport_probe.hpp"
#include "bench/ucx_perftest_runner.hpp"

namespace tessera::bench {

/// ucx_perftest's figures for one UCX_TLS.
struct perftest_figures {
  std::string tls;
  /// tag_lat at the control frame's size (one-way latency).
  std::optional<perftest_result> tag_lat;
  /// tag_bw at the control frame's size (message rate).
  std::optional<perftest_result> tag_rate;
  /// Batch bytes -> tag_bw / ucp_put_bw at that message size.
  std::map<uint64_t, perftest_result> tag_bw;
  std::map<uint64_t, perftest_result> put_bw;
  /// The client command lines run, and any failures.
  std::vector<std::string> commands;
  std::vector<std::string> errors;
};

/// One pass over every selection (and ucx_perftest beside it).
struct transport_round {
  /// Selection key -> figures; a selection that failed is in `errors`.
  std::map<std::string, transport_probe_result> tessera;
  std::map<std::string, std::string> errors;
  /// Perftest key ("tcp", "shm") -> figures; empty when not run.
  std::map<std::string, perftest_figures> perftest;
  /// CPU idle share (percent, all cores) over the moment before the round
  /// started, and the 1-minute load average then.
  double idle_before_pct = 0;
  double load_before = 0;
};

/// Everything one run measured.
struct transport_bench_results {
  bool quick = false;
  int window = 1;
  transport_probe_options probe;
  std::vector<transport_selection> selections;
  std::vector<transport_round> rounds;
  /// Medians over the rounds (summarize_rounds): per selection, per
  /// perftest key, each figure the median of the rounds that have it.
  std::map<std::string, transport_probe_result> tessera;
  std::map<std::string, perftest_figures> perftest;
  /// Failures of our transport, "round N: ..." per selection key.
  std::map<std::string, std::string> errors;
  /// Why ucx_perftest was not run ("" when it was).
  std::string perftest_note;
  /// 1-minute load average before and after the run.
  double load_before = 0, load_after = 0;
};

/// The median of `v` (mean of the middle two for an even count); NaN for
/// none.
[[nodiscard]] double median_of(std::vector<double> v);

/// Fills r.tessera, r.perftest and r.errors from r.rounds.
void summarize_rounds(transport_bench_results& r);

} // namespace tessera::bench
