#pragma once
/// @file
/// What a trace replay measured, summed up: the token-level prefix-cache
/// hit rate (cached / prompt tokens of the successful requests) beside the
/// unbounded-cache optimum of the same requests, the prefill tokens the
/// server computed, TTFT and inter-token latency percentiles, throughput
/// and errors; the same per window of trace time; and their renderings (a
/// JSON object, a table row, SVG charts over time). Pure functions.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "bench/load_stats.hpp"
#include "bench/svg_chart.hpp"
#include "bench/trace_replay.hpp"

namespace tessera::bench {

/// The summary of a replay, or of one window of it.
struct trace_summary {
  /// Requests replayed (sent or not).
  size_t requests = 0;
  /// Requests that failed or were not sent.
  size_t errors = 0;
  /// The first error's text ("" if none).
  std::string first_error;
  /// Prompt tokens of the successful requests (the server's usage count).
  int64_t prompt_tokens = 0;
  /// Of those, served from the prefix cache (usage cached_tokens).
  int64_t cached_tokens = 0;
  /// prompt_tokens - cached_tokens: prefill work the server did.
  int64_t prefill_tokens_computed = 0;
  /// cached_tokens / prompt_tokens (0 when none).
  double hit_rate = 0;
  /// Input tokens of all replayed requests, and what an unbounded cache
  /// would serve of them (trace_cache_optimum.hpp).
  int64_t optimal_input_tokens = 0;
  int64_t optimal_hit_tokens = 0;
  /// optimal_hit_tokens / optimal_input_tokens.
  double optimal_hit_rate = 0;
  /// hit_rate / optimal_hit_rate (0 when the optimum is 0).
  double fraction_of_optimal = 0;
  /// TTFT, ITL, TPOT percentiles, wall time, requests/s, output tokens/s.
  level_summary latency;
  /// Send lag (sent - due) of the requests sent, ms: how late the client
  /// was against the schedule.
  latency_percentiles send_lag;
  /// Successful requests whose usage had no cached_tokens (counted as 0).
  size_t missing_cached_tokens = 0;
  /// Successful requests whose usage.prompt_tokens differed from the
  /// tokens sent (the server added or dropped some).
  size_t prompt_token_mismatches = 0;
};

/// Summarizes `samples` (replay_trace's) given the optimal hits of the same
/// requests (optimal_prefix_hits, one per sample).
[[nodiscard]] trace_summary summarize_trace(const std::vector<trace_sample>& samples,
                                            const std::vector<int64_t>& optimal_hits);

/// One window of trace time.
struct trace_window {
  /// Its start and end, seconds of trace time from the first replayed
  /// request's arrival.
  double start_s = 0;
  double end_s = 0;
  /// The requests that arrived in it.
  trace_summary summary;
  /// The server's autoscaling signal over the window (mean of the scrapes
  /// in it, summed over roles): model units demanded per second and the
  /// workers recommended (tessera_units_demanded_per_second,
  /// tessera_autoscale_recommended_workers). Negative: not scraped.
  double units_demanded_per_s = -1;
  double recommended_workers = -1;
};

/// One scrape of the autoscaling signal during a replay, at `trace_s`
/// seconds of trace time, summed over the roles.
struct autoscale_sample {
  double trace_s = 0;
  double units_demanded_per_s = 0;
  double recommended_workers = 0;
};

/// Sets each window's autoscaling columns to the mean of the samples whose
/// trace_s falls in [start_s, end_s); windows without one keep -1.
void attach_autoscale(std::vector<trace_window>& windows, const std::vector<autoscale_sample>& samples);

/// A table with one row per window: trace minutes, requests, TTFT p90,
/// units demanded per second and the recommended workers.
[[nodiscard]] std::string trace_timeline(const std::vector<trace_window>& windows);

/// The replay cut into windows of `window_s` seconds of trace time (by
/// arrival); windows without requests are left out.
[[nodiscard]] std::vector<trace_window> trace_windows(const std::vector<trace_sample>& samples,
                                                      const std::vector<int64_t>& optimal_hits, double window_s);

/// The summary as JSON: hit_rate, optimal_hit_rate, fraction_of_optimal,
/// prompt_tokens, cached_tokens, prefill_tokens_computed, requests, errors,
/// first_error, wall_s, output_tokens, requests_per_s, output_tok_s,
/// ttft_ms_{p50,p90,p99,mean}, itl_ms_{...}, tpot_ms_{...},
/// send_lag_ms_{p50,p99}, missing_cached_tokens, prompt_token_mismatches.
[[nodiscard]] nlohmann::json trace_summary_json(const trace_summary& s);

/// A window as JSON: start_s, end_s and its summary's keys.
[[nodiscard]] nlohmann::json trace_window_json(const trace_window& w);

/// `n` tokens for a table: "9999", "12.3k", "144.8M".
[[nodiscard]] std::string token_count(int64_t n);

/// The table header and one row per result JSON (as written by
/// `tessera bench trace --json`: "label" and the summary keys at the top).
[[nodiscard]] std::string trace_table(const std::vector<nlohmann::json>& results);

/// Charts over trace time (minutes): hit rate per window beside the
/// optimum per window (and the whole replay's as lines), TTFT p50 and p90
/// per window, and, when scraped, the recommended workers beside the
/// demand (units per second / 1000: busy workers' worth with fitted
/// units).
[[nodiscard]] std::vector<chart> trace_charts(const std::string& label, const trace_summary& total,
                                              const std::vector<trace_window>& windows);

} // namespace tessera::bench
