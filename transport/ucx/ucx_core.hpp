#pragma once
/// @file
/// Internal to transport/ucx: ucx_core, the state behind a ucx_transport.
/// This header includes ucp.h; nothing outside transport/ucx/ includes it.
///
/// Its implementation is split by concern:
///   ucx_core.cpp      lifecycle: UCX context and worker, the progress
///                     thread, the command queue and its wake-ups, shutdown
///   ucx_connect.cpp   the front door (ucx_front_door.hpp: authenticated
///                     TCP handshake, worker addresses, sessions),
///                     endpoints by worker address, HELLO / HELLO_ACK,
///                     BYE, failure of a peer, grants
///   ucx_messages.cpp  operation bookkeeping, sending active messages, the
///                     receive-side dispatch and control-message delivery
///   ucx_transfer.cpp  registered regions and rkeys, the checks of a
///                     batch, put + flush + "blocks arrived" (or, where
///                     the peer's segment is mapped here, memcpy +
///                     "blocks arrived")
///   ucx_transfer_rndv.cpp  the rendezvous KV path (ucx_kv_am.hpp has
///                     its protocol): runs as rendezvous active messages
///                     received into the destination region, the ack
///   ucx_same_host_rma.cpp  the same-host path: a second UCX context with
///                     RMA and shared-memory transports only, its
///                     endpoints to peers the kernel vouched for
///                     (ucx_same_host.hpp), their keys, and puts over it
///
/// With grants_only, the cluster context has no RMA and no key leaves this
/// process, except: a peer that came through the same-host door (same
/// uid, same host, by SO_PEERCRED; and the cluster secret) gets an
/// endpoint on the shared-memory context and that context's keys to our
/// regions, sent over that endpoint only (am_local_regions), and puts its
/// KV blocks there; its control messages and batch notices stay on the
/// cluster endpoint, and a notice outside its grants still gets it
/// refused.
///
/// A peer's states (progress thread only):
///
///   connect(): handshake done,        front door: handshake done, ep
///   ep created, HELLO sent            created to the client (accepted)
///        |                                       |
///        v                                       v
///   connecting --HELLO_ACK--> connected <--HELLO-- connecting
///        |                        |                    |
///        | ep error, timeout      | ep error, BYE,     | ep error
///        v                        v disconnect, close  v
///      failed <-------------------+--------------------+
///
/// Every active message starts with the receiver's session number for its
/// sender (drawn by the receiver in the handshake): on_am finds the peer
/// by it, and drops (counts) a message whose session it does not know, so
/// a UCX connection that bypassed the front door reaches nothing.
///
/// `failed` is final: the endpoint is closed, the peer's rkeys destroyed,
/// its outstanding completions failed, and on_peer_failed reported if it
/// had been connected.
///
/// Dead-peer detection (with ucx_options::peer_error_handling; what bounds
/// it is documented in ucx_transport.hpp): UCX's endpoint error callback
/// (on_ep_error), TCP keepalive configured from peer_timeout (init_ucx),
/// and check_stalled_peers: a connected peer with an operation outstanding
/// that made no progress (no operation to it completed, nothing arrived
/// from it) for peer_timeout is failed.

#include <ucp/api/ucp.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <array>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <netinet/in.h>

#include "common/log_limiter.hpp"
#include "transport/transport.hpp"
#include "transport/ucx/ucx_front_door.hpp"
#include "transport/ucx/ucx_kv_am.hpp"
#include "transport/ucx/ucx_support.hpp"
#include "transport/ucx/ucx_transport.hpp"

