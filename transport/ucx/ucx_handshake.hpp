#pragma once
/// @file
/// Internal to transport/ucx: the cluster handshake, as a state machine
/// over byte messages (no sockets, no UCX types), so that every branch is
/// unit-tested without a connection. ucx_front_door.hpp runs it over TCP.
///
/// Both sides hold the cluster secret K. Each message is a length-prefixed
/// frame (u32 body length, body; at most max_handshake_message_bytes).
/// MACs are HMAC-SHA256 (OpenSSL) under K over a label and the whole
/// transcript so far, so no message can be replayed into another
/// handshake, reflected to the other role, or cut out of its context:
///
///   client                                            server
///   M1: magic, version, nonce_c (32 random bytes),
///       client id                             ------>
///                                             <------ M2: nonce_s (32),
///                                                     HMAC(K, "server-proof" | M1 | nonce_s)
///   checks M2's MAC (the server knows K)
///   M3: session_c, worker address_c,
///       HMAC(K, "client-proof" | M1 | M2 | body) ---->
///                                                     checks M3's MAC (the
///                                                     client knows K)
///                                             <------ M4: server id, session_s,
///                                                     worker address_s,
///                                                     HMAC(K, "server-final" | M1..M3 | body)
///   checks M4's MAC: done                             done
///
/// Nothing about the server (its id, its UCX address) leaves it before the
/// client proved it knows K, and the client sends its UCX address only to
/// a server that proved it. `session` is the random number the other side
/// must put at the head of every UCX active message it sends to this one;
/// a message without a known session is dropped, so a UCX connection that
/// skipped this handshake can make no call and write no memory.
///
/// An empty secret still runs the same exchange (with an empty HMAC key):
/// that is the cluster's explicit --insecure mode, authenticating nothing.

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <caf/expected.hpp>

namespace tessera::transport::detail {

/// Largest handshake message body, bytes (a UCX worker address is a few
/// hundred bytes; ids are at most max_handshake_id_bytes).
inline constexpr size_t max_handshake_message_bytes = 16 << 10;
/// Longest node id a handshake carries, bytes.
inline constexpr size_t max_handshake_id_bytes = 1024;

/// Why a handshake was refused (the label of
/// tessera_wire_rejected_peers_total{reason}).
enum class handshake_failure : uint8_t {
  malformed,   // not a handshake message, wrong magic or version, bad lengths
  bad_proof,   // a MAC did not verify: wrong secret, replay, or tampering
  oversize,    // a declared length over the limits
  timeout,     // the peer did not finish in time
  closed,      // the peer closed the connection mid-handshake
  refused,     // the local side refused it (shutting down, too many pending)
};
inline constexpr size_t handshake_failure_count = 6;

/// "malformed", "bad_proof", ...
[[nodiscard]] const char* to_string(handshake_failure f);

/// What one side offers in a handshake.
struct handshake_offer {
  /// The node id (at most max_handshake_id_bytes).
  std::string id;
  /// The UCX worker address to create endpoints to.
  std::vector<std::byte> worker_address;
  /// Nonzero: the number the other side must head its messages with.
  uint64_t session = 0;
};

/// A handshake's outcome on one side: the other side, authenticated.
struct handshake_peer {
  std::string id;
  std::vector<std::byte> worker_address;
  uint64_t session = 0;
  /// Set by the front door (ucx_front_door.hpp), never by the handshake:
  /// the peer's shared-memory worker address, when it came through the
  /// same-host door and the kernel vouched for its host and uid
  /// (ucx_same_host.hpp). Empty otherwise.
  std::vector<std::byte> same_host_address;
};

/// One side of one handshake. Not thread-safe (one connection's state).
class handshake {
public:
  enum class role { client, server };

  /// `secret`: the cluster secret (empty: insecure mode). Nonces come from
  /// OpenSSL's RAND_bytes.
  handshake(role r, std::string secret, handshake_offer me);

  /// The client's first message (M1); empty for the server.
  [[nodiscard]] std::vector<std::byte> start();

  /// Takes the other side's next message body (framing already removed)
  /// and returns what to send back (possibly nothing). An error names the
  /// handshake_failure (as the error's text prefix "handshake <reason>:").
  [[nodiscard]] caf::expected<std::vector<std::byte>> on_message(std::span<const std::byte> body);

  /// The reason of the last error of on_message.
  [[nodiscard]] handshake_failure failure() const { return failure_; }

  /// True once the handshake completed on this side.
  [[nodiscard]] bool done() const { return step_ == step::done; }

  /// The authenticated peer (valid once done()).
  [[nodiscard]] const handshake_peer& peer() const { return peer_; }

  // The server's on_message(M3) returns M4; the caller registers peer()
  // (its session) before sending M4, so that the client's first UCX
  // message cannot arrive before its session is known.

private:
  enum class step { start, wait_m1, wait_m2, wait_m3, wait_m4, done, failed };
  caf::error fail(handshake_failure f, const std::string& why);

  role role_;
  std::string secret_;
  handshake_offer me_;
  handshake_peer peer_;
  step step_;
  handshake_failure failure_ = handshake_failure::malformed;
  std::array<std::byte, 32> nonce_{};
  /// Every message body so far, in order (the MACs' context).
  std::vector<std::byte> transcript_;
};

/// HMAC-SHA256 of `data` under `key` (exposed for tests).
[[nodiscard]] std::array<std::byte, 32> hmac_sha256(std::string_view key,
                                                    std::span<const std::byte> data);

/// Cryptographically random bytes (OpenSSL RAND_bytes); aborts if the
/// generator fails (there is no safe fallback).
void random_bytes(std::span<std::byte> out);

/// A random nonzero 64-bit number.
[[nodiscard]] uint64_t random_session();

} // namespace tessera::transport::detail
