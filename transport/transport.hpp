#pragma once
/// @file
/// The transport interface: how Tessera processes exchange control
/// messages and move KV-cache blocks. Backends are their own targets
/// (loopback/ in-process, faults/ a decorator, ucx/ later); actors see only
/// this header.
///
/// Threading: each transport runs its own progress context. Handler
/// callbacks and completions run there, one at a time, and must not block.
/// Every method may be called from any thread.
///
/// A connection:
///
///   connect(addr) ----------------> listener: on_peer_connected(p)
///        |  regions announced both ways (ids, sizes; rkeys for RMA)
///        v
///   connected --send/transfer--> ... --peer dies / disconnect--> failed:
///                                      on_peer_failed(p, why) once; every
///                                      pending completion gets `why`

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "transport/transport_errc.hpp"

namespace tessera::transport {

/// A peer as one transport instance knows it (never reused).
using peer_id = uint64_t;

/// A memory region registered with a transport, local or announced by a peer.
using region_id = uint32_t;

/// Memory a transport allocated and registered (transport::allocate_region).
struct allocated_region {
  region_id id = 0;
  std::span<std::byte> memory;
};

/// What a backend can do.
struct capabilities {
  /// "loopback", "ucx", "faults(loopback)", ...
  std::string backend;
  /// Blocks land directly in the peer's registered memory (one-sided RMA).
  bool rma = false;
  /// Regions may be GPU memory.
  bool device_memory = false;
  /// Largest control message frame, bytes.
  size_t max_message_bytes = 0;
};

/// A control message: an encoded frame (transport/wire) for a named actor
/// on the peer.
struct message {
  /// Destination actor's name on the peer (at most 64 bytes).
  std::string actor;
  std::vector<std::byte> frame;
};

/// One block of a KV transfer: local bytes [src_offset, src_offset + size)
/// of region src go to [dst_offset, dst_offset + size) of the peer's region dst.
struct block_copy {
  region_id src = 0;
  uint64_t src_offset = 0;
  region_id dst = 0;
  uint64_t dst_offset = 0;
  uint64_t size = 0;
};

/// Blocks that complete together.
struct transfer_batch {
  /// Caller-chosen, echoed to the receiver.
  uint64_t batch_id = 0;
  std::vector<block_copy> blocks;
};

/// Bytes [offset, offset + size) of local region `region`.
struct memory_range {
  region_id region = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
};

/// A grant of local memory to one peer (transport::grant), never reused.
using grant_id = uint64_t;

/// Called when a send or transfer finished: no error, or why it failed.
using completion = std::function<void(const caf::error&)>;

/// Receives a transport's events (on its progress context; must not block).
class transport_handler {
public:
  virtual ~transport_handler() = default;
  /// A peer connected to our listener.
  virtual void on_peer_connected(peer_id peer, const std::string& address) = 0;
  /// A control message from `from`. Messages from one peer arrive in order.
  virtual void on_message(peer_id from, message msg) = 0;
  /// A batch `from` transferred has fully landed in our regions.
  virtual void on_blocks_arrived(peer_id from, const transfer_batch& batch) = 0;
  /// `peer` failed or disconnected; it gets no more events.
  virtual void on_peer_failed(peer_id peer, const caf::error& why) = 0;
};

/// Settings common to every backend.
struct transport_options {
  /// A peer that does not answer for this long is declared failed.
  /// Default: 5000.
  std::chrono::milliseconds peer_timeout{5000};
  /// Largest control message frame. Default: 64 MiB.
  size_t max_message_bytes = size_t{64} << 20;
  /// The cluster secret: a peer joins only after proving it knows it
  /// (backends that cross processes: a mutual challenge-response before
  /// anything else, ucx_handshake.hpp). Empty: no authentication (the
  /// cluster's explicit --insecure mode). Default: empty.
  std::string cluster_secret;
  /// This process's node id, carried (authenticated) in the handshake and
  /// reported by peer_identity() on the other side. Default: empty.
  std::string identity;
  /// Peers may write only into memory granted to them (grant()): no key
  /// to a whole region leaves this process, and a KV block outside every
  /// grant of its sender is refused and counted. Default: false.
  bool grants_only = false;
};

/// A transport. Thread-safe.
class transport {
public:
  virtual ~transport() = default;

  [[nodiscard]] virtual const capabilities& caps() const = 0;

  /// Sets the receiver of events; call before listen or connect.
  virtual void set_handler(transport_handler* handler) = 0;

  /// Starts accepting connections at `address` ("host:port"; port 0 picks
  /// one). Returns the address actually bound.
  [[nodiscard]] virtual caf::expected<std::string> listen(const std::string& address) = 0;

  /// Connects to a listener; fails with peer_unreachable or timeout.
  [[nodiscard]] virtual caf::expected<peer_id> connect(const std::string& address) = 0;

  /// Registers local memory so blocks can be sent from and received into it.
  /// The memory must outlive the transport. Regions are announced to every
  /// current and future peer.
  [[nodiscard]] virtual caf::expected<region_id> register_region(std::span<std::byte> memory) = 0;

  /// Allocates `bytes` of zeroed memory and registers it (announced as
  /// register_region's). The transport owns it: it stays valid until the
  /// transport is destroyed. A backend may place it where peers on the
  /// same host reach it without a kernel copy (ucx: a shared-memory
  /// segment its sm transports map, so that a put into it is a memcpy),
  /// which registered user memory cannot offer. Errors: invalid_message
  /// (0 bytes), closed, or the allocation's failure.
  [[nodiscard]] virtual caf::expected<allocated_region> allocate_region(uint64_t bytes) = 0;

  /// Sends `msg` to `to`; `done` runs when it left (or failed: not_connected,
  /// peer_failed, message_too_large).
  virtual void send(peer_id to, message msg, completion done) = 0;

  /// Copies `batch` into `to`'s regions; `done` runs when every block has
  /// landed (the peer then sees on_blocks_arrived), or with the error.
  /// Batches in flight together may land, and complete, in any order.
  virtual void transfer(peer_id to, transfer_batch batch, completion done) = 0;

  /// Closes the connection to `peer` (both sides see on_peer_failed with
  /// transport_errc::closed).
  virtual void disconnect(peer_id peer) = 0;

  /// Lets `peer` transfer blocks into `ranges` (of regions registered or
  /// allocated here) until revoke(); with transport_options::grants_only
  /// a block from `peer` outside all of its grants is refused. Grants of
  /// a peer end when it fails. The default (backends that enforce no
  /// grants: loopback, in one process) only hands out ids.
  [[nodiscard]] virtual caf::expected<grant_id> grant(peer_id peer,
                                                      std::vector<memory_range> ranges);

  /// Ends grant `id` (unknown ids are ignored). Blocks already landing
  /// under it still land; later ones are refused.
  virtual void revoke(grant_id id);

  /// The node id `peer` proved in the handshake; empty where the backend
  /// authenticates nothing or the peer is unknown. Thread-safe.
  [[nodiscard]] virtual std::string peer_identity(peer_id peer) const;

  /// Peers and messages refused so far, by reason ("bad_proof",
  /// "no_session", "not_granted", ...): the counter
  /// tessera_wire_rejected_peers_total{reason}. Thread-safe.
  [[nodiscard]] virtual std::vector<std::pair<std::string, uint64_t>> rejections() const;

private:
  std::atomic<grant_id> next_grant_{1};
};

} // namespace tessera::transport
