#pragma once
/// @file
/// The far side of `tessera bench transport`: a second process (the same
/// binary, `tessera bench transport --peer ...`) that listens on loopback
/// with one UCX transport selection and answers the benchmark's probes.
/// Also the little protocol both sides speak.
///
/// Protocol (control messages are real wire frames: a wire::heartbeat whose
/// `sequence` carries the number below, encoded and decoded on both sides):
///
///   probe                                  peer
///   "echo"(n)       ---------------->      decode, encode, send back
///                   <----------------      "pong"(n)
///   "sink"(i) x M   ---------------->      decode, count
///   "sink_end"(M)   ---------------->      decode
///                   <----------------      "sink_ack"(messages counted), count = 0
///   transfer(batch k) -------------->      on_blocks_arrived(k)
///                   <----------------      "blocks_ack"(k)
///
/// "blocks_ack" is not a wire frame but the batch id alone (ack_frame: 8
/// bytes, little-endian): the batch figures time the transport's batch
/// path; a heartbeat's encode on the peer and decode (full validation)
/// here add about 1 us per batch over shared memory (rtt_codec_us_p50
/// against rtt_us_p50), where a 64 KiB batch takes ~2 us with 4 in flight.
///
/// Start-up: the peer registers one receive region, listens on
/// 127.0.0.1:0 and prints one line `LISTENING <host:port> REGION <id> <bytes>`;
/// it exits (code 0) when the probe disconnects, or (code 1) when no probe
/// came within its idle timeout or its parent process died.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <caf/expected.hpp>

#include "transport/transport.hpp"
#include "transport/ucx/ucx_kv_path.hpp"

namespace tessera::bench {

/// One UCX transport selection the benchmark measures.
struct transport_selection {
  /// JSON key: "tcp", "shm", "shm_err_peer".
  std::string key;
  /// Table label: "tcp", "shm (err none)", "shm (err peer)".
  std::string label;
  /// ucx_options::tls.
  std::string tls;
  /// ucx_options::peer_error_handling.
  bool peer_error_handling = true;
  /// Key of the ucx_perftest run (same UCX_TLS) it is compared with.
  std::string perftest_key;
  /// ucx_options::kv_path of the measuring (sending) side; the peer
  /// receives either path. Default: automatic.
  transport::ucx_kv_path kv_path = transport::ucx_kv_path::automatic;
};

/// Each of `selections` once per path in `kv_paths` (names as
/// transport::to_string writes them). With one path, "auto", they stay as
/// they are; otherwise keys get "_<path>" and labels " <path>" appended
/// for every path but "auto"; a path named twice counts once. Errors: an
/// unknown path name.
[[nodiscard]] caf::expected<std::vector<transport_selection>>
with_kv_paths(const std::vector<transport_selection>& selections,
              const std::vector<std::string>& kv_paths);

/// tcp (tls "tcp", peer error handling on, the transport's default mode);
/// shm with error handling off (tls "sm,self,tcp": UCX picks shared memory);
/// shm with it on (same tls, but UCX 1.13 then uses tcp lanes only).
[[nodiscard]] std::vector<transport_selection> default_transport_selections();

/// The transport options of both processes of the benchmark: with
/// `grants`, a fixed secret (the benchmark's, on loopback) and grants_only.
[[nodiscard]] transport::transport_options bench_transport_options(bool grants);

/// Actor names of the protocol above.
inline constexpr std::string_view echo_actor = "echo";
inline constexpr std::string_view pong_actor = "pong";
/// The peer sends the frame back as it came (pong_raw), not decoded.
inline constexpr std::string_view echo_raw_actor = "echo_raw";
inline constexpr std::string_view pong_raw_actor = "pong_raw";
inline constexpr std::string_view sink_actor = "sink";
inline constexpr std::string_view sink_end_actor = "sink_end";
inline constexpr std::string_view sink_ack_actor = "sink_ack";
inline constexpr std::string_view blocks_ack_actor = "blocks_ack";

/// The control message with `sequence`: an encoded wire::heartbeat of a
/// typical size (node id, load, queue depth, one tier's usage).
[[nodiscard]] std::vector<std::byte> control_frame(uint64_t sequence);

/// Decodes a control_frame (full wire checks) and returns its sequence.
[[nodiscard]] caf::expected<uint64_t> control_sequence(std::span<const std::byte> frame);

/// The "blocks_ack" frame for batch `batch_id`: 8 bytes, little-endian.
[[nodiscard]] std::vector<std::byte> ack_frame(uint64_t batch_id);

/// The batch id of an ack_frame; errors unless `frame` is exactly 8 bytes.
[[nodiscard]] caf::expected<uint64_t> ack_batch_id(std::span<const std::byte> frame);

/// Settings of the peer process.
struct transport_peer_options {
  /// ucx_options::tls. Default: "tcp".
  std::string tls = "tcp";
  /// ucx_options::peer_error_handling. Default: true.
  bool peer_error_handling = true;
  /// Size of the receive region, bytes (the largest batch). Default: 16 MiB.
  uint64_t pool_bytes = uint64_t{16} << 20;
  /// The region from transport::allocate_region (true) or heap memory
  /// registered with register_region. Default: true.
  bool allocated = true;
  /// transport_probe_options::grants: a secret and grants_only; the probe
  /// is granted the whole region when it connects. Default: false.
  bool grants = false;
  /// ucx_options::progress_spin, microseconds; negative: the transport's
  /// default. Default: -1.
  int progress_spin_us = -1;
  /// Answer each arrived batch with a "blocks_ack"
  /// (transport_probe_options::peer_acks). Default: false.
  bool ack_blocks = false;
  /// Exit when no probe connected for this long. Default: 60 s.
  std::chrono::milliseconds idle_timeout{60000};
};

/// A region of `bytes` on `t`, filled with `fill`: from t.allocate_region
/// if `allocated`, else `heap` (resized; it must outlive `t`) registered.
[[nodiscard]] caf::expected<transport::allocated_region>
bench_region(transport::transport& t, bool allocated, uint64_t bytes, std::byte fill,
             std::vector<std::byte>& heap);

/// Runs the peer until the probe disconnects; returns the exit code.
int run_transport_peer(const transport_peer_options& opts);

/// The peer's start-up line, parsed.
struct peer_announcement {
  std::string address;
  uint32_t region = 0;
  uint64_t region_bytes = 0;
  /// The peer's process id: not in the line, set by whoever started it
  /// (0: unknown).
  int pid = 0;
};

/// Parses `LISTENING <host:port> REGION <id> <bytes>`.
[[nodiscard]] caf::expected<peer_announcement> parse_peer_announcement(std::string_view line);

} // namespace tessera::bench
