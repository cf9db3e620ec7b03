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

/// How ucx_perftest is run for one perftest key: the environment and
/// flags of both processes, and which tests.
struct perftest_setup {
  /// UCX_TLS.
  std::string tls;
  /// More environment, "NAME=value" each (perftest_spec::env).
  std::vector<std::string> env;
  /// `-e` (perftest_spec::error_handling).
  bool error_handling = false;
  /// Whether ucp_put_bw runs at each batch size (tag_bw always does).
  bool put_bw = true;
};

/// ucx_perftest as the bench has always run it beside `sel`: sel.tls only,
/// every interface, no error handling. UCX then takes any lane it likes
/// (over tcp: zero-copy RMA over lo and eth0 together), some of which a
/// node may not use.
[[nodiscard]] perftest_setup plain_perftest_setup(const transport_selection& sel);

/// ucx_perftest in the set-up a node's own UCX context has for `sel`'s
/// perftest key, on 127.0.0.1:
///  - "tcp": UCX_TLS=tcp, `-e` (a node's endpoints have peer error
///    handling: tcp then has no RMA lanes), UCX_NET_DEVICES=lo (a node
///    uses only its configured address's interface) and the tcp segment
///    sizes of ucx_options (tcp_tx_seg_bytes / tcp_rx_seg_bytes); tag_bw
///    only (no put: a node with a secret has no RMA in that context).
///  - "shm": UCX_TLS=sm,self, no error handling: the same-host context
///    (ucx_same_host_rma.cpp) that puts a same-host peer's KV blocks;
///    ucp_put_bw and tag_bw.
[[nodiscard]] perftest_setup node_perftest_setup(const transport_selection& sel);

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
  /// The same, ucx_perftest in a node's set-up (node_perftest_setup), run
  /// right after `perftest`; empty when not run.
  std::map<std::string, perftest_figures> perftest_node;
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
  std::map<std::string, perftest_figures> perftest_node;
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

/// Fills r.tessera, r.perftest, r.perftest_node and r.errors from r.rounds.
void summarize_rounds(transport_bench_results& r);

} // namespace tessera::bench
