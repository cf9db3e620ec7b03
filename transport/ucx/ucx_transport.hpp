#pragma once
/// @file
/// The UCX backend: control messages are UCP active messages (forced eager,
/// so they arrive in order). KV blocks take one of two paths
/// (ucx_options::kv_path, ucx_kv_path.hpp): one-sided ucp_put_nbx into the
/// peer's registered memory, followed by an endpoint flush and a "blocks
/// arrived" active message, where UCX has real RMA (shared memory's cma);
/// or rendezvous active messages received straight into the peer's
/// region, acknowledged per batch, where it has not (tcp).
///
/// Threading: one progress thread owns the ucp_context, ucp_worker,
/// listener and endpoints and is the only thread that calls UCX. Public
/// methods post commands to it (a mutex-protected queue; an eventfd
/// wake-up only while the thread may be asleep). When idle it first keeps
/// polling UCX for ucx_options::progress_spin, then sleeps in poll() on
/// the worker's event fd (after ucp_worker_arm) and the eventfd, with a
/// 50 ms cap. Handler callbacks and
/// completions run on that thread, one at a time. connect, listen and
/// register_region block their caller until the progress thread answered,
/// so they must not be called from this transport's own callbacks.
///
/// Connection set-up: listen() opens a front door (ucx_front_door.hpp), a
/// TCP listener on the configured address and nothing else; UCX never
/// listens on a sockaddr. connect() runs the cluster handshake with it
/// (mutual HMAC-SHA256 challenge-response over the cluster secret,
/// transport_options::cluster_secret): only then do both sides learn each
/// other's UCX worker address, node id and session number, and create
/// endpoints by address. The client sends HELLO (carrying its regions);
/// the listener's side answers HELLO_ACK and reports on_peer_connected;
/// connect returns when HELLO_ACK arrived, or fails with unauthenticated
/// (the handshake failed), peer_unreachable, or timeout
/// (transport_options::peer_timeout passed, handshake included).
///
/// Every active message is headed by the session number its receiver drew
/// for the sender; one without a known session is dropped and counted
/// (rejections(): no_session). A control message declared over
/// max_message_bytes, a KV run outside the sender's grants (with
/// transport_options::grants_only), more than max_peer_regions regions or
/// max_peer_kv_batches batches in flight: the peer is refused (counted,
/// logged rate-limited by common/log_limiter.hpp, disconnected) before
/// anything is allocated. With grants_only no rkey is announced (caps().rma is false),
/// every KV block goes by rendezvous into granted ranges, and the UCX
/// context has no RMA at all (no UCP_FEATURE_RMA; tested by a put with a
/// self-packed key from an endpoint that bypassed the front door):
/// otherwise UCX carries out a put from anyone who reaches its tcp port,
/// with a key the sender packed itself, to any address in this process.
/// The one exception (ucx_options::same_host_rma): a peer the kernel shows
/// to run on this host as this uid, which came through the front door's
/// same-host socket, gets keys of a second, shared-memory-only context
/// with RMA, over that context only, and puts its blocks there
/// (ucx_same_host.hpp, ucx_core.hpp).
///
/// Failure: disconnect() and the destructor send BYE to the peer before
/// closing the endpoint, so the other side sees on_peer_failed(closed)
/// promptly. A peer that vanishes without BYE is detected only with
/// ucx_options::peer_error_handling; then on_peer_failed(peer_failed).
/// Either way exactly once per peer; the peer's outstanding completions get
/// the same error at once; later send/transfer to it fail with peer_failed
/// (never hang); to an id never issued, with not_connected.
///
/// What bounds the detection of a peer that vanished without BYE (T =
/// transport_options::peer_timeout; measured on Linux with T = 2 s):
///  - Its process died (crash, SIGKILL): its kernel closes the sockets and
///    UCX reports the endpoint error on our next progress: immediately
///    (~1-10 ms on loopback).
///  - We wait on it: an operation to it is outstanding (a send UCX could
///    not yet hand to the kernel; a transfer, which waits for its flush,
///    i.e. for the peer to acknowledge its puts, or on the rendezvous path
///    for the peer's batch ack) and nothing progressed (no
///    operation to it completed, nothing arrived from it) for T: failed by
///    this backend's stall check, which runs every T/8, so within 9/8 T of
///    the stall (2.24 s). This also fails a peer whose host or network
///    vanished, or whose process is stopped or wedged. (Progress is counted
///    per completed operation: one block that takes longer than T to
///    transmit would count as a stall.)
///  - The connection is idle (no data unacknowledged) when its host or
///    network vanishes: TCP keepalive, configured per context from T:
///    UCX_TCP_KEEPIDLE = T/2, then KEEPCNT probes one second apart, in
///    whole seconds, at least 2 s in all (2.05 s). (Over tcp, UCX 1.13's
///    own keepalive only sets these socket options; for lanes without that,
///    e.g. InfiniBand, UCX_KEEPALIVE_INTERVAL is set to T/2 too, and RC's
///    own timeouts add to it.)
///  Not bounded by T: a silent vanishing right after small sends that the
///  kernel took (they completed; TCP keepalive does not probe while data is
///  unacknowledged, Linux retransmits for ~15 min (tcp_retries2) and UCX
///  1.13 sets no TCP_USER_TIMEOUT) until an operation to that peer stalls;
///  and a hung process whose kernel still answers while we wait on nothing.
///  Cluster heartbeats catch those and call disconnect().
///
/// Known limits of this slice:
///  - put path: the "blocks arrived" notification is a separate active
///    message sent after the puts' flush, so a control message sent after
///    transfer() returned may overtake it (not one sent after `done` ran).
///    The rendezvous path runs `done` only after the receiver's
///    on_blocks_arrived (its ack), so nothing sent after `done` overtakes
///    it there either.
///  - Messages are forced onto UCX's eager protocol (UCP_AM_SEND_FLAG_EAGER)
///    to keep them ordered; a rendezvous-received message (not expected)
///    is delivered when its data landed, possibly out of order.
///  - Host memory only (Debian's UCX has no CUDA support).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "transport/transport.hpp"
#include "transport/ucx/ucx_kv_path.hpp"