namespace tessera::transport::detail {

/// Active-message ids of the backend's protocol.
enum am_id : unsigned {
  am_hello = 1,     // client -> listener: the client's regions
  am_hello_ack = 2, // listener -> client: the listener's regions
  am_message = 3,   // a control message; header: actor name
  am_region = 4,    // one region registered after connecting
  am_batch = 5,     // "blocks arrived": a transfer's flush completed
  am_bye = 6,       // the sender closes the connection
  am_kv_batch = 7,  // rendezvous KV path: a batch's notice, unless folded (ucx_kv_am.hpp)
  am_kv_block = 8,  // rendezvous KV path: one run of blocks (rendezvous or eager;
                    // run 0 of a folded batch carries the notice in its header)
  am_kv_ack = 9,    // rendezvous KV path: the batch was rejected (or landed)
  /// Same-host path: regions with keys of the shared-memory context;
  /// handled on the shared-memory worker only (ucx_same_host_rma.cpp).
  am_local_regions = 10,
  am_kv_acks = 11, // rendezvous KV path: batches that landed (ucx_kv_am.hpp)
};

/// Longest actor name a message may carry, bytes.
inline constexpr size_t max_actor_bytes = 64;
/// Bytes of the session number at the head of every active message header.
inline constexpr size_t session_bytes = 8;
/// Regions one peer may announce, and rendezvous KV batches one peer may
/// have in flight to us; past them the peer is refused (not_granted).
inline constexpr size_t max_peer_regions = 1024;
inline constexpr size_t max_peer_kv_batches = 4096;

/// Why a peer or a message was refused (tessera_wire_rejected_peers_total):
/// the handshake's failures, then what the UCX side refuses.
enum class rejection : uint8_t {
  malformed, bad_proof, oversize, timeout, closed, refused, // handshake_failure's
  no_session,  // an active message without a session we drew
  too_large,   // a declared length over the limits
  not_granted, // a KV run outside the sender's grants, or too many batches/regions
};
inline constexpr size_t rejection_count = 9;
[[nodiscard]] const char* to_string(rejection r);

/// The one place a ucs_status_t becomes a caf::error.
[[nodiscard]] caf::error ucx_error(transport_errc code, const std::string& what, ucs_status_t st);

/// transport_errc::closed: the transport is shutting down.
[[nodiscard]] caf::error closed_error();

/// The state behind a ucx_transport. The public methods are
/// ucx_transport's (see there); everything under "progress-thread state"
/// is touched by the progress thread only.
class ucx_core {
public:
  using clock = std::chrono::steady_clock;

  ucx_core(transport_options opts, ucx_options ucx);

  /// Stops the progress thread (shutdown()) and destroys worker and context.
  ~ucx_core();

  /// Initialises UCX and starts the progress thread; on failure nothing is
  /// left to clean up.
  [[nodiscard]] caf::error start();

  const capabilities& caps() const { return caps_; }
  /// The resolved ucx_options::kv_path (set by start()).
  ucx_kv_path kv_path() const { return kv_path_; }
  /// am_kv_block messages this transport dropped (see ucx_transport).
  uint64_t rejected_block_messages() const { return rejected_blocks_.load(); }
  void set_handler(transport_handler* h) { handler_.store(h); }
  [[nodiscard]] caf::expected<grant_id> grant(peer_id peer, std::vector<memory_range> ranges);
  void revoke(grant_id id);
  [[nodiscard]] std::string peer_identity(peer_id peer) const;
  [[nodiscard]] std::vector<std::pair<std::string, uint64_t>> rejections() const;

  [[nodiscard]] caf::expected<std::string> listen(const std::string& address);
  [[nodiscard]] caf::expected<peer_id> connect(const std::string& address);
  void disconnect(peer_id peer);
  [[nodiscard]] caf::expected<region_id> register_region(std::span<std::byte> memory);
  [[nodiscard]] caf::expected<allocated_region> allocate_region(uint64_t bytes);
  /// On the progress thread (may_run_inline) the message starts at once,
  /// and `done` may run before send returns.
  void send(peer_id to, message msg, completion done);
  void transfer(peer_id to, transfer_batch batch, completion done);
  /// transfer() over the rendezvous path without the sender's checks of
  /// the batch against either side's regions: for tests of the receiver's
  /// checks (ucx_test_access.hpp) only.
  void transfer_unchecked(peer_id to, transfer_batch batch, completion done);
  /// For tests (ucx_test_access.hpp): this worker's address, and a
  /// control message sent without send()'s checks.
  const std::vector<std::byte>& worker_address() const { return worker_address_; }
  /// For tests: whether `peer` takes the same-host put path (its keys
  /// came), and how many batches went that way.
  bool same_host(peer_id peer);
  uint64_t same_host_put_batches() const { return local_put_batches_.load(); }
  uint64_t mapped_put_batches() const { return mapped_put_batches_.load(); }
  /// For tests: rendezvous-path KV runs this transport received eager
  /// (ucx_options::kv_eager_max_bytes) and copied into place.
  uint64_t eager_runs_received() const { return eager_runs_received_.load(); }
  /// For tests: rendezvous-path batches sent / received folded (the
  /// notice in run 0's header, ucx_kv_am.hpp).
  uint64_t folded_batches_sent() const { return kv_folded_sent_.load(); }
  uint64_t folded_batches_received() const { return kv_folded_received_.load(); }
  const std::vector<std::byte>& same_host_worker_address() const { return local_address_; }
  void send_unchecked(peer_id to, const std::string& actor, std::span<const std::byte> data,
                      bool rndv, completion done);

private:
  enum class peer_state { connecting, connected, failed };

