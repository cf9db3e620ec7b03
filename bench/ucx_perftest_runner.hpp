#pragma once
/// @file
/// Runs UCX's own benchmark, `ucx_perftest` (Debian: ucx-utils), as a
/// server and a client on 127.0.0.1, and reads the numbers it prints, so
/// `tessera bench transport` can put UCX's ceiling beside our transport's
/// figures for the same UCX_TLS and sizes.
///
/// ucx_perftest prints one row per report interval and a last row
///
///   Final:  <iters> <lat p50> <lat avg> <lat overall> <bw avg> <bw overall> <rate avg> <rate overall>
///
/// Latencies are microseconds, and for ping-pong tests (tag_lat) they are
/// one-way: half the round trip. Bandwidths are MiB/s (2^20 bytes).

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <caf/expected.hpp>

namespace tessera::bench {

/// The final row of one ucx_perftest run.
struct perftest_result {
  uint64_t iterations = 0;
  /// Median latency, microseconds (one-way for tag_lat).
  double latency_us_p50 = 0;
  /// Mean latency over the whole run, microseconds.
  double latency_us_avg = 0;
  /// Bandwidth over the whole run, MiB/s as printed.
  double bandwidth_mib_s = 0;
  /// Messages per second over the whole run.
  double msgs_per_s = 0;

  /// The bandwidth in GB/s (10^9 bytes per second).
  [[nodiscard]] double bandwidth_gb_s() const { return bandwidth_mib_s * 1048576.0 / 1e9; }
};

/// Reads the "Final:" row of ucx_perftest's standard output. Errors
/// (caf::sec::runtime_error) when there is none or it does not hold eight
/// numbers.
[[nodiscard]] caf::expected<perftest_result> parse_perftest_output(std::string_view out);

/// One ucx_perftest measurement.
struct perftest_spec {
  /// "tag_lat", "tag_bw" or "ucp_put_bw" (not "put_bw": a UCT test that
  /// needs -d/-x).
  std::string test;
  /// Message size, bytes (-s).
  uint64_t size_bytes = 8;
  /// Measured iterations (-n).
  uint64_t iterations = 1000;
  /// Warm-up iterations (-w); ucx_perftest's own default is 10000.
  uint64_t warmup = 100;
  /// UCX_TLS for both processes ("" leaves the environment's).
  std::string tls;
  /// More environment of both processes, "NAME=value" each (e.g.
  /// "UCX_NET_DEVICES=lo"). Default: none.
  std::vector<std::string> env;
  /// `-e` on both sides: endpoints with peer error handling
  /// (UCP_ERR_HANDLING_MODE_PEER), as a node's. Default: false.
  bool error_handling = false;
  /// Wall-clock bound for the server and client together. Default: 60 s.
  std::chrono::milliseconds timeout{60000};
};

/// The command line of the client side of `spec` (for printing and the
/// README), e.g. "UCX_TLS=tcp ucx_perftest 127.0.0.1 -p 13337 -t tag_bw -s 65536 -n 1000 -w 100";
/// spec.env follows UCX_TLS, "-e" ends it where spec.error_handling.
/// Port 0 prints "-p PORT". The server side is "ucx_perftest -p PORT"
/// (with the same environment and "-e").
[[nodiscard]] std::string perftest_client_command(const perftest_spec& spec, int port);

/// The path of `ucx_perftest` found in PATH, or "" where it is not installed.
[[nodiscard]] std::string find_ucx_perftest();

/// Starts `program` as a server on a free port, waits until it listens,
/// runs the client against it and returns the client's final row. Both are
/// killed if they outlive spec.timeout. Errors (caf::sec::runtime_error)
/// name the step and carry the client's last output lines.
[[nodiscard]] caf::expected<perftest_result> run_perftest(const std::string& program,
                                                          const perftest_spec& spec);

} // namespace tessera::bench