namespace tessera::transport {

/// UCX-specific settings.
struct ucx_options {
  /// Use UCP_ERR_HANDLING_MODE_PEER on every endpoint, so a peer that dies
  /// without saying BYE is reported (on_peer_failed(peer_failed); bounds in
  /// the file comment), and an unreachable address fails connect quickly.
  /// With UCX 1.13 this makes UCX use tcp lanes only (no shared memory),
  /// even on one host. Without it, connect to an unreachable address fails
  /// only by timeout, a crashed peer is not detected, and neither keepalive
  /// nor the stall check runs. Default: true.
  bool peer_error_handling = true;
  /// UCX transports this context may use, as UCX_TLS spells them (e.g.
  /// "tcp", "sm,self,tcp"); the sockaddr listener and client need tcp in
  /// the list. Empty: UCX_TLS from the environment, else UCX's default.
  /// Default: empty.
  std::string tls;
  /// How long the progress thread keeps polling UCX after its last piece
  /// of work (a command, a completion, an arrival) before it arms the
  /// worker and sleeps in poll(). A reply or the next send that comes
  /// within this time is seen without a wake-up, which costs tens of
  /// microseconds on a VM whose idle vCPUs halt; the price is up to this
  /// much busy CPU after each burst of traffic (none while idle). The
  /// spin yields the CPU between polls, and stops for 100 ms whenever a
  /// yield took over 50 us, i.e. other threads were waiting for the CPUs
  /// (an engine beside it): there a sleeping thread is woken sooner than a
  /// spinning one gets its turn. Zero: sleep as soon as there is nothing
  /// to do.
  /// Default: 50 us.
  std::chrono::microseconds progress_spin{50};
  /// UCX's tcp segment sizes (UCX_TCP_TX_SEG_SIZE / UCX_TCP_RX_SEG_SIZE),
  /// bytes: over tcp, UCX 1.13 carries puts as active messages of one
  /// segment each, so larger segments mean fewer send() calls per block.
  /// Applied to this context only, and only where the environment sets
  /// neither (if it sets one, both stay as the environment has them: tcp
  /// refuses a receive segment below the send segment). 0: UCX's default
  /// (8 KiB / 64 KiB).
  /// Default: 64 KiB / 256 KiB.
  size_t tcp_tx_seg_bytes = size_t{64} << 10;
  size_t tcp_rx_seg_bytes = size_t{256} << 10;
  /// How transfer() moves blocks (ucx_kv_path.hpp): put, am_rndv, or
  /// automatic (the environment's TESSERA_UCX_KV_PATH if set, else put
  /// only with error handling off and a shared-memory transport allowed,
  /// else am_rndv per batch whose runs average at least
  /// rndv_min_run_bytes and put for the others; resolve_kv_path,
  /// rndv_pays). Only the sender's setting matters: every transport
  /// receives both.
  /// Default: automatic.
  ucx_kv_path kv_path = ucx_kv_path::automatic;
  /// With kv_path automatic resolved to am_rndv: a batch whose contiguous
  /// runs average fewer bytes goes by put (one rendezvous handshake per
  /// run does not pay for small runs). Default: 256 KiB.
  uint64_t rndv_min_run_bytes = uint64_t{256} << 10;
  /// On the rendezvous KV path (am_rndv, every transfer with grants_only):
  /// a run of contiguous blocks of at most this many bytes goes eager
  /// (UCP_AM_SEND_FLAG_EAGER: UCX sends it in tcp segments with no
  /// handshake; the receiver checks it exactly as a rendezvous run, against
  /// its regions and the sender's grants, and copies it from UCX's receive
  /// buffer into place); larger runs go by rendezvous (a handshake per run,
  /// then the data straight into the receiver's region). Only the sender's
  /// setting matters. 0: every run by rendezvous. Measured over tcp on
  /// loopback with grants (bench/README.md, Transport): 64 KiB runs 1.8-2.6
  /// GB/s eager against 1.1-1.9 by rendezvous (batch p50 92-126 us against
  /// 130-185); 1 MiB runs no faster eager (2.6-3.5 against 2.4-3.9), so
  /// they keep the zero-copy receive. Default: 256 KiB.
  uint64_t kv_eager_max_bytes = uint64_t{256} << 10;
  /// With transport_options::grants_only: peers proven by the kernel to
  /// run on this host as this uid (SO_PEERCRED on the front door's
  /// same-host socket, ucx_same_host.hpp), which also proved the cluster
  /// secret, put KV blocks one-sided into our regions over a second UCX
  /// context with RMA and shared-memory transports only (they could
  /// ptrace us anyway); every other peer keeps the grant path. Only where
  /// put is the configured path: peer_error_handling off, a shared-memory
  /// transport allowed by `tls`, kv_path not am_rndv. Default: true.
  bool same_host_rma = true;
  /// An IPv4 address (or host name) of this host: UCX's network
  /// transports use only the interface holding it (UCX_NET_DEVICES, unless
  /// the environment sets that), so nothing of UCX listens on another
  /// interface. "0.0.0.0" or empty: every interface. An address no
  /// interface holds fails make() with invalid_message. Default: empty.
  std::string net_address;
};

namespace detail {
class ucx_core;
struct ucx_test_access;
} // namespace detail

/// A transport over UCX. Thread-safe, except that the destructor, connect,
/// listen, register_region and allocate_region must not run on its own
/// progress thread.
///
/// capabilities: backend "ucx", rma true, device_memory false,
/// max_message_bytes from the options.
class ucx_transport final : public transport {
public:
  /// Creates the UCX context and worker and starts the progress thread.
  /// Errors: transport_errc::unavailable naming the UCX call that failed;
  /// invalid_message for a TESSERA_UCX_KV_PATH that is not a path.
  [[nodiscard]] static caf::expected<std::unique_ptr<ucx_transport>>
  make(transport_options options = {}, ucx_options ucx = {});