  struct local_region {
    region_id id = 0;
    std::span<std::byte> memory;
    ucp_mem_h memh = nullptr;
    std::vector<std::byte> rkey; // packed
    /// The same memory in the shared-memory context (which allocated it,
    /// for allocate_region), and its packed key; none without that context.
    ucp_mem_h local_memh = nullptr;
    std::vector<std::byte> local_rkey;
  };

  struct remote_region {
    uint64_t base = 0; // the peer's address of byte 0
    uint64_t size = 0; // bytes
    ucp_rkey_h rkey = nullptr;
    /// Same-host path: its key on our endpoint to its shared-memory worker.
    ucp_rkey_h local_rkey = nullptr;
    /// Byte 0 of the region in our own address space where its key
    /// (rkey / local_rkey) attached the peer's shared-memory segment
    /// (ucp_rkey_ptr; null where the key maps nothing here, e.g. cma or
    /// tcp): a put into it is then a memcpy by this process, complete
    /// when it returns (start_put_transfer).
    std::byte* mapped = nullptr;
    std::byte* local_mapped = nullptr;
  };

  /// An operation UCX has not finished yet (user_data of its requests).
  struct pending_op {
    ucx_core* self = nullptr;
    peer_id peer = 0;
    completion done;
    std::vector<std::byte> header, data; // kept alive for the send
    std::shared_ptr<transfer_batch> batch;
    int outstanding = 0;                 // requests not yet completed
    ucs_status_t status = UCS_OK;        // first failure
    bool finished = false;               // `done` ran (or was handed on)
    clock::time_point posted;            // when new_op created it
    /// Rendezvous KV path: the batch's sequence number; while in
    /// kv_waiting_, one of `outstanding` is the peer's ack.
    uint64_t kv_seq = 0;

    /// Takes the result of one of this op's UCX calls: a request UCX
    /// still holds counts in `outstanding`; a failure sets `status` and
    /// returns false.
    bool hold(ucs_status_ptr_t req) {
      if (UCS_PTR_IS_ERR(req)) {
        status = UCS_PTR_STATUS(req);
        return false;
      }
      if (req != nullptr)
        ++outstanding;
      return true;
    }
  };

  /// Rendezvous KV path, receiving side: a batch whose runs are landing.
  struct kv_incoming {
    transfer_batch batch;
    bool have_notice = false;
    uint32_t runs = 0;    // from the notice
    uint32_t landed = 0;  // runs whose data is in place
    uint32_t dropped = 0; // runs rejected or whose receive failed
    bool rejected = false; // a rejecting ack went back
  };

  /// A granted range: [offset, end) of a region, by its start.
  struct grant_piece {
    uint64_t end = 0;
    grant_id id = 0;
  };

