#pragma once
/// @file
/// Internal to transport/ucx: the node's front door. A plain TCP listener
/// on the configured address runs the cluster handshake
/// (ucx_handshake.hpp) with every connecting peer; only a peer that proved
/// it knows the cluster secret learns this node's UCX worker address and a
/// session number. UCX itself never listens on a sockaddr (UCX 1.13's
/// sockaddr listener aborts the process on 17 stray bytes, FACTS.md): the
/// endpoints are created from the worker addresses exchanged here.
///
/// With front_door_options::same_host_address, the door also listens on an
/// abstract unix socket named after its TCP address, for peers of this
/// uid on this host (SO_PEERCRED checked by both ends before the same
/// handshake; ucx_same_host.hpp); they get the shared-memory worker
/// address as well.
///
/// Threading: the listener runs one thread that polls the listening
/// socket and every handshake in progress (non-blocking, each bounded by
/// its deadline and by max_pending); a stray peer can hold at most one
/// pending slot until its deadline and never blocks another's handshake.
/// front_door_connect blocks its caller. No UCX types here.

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <thread>

#include <caf/expected.hpp>
#include <netinet/in.h>

#include "transport/ucx/ucx_handshake.hpp"

namespace tessera::transport::detail {

/// Settings of a front door.
struct front_door_options {
  /// The cluster secret (empty: insecure mode).
  std::string secret;
  /// This node's id and UCX worker address (the session is drawn per
  /// connection).
  std::string id;
  std::vector<std::byte> worker_address;
  /// Non-empty: this node's shared-memory UCX worker address, and the
  /// door also listens on the same-host socket of its TCP address
  /// (ucx_same_host.hpp). A peer there whose SO_PEERCRED shows another
  /// uid or host is refused before a byte is read; one that passes runs
  /// the same handshake, offering both addresses, and is handed to
  /// on_peer with handshake_peer::same_host_address set. If the name is
  /// taken, the door serves TCP only (logged). Default: empty.
  std::vector<std::byte> same_host_address;
  /// A handshake that does not finish within this is dropped. Default: 5 s.
  std::chrono::milliseconds handshake_timeout{5000};
  /// Handshakes in progress at once; a connection beyond them is closed
  /// at once (counted as refused). Default: 64.
  size_t max_pending = 64;
  /// Called (on the front door's thread) for each authenticated peer
  /// with the session this side drew for it and its TCP address ("from"),
  /// before the final message
  /// leaves; false refuses the peer (its connection is closed).
  std::function<bool(const handshake_peer& peer, uint64_t my_session, const std::string& from)>
    on_peer;
  /// Called for each refused handshake, with its reason and the peer's
  /// address (for counting and rate-limited logging).
  std::function<void(handshake_failure why, const std::string& from, const std::string& what)>
    on_reject;
};

/// A TCP listener running the server side of the handshake.
class front_door {
public:
  /// Binds `sa` (port 0 picks one) and starts the thread. Errors:
  /// address_in_use, peer_unreachable (other socket errors).
  [[nodiscard]] static caf::expected<std::unique_ptr<front_door>>
  listen(const sockaddr_in& sa, front_door_options options);

  /// Stops the thread and closes every socket.
  ~front_door();

  front_door(const front_door&) = delete;
  front_door& operator=(const front_door&) = delete;

  /// The port actually bound.
  [[nodiscard]] uint16_t port() const { return port_; }

  /// Whether the same-host socket is listening too.
  [[nodiscard]] bool same_host() const { return unix_fd_ >= 0; }

private:
  front_door(int fd, int unix_fd, uint16_t port, front_door_options options);
  void run();

  int fd_ = -1;
  int unix_fd_ = -1;
  int stop_fd_ = -1;
  uint16_t port_ = 0;
  front_door_options opts_;
  std::thread thread_;
};

/// Connects to a front door at `sa` and runs the client side of the
/// handshake, bounded by `timeout` in all. Errors: peer_unreachable (no
/// connection), timeout, unauthenticated (the handshake failed; `why`,
/// when given, gets its handshake_failure).
[[nodiscard]] caf::expected<handshake_peer>
front_door_connect(const sockaddr_in& sa, const std::string& secret, handshake_offer me,
                   std::chrono::milliseconds timeout, handshake_failure* why = nullptr);

/// Connects to the same-host socket of the front door at `sa`, checks
/// that the kernel's record of the listener (SO_PEERCRED) is a process of
/// this uid on this host, and runs the client side of the handshake
/// offering `me` with `local_address` beside its worker address. The
/// result has both of the server's addresses. Errors: peer_unreachable
/// (no such socket: another host, or a node without the door), timeout,
/// unauthenticated (the listener is not ours to trust, or the handshake
/// failed; `why` as above).
[[nodiscard]] caf::expected<handshake_peer>
front_door_connect_same_host(const sockaddr_in& sa, const std::string& secret, handshake_offer me,
                             std::span<const std::byte> local_address,
                             std::chrono::milliseconds timeout, handshake_failure* why = nullptr);

} // namespace tessera::transport::detail
