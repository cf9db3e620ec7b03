#pragma once
/// @file
/// The measuring side of `tessera bench transport`: connects a
/// ucx_transport to a transport_peer and measures control round trips,
/// one-way message rate and KV block batch bandwidth (protocol in
/// transport_peer.hpp).
///
/// What each figure times (steady_clock, in this process):
///  - round trip: "echo_raw"(n), a frame encoded beforehand, which the
///    peer sends back as it came ("pong_raw"), timed from just before the
///    send to its arrival in our on_message (bytes compared): the
///    transport's own latency, as ucx_perftest's tag_lat. Then the same
///    with the codec: from just before encoding "echo"(n) to the
///    "pong"(n) frame decoded here, the peer decoding and encoding too.
///    The next ping is sent from that callback (on the transport's
///    progress thread), as a reply from an actor would be.
///  - messages/s: M "sink" frames sent from the calling thread (at most
///    `stream_window` not yet completed), then "sink_end"; M over the time
///    from the first send to the "sink_ack" decoded here.
///  - block GB/s: `window` batches in flight; each batch is timed from
///    transfer() to its done (every block landed: on the grant path the
///    receiver's transport ack came back; on the put path the flush
///    completed), or with `peer_acks` to the peer's "blocks_ack" (sent from
///    its on_blocks_arrived: the "blocks arrived" notification, the peer's
///    handler and one more message back). The next batch is issued from
///    that callback; with more than one in flight, batches may complete in
///    any order. GB/s is bytes of the measured batches over the time from
///    the last warm-up completion to the last.

#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "bench/transport_peer.hpp"

namespace tessera::bench {

/// Iteration counts and shapes of one probe.
struct transport_probe_options {
  /// Round trips: warm-up, then measured. Defaults: 2000, 20000.
  int rtt_warmup = 2000;
  int rtt_iterations = 20000;
  /// One-way messages: warm-up, then measured. Defaults: 20000, 200000.
  int msgs_warmup = 20000;
  int msgs = 200000;
  /// Most sends not yet completed in the message-rate run. Default: 1024.
  int stream_window = 1024;
  /// Batch sizes, bytes. Default: 64 KiB, 1 MiB, 16 MiB.
  std::vector<uint64_t> batch_bytes = {uint64_t{64} << 10, uint64_t{1} << 20, uint64_t{16} << 20};
  /// Block size within a batch, bytes (a batch of S bytes is S / block
  /// blocks, placed back to back). Default: 64 KiB.
  uint64_t block_bytes = uint64_t{64} << 10;
  /// Place the blocks in the destination in reverse order, so that none
  /// continues the one before it in both regions (the rendezvous path
  /// merges those into one message). Default: false.
  bool scatter_blocks = false;
  /// Source and destination regions from transport::allocate_region (UCX
  /// shared-memory segments, as ucx_perftest's buffers) rather than heap
  /// memory registered with register_region. Default: true.
  bool allocated_regions = true;
  /// Both processes run with a cluster secret and
  /// transport_options::grants_only: the handshake authenticates, no rkey
  /// is exchanged, every block goes by rendezvous and is checked against
  /// the peer's grant (the whole region, granted when the probe
  /// connects). Default: false.
  bool grants = false;
  /// Also measure batches that are one block of the whole batch size.
  /// Default: true.
  bool one_block_batches = true;
  /// Bytes moved per (batch size, layout) measurement; the batch count is
  /// this over the batch size, clamped to [min_batches, max_batches].
  /// Defaults: 2 GiB, 50, 20000.
  uint64_t target_bytes = uint64_t{2} << 30;
  int min_batches = 50;
  int max_batches = 20000;
  /// Warm-up batches per measurement. Default: 10.
  int warmup_batches = 10;
  /// Batches in flight. Default: 4 (ucx_perftest's bandwidth tests keep
  /// their sends outstanding too; 1: each batch waits for the previous ack).
  int window = 4;
  /// Time each batch to the peer's "blocks_ack", a message its
  /// on_blocks_arrived sends (true), or to transfer()'s done (false): the
  /// transport's own word that every block landed (over the grant path,
  /// the receiver's transport ack), as a KV sender waits for it; the peer
  /// then sends nothing of its own. Default: false.
  bool peer_acks = false;
  /// ucx_options::progress_spin of both processes, microseconds; negative:
  /// the transport's default. Default: -1.
  int progress_spin_us = -1;
  /// After the measurements, how long both processes sit idle (connection
  /// open, nothing sent) while their CPU use is measured. Default: 1 s.
  std::chrono::milliseconds idle_window{1000};
  /// Bound on each measurement phase. Default: 120 s.
  std::chrono::milliseconds phase_timeout{120000};
};

/// One probe's figures.
struct transport_probe_result {
  /// Round trips of a control frame the peer sends back as it came: the
  /// transport's own latency (what ucx_perftest's tag_lat measures).
  double rtt_us_p50 = 0;
  double rtt_us_p99 = 0;
  /// Slowest measured round trip.
  double rtt_us_max = 0;
  /// Round trips where each end decodes the frame (full wire checks) and
  /// encodes a new one, as an actor's request and reply do.
  double rtt_codec_us_p50 = 0;
  double rtt_codec_us_p99 = 0;
  double msgs_per_s = 0;
  /// Batch bytes -> GB/s (10^9 B/s), batches of block_bytes blocks.
  std::map<uint64_t, double> block_gb_s;
  /// Batch bytes -> median, 99th percentile and slowest microseconds from
  /// transfer() to the ack (batches of block_bytes blocks).
  std::map<uint64_t, double> batch_us_p50;
  std::map<uint64_t, double> batch_us_p99;
  std::map<uint64_t, double> batch_us_max;
  /// Batch bytes -> GB/s with one block per batch (if measured).
  std::map<uint64_t, double> one_block_gb_s;
  /// Bytes of one encoded control frame.
  uint64_t control_frame_bytes = 0;
  /// The KV path the batches took ("put", "am_rndv": the selection's
  /// kv_path as the transport resolved it).
  std::string kv_path;
  /// CPU use (percent of one core) of this process and of the peer while
  /// idle with the connection open: ~0 when the progress threads sleep,
  /// ~100 each when they spin. NaN where not measured.
  double idle_cpu_pct_self = std::numeric_limits<double>::quiet_NaN();
  double idle_cpu_pct_peer = std::numeric_limits<double>::quiet_NaN();
};

/// Connects to the peer at `peer.address` with `sel`'s UCX settings and
/// runs every measurement; `progress` gets one line per finished step.
/// Errors: the transport's (connect, transfer) or a phase that timed out.
[[nodiscard]] caf::expected<transport_probe_result>
run_transport_probe(const transport_selection& sel, const peer_announcement& peer,
                    const transport_probe_options& opts,
                    const std::function<void(const std::string&)>& progress);

} // namespace tessera::bench
