#pragma once
/// @file
/// `tessera bench transport`: the UCX transport between two processes on
/// loopback (control round trips, message rate, KV block batch bandwidth)
/// for each transport selection, with `ucx_perftest` run side by side on
/// the same UCX_TLS and sizes. The peer is this binary again
/// (/proc/self/exe with `--peer`, transport_peer.hpp).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bench/transport_peer.hpp"
#include "bench/transport_probe.hpp"
#include "bench/ucx_perftest_runner.hpp"

namespace tessera::bench {

/// Options of the transport benchmark.
struct transport_bench_options {
  /// Where to write the JSON results ("" for none).
  std::string json_path;
  /// Where to write an SVG chart of block bandwidth ("" for none).
  std::string svg_path;
  /// A short smoke run: small iteration counts. Default: false.
  bool quick = false;
  /// Run ucx_perftest beside our transport (where it is installed).
  /// Default: true.
  bool perftest = true;
  /// KV block size inside a batch, bytes. Default: 64 KiB.
  uint64_t block_bytes = uint64_t{64} << 10;
  /// Batches in flight. Default: 1.
  int window = 1;
};

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

/// Everything one run measured.
struct transport_bench_results {
  bool quick = false;
  int window = 1;
  transport_probe_options probe;
  std::vector<transport_selection> selections;
  /// Selection key -> figures; a selection that failed is in `errors`.
  std::map<std::string, transport_probe_result> tessera;
  std::map<std::string, std::string> errors;
  /// Perftest key ("tcp", "shm") -> figures; empty when not run.
  std::map<std::string, perftest_figures> perftest;
  /// Why ucx_perftest was not run ("" when it was).
  std::string perftest_note;
  /// 1-minute load average before and after the run.
  double load_before = 0, load_after = 0;
};

/// The probe settings of a full run or of a --quick one.
[[nodiscard]] transport_probe_options transport_probe_defaults(bool quick);

/// Runs the benchmark, prints progress to stderr and a table to stdout,
/// writes JSON and SVG if asked. Returns a process exit code (non-zero when
/// a measurement of our transport failed; a failed ucx_perftest run is
/// reported, not fatal).
int run_transport_bench(const transport_bench_options& opts);

} // namespace tessera::bench
