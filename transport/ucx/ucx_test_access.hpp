#pragma once
/// @file
/// For tests only: what a test of the UCX backend's receive-side checks
/// needs and no caller may use (a sender that skips its own checks, so a
/// malformed block header reaches the peer over a real connection).
/// UCX-free.

#include "transport/transport.hpp"
#include "transport/ucx/ucx_transport.hpp"

namespace tessera::transport::detail {

struct ucx_test_access {
  /// transfer() of a non-empty `batch` over the rendezvous KV path
  /// (whatever `t`'s kv_path), without checking its destinations against
  /// the peer's regions: the peer gets the headers as given. Local source
  /// ranges are still checked (they are read): a bad one fails the batch
  /// with invalid_message and nothing is sent.
  static void transfer_unchecked(ucx_transport& t, peer_id to, transfer_batch batch,
                                 completion done);

  /// This transport's UCX worker address (what the handshake hands out).
  static std::vector<std::byte> worker_address(ucx_transport& t);

  /// Sends `data` to connected peer `to` as a control message (am id 3)
  /// for actor `actor`, with the right session but none of send()'s
  /// checks, by rendezvous when `rndv` (the length is declared first, the
  /// data moves only if the receiver takes it). `data` must stay valid
  /// until `done` ran.
  static void send_unchecked(ucx_transport& t, peer_id to, const std::string& actor,
                             std::span<const std::byte> data, bool rndv, completion done);

  /// Whether connected peer `p` of `t` takes the same-host put path (an
  /// endpoint on the shared-memory context and its keys).
  static bool same_host(ucx_transport& t, peer_id p);

  /// `t`'s shared-memory worker address (empty without the same-host
  /// path): what only a peer the kernel vouched for is handed.
  static std::vector<std::byte> same_host_worker_address(ucx_transport& t);

  /// Batches `t` sent by put over the same-host path.
  static uint64_t same_host_put_batches(ucx_transport& t);

  /// Batches `t` copied itself into a peer's segment mapped here (by
  /// either path), without a UCX put or flush.
  static uint64_t mapped_put_batches(ucx_transport& t);

  /// Rendezvous-path KV runs `t` received eager and copied into place
  /// (ucx_options::kv_eager_max_bytes of their sender).
  static uint64_t eager_runs_received(ucx_transport& t);

  /// Rendezvous-path batches `t` sent / received folded: the notice in
  /// run 0's header instead of an am_kv_batch of its own (ucx_kv_am.hpp).
  static uint64_t folded_batches_sent(ucx_transport& t);
  static uint64_t folded_batches_received(ucx_transport& t);
};

} // namespace tessera::transport::detail
