#pragma once
/// @file
/// The loopback backend: an in-process "network" (loopback_fabric) and a
/// transport over it (loopback_transport) with the semantics of a real
/// backend — ordered control messages, bounds-checked block copies into the
/// peer's registered memory, peer-failure events — for unit tests and
/// single-process clusters.
///
/// Connection life cycle (one link, seen from either side):
///
///        connect(addr) / listener accepts
///                 |
///                 v
///   +-------- connected ---------+--------------------+
///   | disconnect(p), either side | peer destroyed      | peer kill()ed
///   | (both: closed)             | (other side: closed)| (other side:
///   v                            v                     v  peer_failed)
///                        failed (terminal)
///   on_peer_failed(p, why) exactly once on each side still running; the
///   link's id is never reused; send/transfer to it complete with
///   peer_failed; to an id never issued, with not_connected.
///
/// Threading: each loopback_transport owns one progress thread (an
/// event_loop). All its handler callbacks and completions run there, one at
/// a time. A message or batch is put on the receiver's queue by the
/// sender's calling thread; the sender's completion is queued on the
/// sender's thread afterwards. Messages from one sending thread to one peer
/// arrive in the order sent.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "transport/transport.hpp"

namespace tessera::transport {

namespace detail {
class loopback_core;
} // namespace detail

/// The in-process network: a table from address to listening transport.
/// Create with make(); share between the transports that should reach each
/// other. Thread-safe. Holds listeners weakly: a destroyed transport
/// unregisters itself.
class loopback_fabric : public std::enable_shared_from_this<loopback_fabric> {
public:
  /// A new, empty fabric.
  [[nodiscard]] static std::shared_ptr<loopback_fabric> make();

  /// Binds `address` ("host:port"; port 0 picks a fresh port, unique in
  /// this fabric) to `core`. Errors: invalid_message (not host:port),
  /// address_in_use.
  [[nodiscard]] caf::expected<std::string> bind(const std::string& address,
                                                std::shared_ptr<detail::loopback_core> core);

  /// The transport listening at `address`, or null.
  [[nodiscard]] std::shared_ptr<detail::loopback_core> find(const std::string& address) const;

  /// Removes every address bound to `core`.
  void unbind(const detail::loopback_core* core);

  /// A fresh name for a transport that connects without listening
  /// ("loopback-client:<n>").
  [[nodiscard]] std::string client_address();

private:
  loopback_fabric() = default;

  mutable std::mutex mu_;
  std::map<std::string, std::weak_ptr<detail::loopback_core>> listeners_; // guarded by mu_
  uint32_t next_port_ = 40000;                                             // guarded by mu_
};

/// A transport whose peers are other loopback_transports on the same
/// fabric. Thread-safe (every method may be called from any thread,
/// including from its own callbacks), except that the destructor must not
/// run on its own progress thread.
///
/// capabilities: backend "loopback", rma true (blocks are memcpy'd straight
/// into the peer's registered memory), device_memory false,
/// max_message_bytes from the options.
class loopback_transport final : public transport {
public:
  /// A transport on `fabric` (shared ownership). Starts its progress thread.
  explicit loopback_transport(std::shared_ptr<loopback_fabric> fabric,
                              transport_options options = {});

  /// Closes every link (peers see on_peer_failed(closed) once), runs every
  /// queued completion with `closed`, discards queued handler events and
  /// joins the progress thread: no callback runs after it returns.
  ~loopback_transport() override;

  loopback_transport(const loopback_transport&) = delete;
  loopback_transport& operator=(const loopback_transport&) = delete;

  [[nodiscard]] const capabilities& caps() const override;
  void set_handler(transport_handler* handler) override;
  [[nodiscard]] caf::expected<std::string> listen(const std::string& address) override;
  [[nodiscard]] caf::expected<peer_id> connect(const std::string& address) override;
  [[nodiscard]] caf::expected<region_id> register_region(std::span<std::byte> memory) override;
  /// Heap memory, registered; freed with the last reference to this
  /// transport's state (after every copy into it ended).
  [[nodiscard]] caf::expected<allocated_region> allocate_region(uint64_t bytes) override;

  /// Queues `msg` on the peer's progress thread. Errors (in `done`):
  /// not_connected (unknown id), peer_failed (link failed, peer gone),
  /// message_too_large (frame over max_message_bytes, or an actor name over
  /// 64 bytes), closed (this transport was killed).
  void send(peer_id to, message msg, completion done) override;

  /// Checks every block against the source and destination regions, then
  /// copies all of them (memmove) into the peer's memory and queues
  /// on_blocks_arrived there; then `done` runs here. A block out of range
  /// or naming an unknown region fails the whole batch with invalid_message
  /// naming the block index, region and range; nothing is copied. Other
  /// errors as send.
  void transfer(peer_id to, transfer_batch batch, completion done) override;

  /// The identity (transport_options::identity) the peer's transport was
  /// made with; empty if it has none or is unknown.
  [[nodiscard]] std::string peer_identity(peer_id peer) const override;
  void disconnect(peer_id peer) override;

  /// Test hook: simulates a crash of this process. Every peer sees
  /// on_peer_failed(peer_failed) once; this transport stops at once — its
  /// queued events and completions are discarded, its listen addresses are
  /// released (a new transport may bind them), and later operations
  /// complete inline with `closed`. Idempotent; safe from any thread.
  void kill();

private:
  std::shared_ptr<detail::loopback_core> core_;
};

} // namespace tessera::transport
