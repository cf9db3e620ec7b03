#pragma once
/// @file
/// The transport benchmark's outputs: the table, the JSON document and the
/// chart, each a pure function of the results.
///
/// JSON shape (numbers are null where a measurement is missing):
///
///   rtt_us_p50, rtt_us_p99, rtt_us_max (the frame sent back as it came),
///   rtt_codec_us_p50, rtt_codec_us_p99 (decoded and re-encoded at each end),
///   msgs_per_s:                           {selection: number}
///   block_gb_s, block_gb_s_one_block,
///   batch_us_p50, batch_us_p99,
///   batch_us_max:                         {selection: {"<batch bytes>": number}}
///   ucx_perftest: {
///     rtt_us_p50 (2 x tag_lat, a round trip), tag_lat_us (one-way),
///     msgs_per_s (tag_bw at the control frame size): {perftest key: number}
///     tag_bw_gb_s, ucp_put_bw_gb_s:       {perftest key: {"<bytes>": number}}
///     commands: [..], errors: [..], note: ".." }
///   block_vs_put_bw, block_vs_tag_bw:     {selection: {"<bytes>": ratio}}
///   rtt_vs_perftest:                      {selection: ratio of round trips}
///   ucx_perftest_node_setup: the shape of ucx_perftest, for ucx_perftest
///     in a node's own set-up (transport_results.hpp node_perftest_setup;
///     over tcp no ucp_put_bw: its entries are null)
///   rtt_vs_node_perftest, block_vs_node_put_bw, block_vs_node_tag_bw:
///     the ratios above, against the node set-up's figures
///   paired: {rtt_vs_perftest, block_vs_put_bw, block_vs_tag_bw}: the same
///     ratios, each the median over rounds of that round's ratio (ours
///     against ucx_perftest's of the same minutes)
///   paired_node_setup: the same keys, of the node set-up's ratios
///   idle_cpu_pct:                         {selection: {self, peer}}
///   transports: {selection: {label, ucx_tls, peer_error_handling, perftest}}
///   rounds, per_round: [{the figures above for one round, idle_before_pct,
///                        load_avg_1min_before, errors}]
///   config: iteration counts and sizes (per round); machine: cores, load.
///
/// The top-level figures are per-figure medians over the rounds.
///
/// Selections: "tcp", "shm", "shm_err_peer"; perftest keys: "tcp", "shm".

#include <string>

#include "bench/svg_chart.hpp"
#include "bench/transport_results.hpp"

namespace tessera::bench {

/// The result tables, as printed to stdout.
[[nodiscard]] std::string transport_table(const transport_bench_results& r);

/// The JSON document (shape above), indented.
[[nodiscard]] std::string transport_json(const transport_bench_results& r);

/// Block bandwidth per (selection, batch size): ours beside ucx_perftest's.
[[nodiscard]] bar_chart transport_chart(const transport_bench_results& r);

} // namespace tessera::bench