  /// Sends BYE to and closes every endpoint (bounded by peer_timeout), runs
  /// every outstanding completion with `closed`, unmaps the regions and
  /// destroys listener, worker and context; no callback runs after it
  /// returns.
  ~ucx_transport() override;

  ucx_transport(const ucx_transport&) = delete;
  ucx_transport& operator=(const ucx_transport&) = delete;

  [[nodiscard]] const capabilities& caps() const override;
  void set_handler(transport_handler* handler) override;

  /// Listens at "host:port" (host: IPv4 address or name; port 0 picks one).
  /// Errors: invalid_message (bad address), address_in_use, closed.
  [[nodiscard]] caf::expected<std::string> listen(const std::string& address) override;

  /// Errors: invalid_message (bad address), peer_unreachable, timeout, closed.
  [[nodiscard]] caf::expected<peer_id> connect(const std::string& address) override;

  /// Maps `memory` with ucp_mem_map and announces it (with its packed rkey)
  /// to every current and future peer. Errors: invalid_message (empty),
  /// closed, or the UCX failure.
  [[nodiscard]] caf::expected<region_id> register_region(std::span<std::byte> memory) override;

  /// ucp_mem_map with UCP_MEM_MAP_ALLOCATE: UCX's first working allocation
  /// method (UCX_MEM_ALLOC_METHODS; by default a sysv, then posix,
  /// shared-memory segment), so that a same-host peer's sm transports put
  /// into it with a memcpy (perftest's buffers are allocated the same
  /// way). Unmapped when the transport is destroyed.
  [[nodiscard]] caf::expected<allocated_region> allocate_region(uint64_t bytes) override;