  struct peer {
    peer_id id = 0;
    ucp_ep_h ep = nullptr;
    /// Same-host path: our endpoint to its shared-memory worker, and
    /// whether its keys (am_local_regions) are still to come; connect()
    /// returns once they came.
    ucp_ep_h local_ep = nullptr;
    bool local_keys_pending = false;
    peer_state state = peer_state::connecting;
    bool accepted = false; // from our front door
    std::string address;
    /// The node id it proved in the handshake.
    std::string identity;
    /// Heads what it sends us (we drew it) / what we send it (it drew it).
    uint64_t my_session = 0;
    uint64_t peer_session = 0;
    /// What it may write into (grants_only), by (region, offset).
    std::map<std::pair<region_id, uint64_t>, grant_piece> granted;
    std::map<region_id, remote_region> regions;
    caf::error why; // once failed
    std::shared_ptr<std::promise<caf::expected<peer_id>>> connect_promise;
    /// Last sign of life: an operation to it completed or something
    /// arrived from it (set when the endpoint is created).
    clock::time_point last_progress;
    /// Rendezvous KV batches from it not yet complete, by sequence number.
    std::map<uint64_t, kv_incoming> kv_in;
    /// Batches from it that landed and are not acknowledged yet
    /// (kv_flush_acks).
    std::vector<uint64_t> acks_due;
  };

  /// A control message received by rendezvous, while its data lands.
  struct rndv_recv {
    ucx_core* self;
    peer_id from;
    std::string actor;
    std::vector<std::byte> data;
  };

  // --- lifecycle (ucx_core.cpp) ---

  /// Queues `fn` for the progress thread; false once shutdown began.
  bool post(std::function<void()> fn);

  /// True on this core's progress thread (in a callback) when no command
  /// is queued or running: an operation may then start at once instead of
  /// through the queue (a round trip's two queue hand-offs were most of
  /// its time over shared memory) without passing one posted before it.
  bool may_run_inline() const;

  /// Runs `fn` on the progress thread and waits for its result.
  template <class T>
  caf::expected<T> call(std::function<caf::expected<T>()> fn) {
    auto prom = std::make_shared<std::promise<caf::expected<T>>>();
    auto fut = prom->get_future();
    if (!post([prom, fn] { prom->set_value(fn()); }))
      return closed_error();
    return fut.get();
  }

  [[nodiscard]] caf::error init_ucx();
  bool run_commands();
  void run();
  /// Arms the worker and sleeps in poll() unless a command or a UCX event
  /// is already waiting (see sleeping_).
  void sleep_until_woken();
  /// How long the idle progress thread may sleep in poll(), ms.
  int poll_timeout_ms() const;
  void reap_close_requests();
  void shutdown();

  // --- peers (ucx_connect.cpp) ---

  /// The connected peer `to`, or nullptr after failing `done` with
  /// not_connected / peer_failed.
  peer* usable_peer(peer_id to, const completion& done);
  peer* peer_of(ucp_ep_h ep);
  ucp_ep_params_t ep_params();
  /// Creates the peer record and its endpoint to `hp`'s worker address
  /// (progress thread); nullptr after answering `prom` (if any) with
  /// the failure.
  peer* add_peer(peer_id id, const handshake_peer& hp, uint64_t my_session,
                 const std::string& address, bool accepted);
  void start_connect(peer_id id, const handshake_peer& hp, uint64_t my_session,
                     const std::string& address,
                     std::shared_ptr<std::promise<caf::expected<peer_id>>> prom);
  /// The front door authenticated `hp` (progress thread): its endpoint
  /// is created and HELLO awaited. False: refused (shutting down).
  bool accept_peer(const handshake_peer& hp, uint64_t my_session, const std::string& from);
  /// Records `p`'s identity for peer_identity() once it is connected.
  void remember_identity(const peer& p);
  /// Counts a refusal (any thread) and logs it, rate-limited.
  void count_rejection(rejection why, const std::string& from, const std::string& what);
  /// Refuses connected peer `p`: counts, logs, and closes it.
  void refuse_peer(peer& p, rejection why, const std::string& what);
  /// Whether `p` was granted all of [offset, offset + size) of `region`.
  [[nodiscard]] bool is_granted(const peer& p, region_id region, uint64_t offset,
                                uint64_t size) const;
  static void on_ep_error(void* arg, ucp_ep_h ep, ucs_status_t status);

