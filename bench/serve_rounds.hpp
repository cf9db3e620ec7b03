#pragma once
/// @file
/// `tessera bench serve --sdk --rounds N`: each concurrency level runs N
/// times over each transport, interleaved ABBA (HTTP, SDK, SDK, HTTP, HTTP,
/// SDK, ...) so neither transport always runs first or second while the
/// machine warms or drifts; per level and transport the median, min and max
/// of output tok/s and TTFT p50/p90 over the rounds, and the ratio of the
/// medians; and the one table `bench serve --sdk` prints of them. Pure
/// functions.

#include <string>
#include <vector>

#include "bench/load_stats.hpp"

namespace tessera::bench {

/// The transport of one run of a level.
enum class serve_transport { http, sdk };

/// The order of a level's 2 x `rounds` runs: HTTP, SDK, SDK, HTTP, HTTP,
/// SDK, ... (each transport `rounds` times; empty when rounds < 1).
[[nodiscard]] std::vector<serve_transport> abba_order(int rounds);

/// Median, min and max of one figure over the rounds; all 0 when none.
struct round_spread {
  double median = 0;
  double min = 0;
  double max = 0;
};

/// The median of `values` (the mean of the middle two for an even count),
/// with min and max.
[[nodiscard]] round_spread spread_of(std::vector<double> values);

/// One transport's rounds of one level.
struct transport_rounds {
  round_spread output_tok_s;
  round_spread ttft_p50_ms;
  round_spread ttft_p90_ms;
  round_spread itl_p50_ms;
  /// Errors over all rounds.
  size_t errors = 0;
};

/// Aggregates one transport's rounds of a level.
[[nodiscard]] transport_rounds aggregate_rounds(const std::vector<level_summary>& rounds);

/// SDK / HTTP of the medians of output tok/s; 0 when HTTP's is 0.
[[nodiscard]] double median_ratio(const transport_rounds& http, const transport_rounds& sdk);

/// One level of the SDK-against-HTTP table: its rounds over each transport.
struct sdk_table_row {
  int concurrency = 0;
  transport_rounds http;
  transport_rounds sdk;
};

/// The table `tessera bench serve --sdk` prints, one row per level: output
/// tok/s of each transport and SDK/HTTP (of the medians), TTFT p50 and p90
/// and ITL p50 of each, errors; then a line saying how to read it. With
/// rounds > 1 each figure is "median (min-max)" over the rounds; with one
/// round, the round's figure.
[[nodiscard]] std::string sdk_table(const std::vector<sdk_table_row>& rows, int rounds);

} // namespace tessera::bench