  /// `done` runs when UCX completed the send (the frame left). Errors:
  /// not_connected, peer_failed/closed, message_too_large (frame over
  /// max_message_bytes or actor name over 64 bytes). Called from this
  /// transport's own callbacks (its progress thread) with nothing queued
  /// before it, the send starts at once, and `done` may run before send
  /// returns (so may transfer's).
  void send(peer_id to, message msg, completion done) override;

  /// Checks every block against the local and the peer's regions (an
  /// invalid one fails the whole batch with invalid_message naming the
  /// block index, nothing is sent), then:
  ///  - put: puts every block, flushes the endpoint, then sends the
  ///    "blocks arrived" message; `done` runs when that left.
  ///  - am_rndv: sends the batch's notice and each run of contiguous
  ///    blocks as an active message, by rendezvous (eager up to
  ///    ucx_options::kv_eager_max_bytes); a notice of up to 1 KiB (31
  ///    blocks) rides in the first run's header instead of a message of
  ///    its own (ucx_kv_am.hpp); `done` runs when every run
  ///    was sent and the peer acknowledged the batch (after its
  ///    on_blocks_arrived), or at once with the first failure. The peer
  ///    checks each run against its own regions; a run it drops fails the
  ///    batch with invalid_message "peer rejected batch ...".
  /// Other errors as send (peer_failed within peer_timeout when the peer
  /// dies mid-batch).
  void transfer(peer_id to, transfer_batch batch, completion done) override;

  /// The KV path this transport's transfers take (kv_path resolved).
  [[nodiscard]] ucx_kv_path kv_path() const;

  /// The KV path transfers to connected `peer` take: put for a peer on the
  /// same-host path (ucx_options::same_host_rma), else kv_path() (blocks
  /// may still go by put per batch where that is automatic). Asks the
  /// progress thread: not from this transport's own callbacks.
  [[nodiscard]] ucx_kv_path kv_path_to(peer_id peer) const;

  /// Rendezvous block messages received and dropped because their header
  /// did not fit this transport's regions (unknown region, range out of
  /// bounds, malformed); each is also logged (spdlog error) and fails its
  /// batch at the sender. Thread-safe. Only a faulty or hostile sender
  /// causes any.
  [[nodiscard]] uint64_t rejected_block_messages() const;

  /// Sends BYE and closes the endpoint; both sides see on_peer_failed(closed).
  void disconnect(peer_id peer) override;

  /// Enforced with transport_options::grants_only (checked per rendezvous
  /// run on arrival). Errors: not_connected, invalid_message (a range
  /// outside its region), closed.
  [[nodiscard]] caf::expected<grant_id> grant(peer_id peer,
                                              std::vector<memory_range> ranges) override;
  void revoke(grant_id id) override;
  [[nodiscard]] std::string peer_identity(peer_id peer) const override;
  [[nodiscard]] std::vector<std::pair<std::string, uint64_t>> rejections() const override;

private:
  friend struct detail::ucx_test_access;
  explicit ucx_transport(std::unique_ptr<detail::ucx_core> core);
  std::unique_ptr<detail::ucx_core> core_;
};

} // namespace tessera::transport