  /// Records a sign of life of `id` (see peer::last_progress).
  void note_progress(peer_id id);

  /// Every stall_check_interval() (peer_timeout / 8): fails each connected
  /// peer that has an unfinished operation and made no progress for
  /// peer_timeout since its oldest such operation was posted. Only with
  /// peer_error_handling: the forced close needs UCP_ERR_HANDLING_MODE_PEER.
  void check_stalled_peers();
  clock::duration stall_check_interval() const;

  /// Marks `id` failed (once): answers a pending connect, reports
  /// on_peer_failed (for connected peers), destroys its rkeys and closes the
  /// endpoint (forced, or flushing so a queued BYE still leaves).
  void fail_peer(peer_id id, const caf::error& why, bool force);

  void on_hello(peer& p, reader& rd);
  void on_hello_ack(peer& p, reader& rd);
  void on_bye(peer& p);

  // --- operations and messages (ucx_messages.cpp) ---

  pending_op* new_op(peer_id peer, completion done);
  /// Runs op's completion with `err` unless it ran already.
  void finish_op(pending_op* op, const caf::error& err);
  /// Frees `op` once UCX holds none of its requests.
  void release_op(pending_op* op);
  caf::error status_error(const pending_op* op, ucs_status_t st);
  static void on_send_done(void* request, ucs_status_t status, void* user_data);
  /// send() on the progress thread.
  void send_now(peer_id to, message msg, completion done);

  /// `header` headed by the session `p` drew for us (what on_am reads).
  static std::vector<std::byte> with_session(const peer& p, std::span<const std::byte> header);

  /// Sends an active message on `p` (on its shared-memory endpoint when
  /// `local`); `done` (may be empty) gets the result.
  void am_send(peer& p, unsigned id, std::vector<std::byte> header, std::vector<std::byte> data,
               completion done, bool local = false);

  /// UCX's receive callback for active message `Id` (arg: the core).
  template <unsigned Id>
  static ucs_status_t on_am_id(void* arg, const void* header, size_t header_length, void* data,
                               size_t length, const ucp_am_recv_param_t* param) {
    return static_cast<ucx_core*>(arg)->on_am(Id, header, header_length, data, length, param);
  }
  /// The same for the shared-memory worker's messages.
  static ucs_status_t on_local_am(void* arg, const void* header, size_t header_length, void* data,
                                  size_t length, const ucp_am_recv_param_t* param) {
    return static_cast<ucx_core*>(arg)->on_am(am_local_regions, header, header_length, data,
                                              length, param, true);
  }
  /// `local`: it arrived on the shared-memory worker.
  ucs_status_t on_am(unsigned id, const void* header, size_t header_length, void* data,
                     size_t length, const ucp_am_recv_param_t* param, bool local = false);
  void on_message_am(peer& p, const void* header, size_t header_length, void* data, size_t length,
                     bool rndv);
  static void on_rndv_done(void* request, ucs_status_t status, size_t, void* user_data);
  void deliver(peer_id from, std::string actor, std::vector<std::byte> frame);

  // --- regions and transfers (ucx_transfer.cpp) ---

  /// Packs `memh`'s rkey, records the region and announces it to every
  /// peer; unmaps `memh` on failure.
  caf::expected<region_id> add_region(ucp_mem_h memh, std::span<std::byte> memory,
                                      ucp_mem_h local_memh = nullptr);
  static void encode_region(writer& w, const local_region& r, std::span<const std::byte> key);
  void encode_regions(writer& w);
  bool decode_region(peer& p, reader& rd);
  void decode_regions(peer& p, reader& rd);
  void start_transfer(peer_id to, const std::shared_ptr<transfer_batch>& b, const completion& done,
                      bool checked);
  /// The first problem of batch `b` to `p` (unknown region, empty block,
  /// range outside a region; the peer's regions only with
  /// `destinations`), as invalid_message naming the block; none if it may
  /// be sent.
  caf::error check_batch(const peer& p, const transfer_batch& b, bool destinations);
  /// `local`: over the same-host endpoint with its keys.
  void start_put_transfer(peer& p, const std::shared_ptr<transfer_batch>& b,
                          const completion& done, bool local = false);
  /// Where `rkey` maps byte 0 of the peer's `size`-byte region at `base`
  /// into our address space (ucp_rkey_ptr), or null: also null unless its
  /// last byte maps `size - 1` bytes further on, so that a region announced
  /// larger than the segment behind its key is never copied into here
  /// (that would write past the mapping).
  static std::byte* mapping_of(ucp_rkey_h rkey, uint64_t base, uint64_t size);
  /// The "blocks arrived" message of `b` to `p` (am_batch, on the cluster
  /// endpoint); `done` gets its send's result.
  void send_batch_notice(peer& p, const transfer_batch& b, completion done);
  static void on_put_done(void* request, ucs_status_t status, void* user_data);
  static void on_flush_done(void* request, ucs_status_t status, void* user_data);
  void after_flush(pending_op* op);
  void on_batch(peer& p, reader& rd);

