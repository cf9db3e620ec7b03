#pragma once
/// @file
/// `tessera bench transport`: the UCX transport between two processes on
/// loopback (control round trips, message rate, KV block batch bandwidth)
/// for each transport selection, with `ucx_perftest` run side by side on
/// the same UCX_TLS and sizes. The peer is this binary again
/// (/proc/self/exe with `--peer`, transport_peer.hpp).

#include <cstdint>
#include <string>
#include <vector>

#include "bench/transport_results.hpp"

namespace tessera::bench {

/// Which ucx_perftest set-ups run beside our transport (transport_results.hpp):
/// as the bench always ran it (plain_perftest_setup), in a node's own
/// set-up (node_perftest_setup), or both, plain first.
enum class perftest_setups { both, plain, node };

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
  /// Which ucx_perftest set-ups. Default: both.
  perftest_setups perftest_setup = perftest_setups::both;
  /// KV block size inside a batch, bytes. Default: 64 KiB.
  uint64_t block_bytes = uint64_t{64} << 10;
  /// Batches in flight. Default: 4.
  int window = 4;
  /// transport_probe_options::peer_acks. Default: false.
  bool peer_acks = false;
  /// transport_probe_options::scatter_blocks. Default: false.
  bool scatter_blocks = false;
  /// transport_probe_options::allocated_regions (both processes). Default: true.
  bool allocated_regions = true;
  /// transport_probe_options::grants (both processes). Default: false.
  bool grants = false;
  /// Passes over every selection (each with its ucx_perftest runs); the
  /// figures reported are per-figure medians. 0: 3, or 1 with quick.
  int rounds = 0;
  /// Before each round, wait (at most 10 minutes) until the CPUs were at
  /// least this idle (percent) over 2 s; 0 does not wait. Default: 0.
  int wait_idle_pct = 0;
  /// ucx_options::progress_spin of both processes, microseconds; negative:
  /// the transport's default. Default: -1.
  int progress_spin_us = -1;
  /// Selection keys to measure ("tcp", "shm", "shm_err_peer"); empty: all.
  std::vector<std::string> transports;
  /// KV paths to measure each selection with ("auto", "put", "am_rndv";
  /// ucx_options::kv_path of the sending side), one after the other in
  /// each round (transport_peer.hpp with_kv_paths). Default: auto.
  std::vector<std::string> kv_paths = {"auto"};
};

/// The probe settings of a full run (per round) or of a --quick one.
[[nodiscard]] transport_probe_options transport_probe_defaults(bool quick);

/// Runs the benchmark, prints progress to stderr and a table to stdout,
/// writes JSON and SVG if asked. Returns a process exit code (non-zero when
/// a measurement of our transport failed; a failed ucx_perftest run is
/// reported, not fatal).
int run_transport_bench(const transport_bench_options& opts);

} // namespace tessera::bench
