#pragma once
/// @file
/// The bridge: one actor per process that carries actor messages to and
/// from other processes over a transport (transport/transport.hpp).
///
/// Local actors are published under a name; other nodes reach them through
/// a remote proxy (remote_actor.hpp) that has the same typed interface, so
/// a caller does not know whether its peer is local. A call becomes a wire
/// envelope (transport/wire) addressed to the actor's name:
///
///   caller --request--> proxy --delegate--> bridge A --envelope(request, id)--> bridge B
///                                                                                 | request
///   caller <--reply-- bridge A <--envelope(response | failure, id)-- bridge B <--reply-- actor
///
/// Connecting: connect(node, address) opens a transport connection and
/// exchanges a hello (each side's node id) so both bridges know the other
/// by name. A peer is refused (counted in
/// tessera_wire_rejected_peers_total{reason} and disconnected) when its
/// hello names another node than the one it proved in the transport's
/// handshake (reason "impersonation"), names a node that is connected
/// already ("duplicate_node": a node is re-mapped only once its old
/// connection failed), or when it calls any actor before its hello
/// ("before_hello").
///
/// Memory by grant: when a local worker answers another node's KV
/// hand-off with a kv_grant, the bridge grants that node exactly the
/// granted blocks (transport::grant) before the answer leaves, and
/// revokes them when the hand-off's commit or cancel arrives, the node
/// fails, or 2 x call_timeout passed. A call to a node that is not connected, or whose peer fails
/// before the reply, fails with a transport error naming the node; a call
/// the remote side does not answer within bridge_config::call_timeout fails
/// with transport_errc::timeout. Nothing fails silently.

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/actor_types.hpp"
#include "actors/bridge/bridge_protocol.hpp"
#include "cluster/metrics.hpp"
#include "transport/transport.hpp"
#include "transport/wire/limits.hpp"

namespace tessera::actors {

/// The bridge's typed interface.
using bridge_actor = caf::typed_actor<
  /// Connects to the bridge of node `node` listening at `address` ("host:port");
  /// replies once both sides know each other. Errors: the transport's
  /// (peer_unreachable, timeout), or invalid_message when the peer calls
  /// itself by another name.
  caf::replies_to<connect_atom, std::string, std::string>::with<void>,
  /// Makes `actor` reachable from other nodes as `name`, replacing an
  /// earlier actor of that name.
  caf::reacts_to<publish_atom, std::string, caf::actor>,
  /// Sends `msg` to actor `name` on node `node`; if this was a request,
  /// replies with the remote actor's reply. Remote proxies send this. For
  /// this node's own actors the message is delivered as it is (same checks,
  /// no encoding), so callers need not know where an actor lives.
  caf::replies_to<forward_atom, std::string, std::string, caf::message>::with<caf::message>,
  /// Copies KV blocks to node `node`'s registered regions; replies when
  /// every block has landed there. To this node's own regions (registered
  /// through bridge::register_region) it is a bounds-checked copy.
  caf::replies_to<transfer_atom, std::string, transport::transfer_batch>::with<void>,
  /// Closes the connection to node `node` (membership says it left the
  /// cluster): watchers get node_down before the reply, its calls fail.
  /// Replies whether it was connected.
  caf::replies_to<disconnect_atom, std::string>::with<bool>,
  /// The names of the connected nodes, sorted.
  caf::replies_to<peers_atom>::with<std::vector<std::string>>,
  /// `watcher` gets (node_down_atom, node id) whenever a connected node
  /// fails or disconnects (the router stops routing there, the frontend
  /// fails the requests that were on it).
  caf::reacts_to<watch_atom, caf::actor>,
  // -- from the transport's progress thread (bridge_link) -------------------
  /// A frame from `peer` for local actor `name`.
  caf::reacts_to<inbound_atom, transport::peer_id, std::string, std::vector<std::byte>>,
  caf::reacts_to<peer_up_atom, transport::peer_id, std::string>,
  caf::reacts_to<peer_down_atom, transport::peer_id, caf::error>,
  caf::reacts_to<arrived_atom, transport::peer_id, uint64_t>,
  // -- internal --------------------------------------------------------------
  /// Operation `id` (a send or transfer) completed, with an error or none.
  caf::reacts_to<completed_atom, uint64_t, caf::error>,
  /// A transport connect attempt for `id` finished.
  caf::reacts_to<connected_atom, uint64_t, transport::peer_id, caf::error>,
  /// Grant `id` is due: revoke it if the hand-off has not ended.
  caf::reacts_to<revoke_atom, uint64_t>,
  /// Once a second: exports the refusal counters.
  caf::reacts_to<step_atom>,
  /// Call `id` is due: fail it with a timeout if it is still waiting.
  caf::reacts_to<expire_atom, uint64_t>>;

/// How a bridge is set up.
struct bridge_config {
  /// This node's name, as other nodes address it. Required.
  std::string node_id;
  /// Operations other nodes may call on published actors. Required.
  std::shared_ptr<const bridge_protocol> protocol;
  /// How long a call waits for its reply (on both sides). Default: 30 s.
  std::chrono::milliseconds call_timeout{30000};
  /// Bounds on the frames it decodes. Default: wire_limits{}.
  transport::wire::wire_limits limits;
  /// Where tessera_wire_rejected_peers_total{reason} is exported (the
  /// transport's refusals and the bridge's own), once a second; null:
  /// nowhere. Default: null.
  std::shared_ptr<cluster::metrics_registry> metrics;
};

namespace detail {
class region_table;
} // namespace detail

/// A running bridge: the actor, the transport it owns and the relay that
/// feeds it the transport's events.
class bridge {
public:
  /// Takes `tr` (before its listen / connect: the bridge becomes its
  /// handler) and spawns the bridge actor.
  bridge(caf::actor_system& sys, std::unique_ptr<transport::transport> tr, bridge_config cfg);
  /// Stops the actor and waits until it is gone (so nothing uses the
  /// transport any more), then destroys the transport (no callback runs
  /// after that), then the relay. Blocks; do not run it inside an actor.
  ~bridge();
  bridge(const bridge&) = delete;
  bridge& operator=(const bridge&) = delete;

  [[nodiscard]] const bridge_actor& actor() const { return actor_; }
  /// The transport, e.g. to listen.
  [[nodiscard]] transport::transport& transport() { return *transport_; }

  /// Registers `memory` with the transport (for other nodes' puts) and
  /// with the bridge (for transfers between this node's own regions, which
  /// are plain copies). The memory must outlive the bridge.
  [[nodiscard]] caf::expected<transport::region_id> register_region(std::span<std::byte> memory);

private:
  class relay;
  caf::actor_system& sys_;
  std::shared_ptr<detail::region_table> regions_;
  std::unique_ptr<relay> relay_;
  std::unique_ptr<transport::transport> transport_;
  bridge_actor actor_;
};

} // namespace tessera::actors