  // --- the same-host path (ucx_same_host_rma.cpp) ---

  /// Creates the shared-memory context and worker (RMA, "sm,self").
  [[nodiscard]] caf::error init_local_ucx();
  void destroy_local_ucx();
  /// Creates `p`'s endpoint to shared-memory worker `address`; false
  /// (logged) if UCX cannot.
  bool add_local_ep(peer& p, const std::vector<std::byte>& address);
  /// Sends `p` (over its shared-memory endpoint) the keys of `which`, or of
  /// every region when empty.
  void send_local_regions(peer& p, const std::vector<region_id>& which = {});
  void on_local_regions(peer& p, reader& rd);
  /// Maps `memory` in the shared-memory context (nullptr, logged, if it
  /// cannot: the region then takes the rendezvous path).
  ucp_mem_h map_local(std::span<std::byte> memory);
  /// Whether every block of `b` has `p`'s same-host key.
  bool same_host_keyed(const peer& p, const transfer_batch& b) const;

  // --- the rendezvous KV path (ucx_transfer_rndv.cpp) ---

  /// `runs`: kv_runs of the batch's blocks.
  void start_rndv_transfer(peer& p, const std::shared_ptr<transfer_batch>& b,
                           std::vector<kv_run> runs, const completion& done);
  static void on_kv_send_done(void* request, ucs_status_t status, void* user_data);
  /// Finishes and frees `op` once nothing of it is outstanding.
  void kv_maybe_done(pending_op* op);
  void on_kv_ack(peer& p, reader& rd);
  void on_kv_acks(peer& p, reader& rd);
  /// The sender's side of an ack: batch `seq` to `p` landed (ok) or not.
  void kv_acked(peer& p, uint64_t seq, bool ok, const std::string& why);
  /// Sends each peer in ack_due_peers_ one am_kv_acks for its acks_due
  /// (progress thread, after each ucp_worker_progress call).
  void kv_flush_acks();
  /// Drops the sender-side waits for `id`'s acks (the peer failed; its
  /// ops were finished already).
  void kv_forget_peer(peer_id id);
  void on_kv_batch(peer& p, reader& rd);
  /// Records batch notice `n` from `p` (an am_kv_batch, or folded into
  /// run 0's header); false when it was refused (too many batches: the
  /// peer is refused; a second notice: the batch is rejected).
  bool kv_take_notice(peer& p, kv_batch_notice&& n);
  void on_kv_block(peer& p, const void* header, size_t header_length, void* data, size_t length,
                   const ucp_am_recv_param_t* param);
  static void on_kv_recv_done(void* request, ucs_status_t status, size_t, void* user_data);
  void kv_landed(peer_id from, uint64_t seq);
  /// Counts and logs a dropped run of batch `seq` from `p` and, the first
  /// time for that batch, sends the rejecting ack.
  void kv_reject(peer& p, uint64_t seq, const std::string& why);
  /// Reports batch `seq` (on_blocks_arrived + ok ack) once its notice came
  /// and every run landed; forgets it once every run is accounted for.
  void kv_check_complete(peer& p, uint64_t seq);

  transport_options opts_;
  ucx_options ucx_;
  capabilities caps_;
  std::atomic<transport_handler*> handler_{nullptr};
  /// This worker's UCX address (immutable after init_ucx; any thread).
  std::vector<std::byte> worker_address_;
  /// Front doors (listen()); destroyed before the progress thread stops.
  std::mutex doors_mu_;
  std::vector<std::unique_ptr<front_door>> doors_;
  std::array<std::atomic<uint64_t>, rejection_count> rejections_{};
  /// Identities of connected peers, for peer_identity() (any thread).
  mutable std::mutex identities_mu_;
  std::unordered_map<peer_id, std::string> identities_;
  std::atomic<grant_id> next_grant_{1};
  /// Rate limits of the refusal and dropped-KV-run log lines (progress
  /// and front door threads): a flood of bad input is no flood of lines.
  log_limiter refusal_log_;
  log_limiter kv_reject_log_;
  std::atomic<peer_id> next_peer_{1};

  std::mutex mu_;
  std::vector<std::function<void()>> commands_; // guarded by mu_
  bool stopping_ = false;                       // guarded by mu_
  /// commands_ is not empty (written under mu_; read without it, so the
  /// idle loop need not take the lock).
  std::atomic<bool> has_commands_{false};
  /// The progress thread is about to sleep or sleeps in poll(): post()
  /// must write wake_fd_. Set before the thread's last look at
  /// has_commands_, which post() sets before reading this (both seq_cst),
  /// so one of the two sees the other and no command waits for a wake-up.
  std::atomic<bool> sleeping_{false};
  int wake_fd_ = -1;
  std::thread thread_;
  bool started_ = false;
  /// run_commands() is running queued commands (progress thread only).
  bool in_commands_ = false;

  // --- progress-thread state ---
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int worker_fd_ = -1;
  /// The same-host path's context and worker (null without it), its
  /// worker's address (immutable after start; any thread), and the
  /// batches put over it (tests).
  ucp_context_h local_context_ = nullptr;
  ucp_worker_h local_worker_ = nullptr;
  int local_fd_ = -1;
  std::vector<std::byte> local_address_;
  std::atomic<uint64_t> local_put_batches_{0};
  /// Put batches copied by this process into mapped segments (tests).
  std::atomic<uint64_t> mapped_put_batches_{0};
  std::map<peer_id, peer> peers_;
  std::unordered_map<uint64_t, peer_id> session_to_peer_;
  /// Live grants: the peer and the pieces' keys in its `granted`.
  std::unordered_map<grant_id, std::pair<peer_id, std::vector<std::pair<region_id, uint64_t>>>>
    grants_;
  std::unordered_map<ucp_ep_h, peer_id> ep_to_peer_;
  std::map<region_id, local_region> regions_;
  region_id next_region_ = 1;
  std::vector<pending_op*> ops_;
  ucx_kv_path kv_path_ = ucx_kv_path::put;
  // automatic resolved to am_rndv: each batch by rndv_pays.
  bool kv_path_by_batch_ = false;
  uint64_t next_kv_seq_ = 1;
  /// ucx_options::kv_eager_max_bytes (set by start()).
  uint64_t kv_eager_max_ = 0;
  std::atomic<uint64_t> eager_runs_received_{0};
  /// Longest notice folded into run 0's header: kv_folded_notice_max_bytes,
  /// less where the worker's max_am_header leaves less (set by init_ucx).
  size_t kv_fold_max_ = 0;
  std::atomic<uint64_t> kv_folded_sent_{0};
  std::atomic<uint64_t> kv_folded_received_{0};
  /// Peers whose acks_due is not empty.
  std::vector<peer_id> ack_due_peers_;
  /// Rendezvous batches sent and waiting for the peer's ack, by seq.
  std::unordered_map<uint64_t, pending_op*> kv_waiting_;
  std::atomic<uint64_t> rejected_blocks_{0};
  std::vector<void*> close_requests_;
  clock::time_point next_stall_check_;
  bool shutting_down_ = false;
  bool done_ = false;
};

} // namespace tessera::transport::detail
