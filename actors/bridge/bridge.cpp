#include "actors/bridge/bridge_actor.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <thread>
#include <unordered_map>

#include <spdlog/spdlog.h>

#include "actors/bridge/region_table.hpp"
#include "common/error.hpp"
#include "common/log_limiter.hpp"
#include "transport/transport_errc.hpp"
#include "transport/wire/codec.hpp"

namespace tessera::actors {

namespace {

using transport::make_transport_error;
using transport::peer_id;
using transport::transport_errc;

/// The name bridges address each other by (hello, responses).
constexpr const char* bridge_name = "bridge";
constexpr const char* hello_operation = "hello";

struct bridge_state {
  static inline const char* name = "bridge";

  bridge_config cfg;
  transport::transport* tr = nullptr;
  std::shared_ptr<detail::region_table> regions;
  wire::frame_decoder decoder;
  std::unordered_map<std::string, caf::actor> published;
  std::unordered_map<std::string, peer_id> node_peer;
  std::unordered_map<peer_id, std::string> peer_node;
  uint64_t next_id = 1;

  /// A request sent to another node, waiting for its response.
  struct pending_call {
    peer_id peer = 0;
    std::string target; // "actor on node", for error texts
    std::function<void(wire_reply)> done;
  };
  std::unordered_map<uint64_t, pending_call> calls;
  std::unordered_map<uint64_t, caf::response_promise> transfers;
  struct pending_connect {
    caf::response_promise rp;
    std::string node;
  };
  std::unordered_map<uint64_t, pending_connect> connects;
  std::vector<caf::actor> watchers;
  /// Live hand-off grants: the node and the request each is for.
  struct live_grant {
    peer_id peer = 0;
    uint64_t request_id = 0;
  };
  std::unordered_map<transport::grant_id, live_grant> grants;
  /// The bridge's own refusals, by reason, and what was exported so far
  /// (transport's and own, by reason).
  std::map<std::string, uint64_t> refusals;
  std::map<std::string, uint64_t> exported;
  /// One-way messages dropped, by reason ("not_connected": the target's
  /// node is not connected yet or any more; "other"), and what was exported.
  std::map<std::string, uint64_t> drops;
  std::map<std::string, uint64_t> drops_exported;
  /// Warnings another node (or a stray process) can cause at will, one
  /// rate-limited stream each: a flood of them is counted, not logged.
  log_limiter refusal_log;
  log_limiter bogus_reply_log;
  log_limiter failed_tell_log;
  log_limiter drop_log;
  /// Connect attempts in flight (transport::connect blocks), by id; each
  /// is joined when its result arrives (its last act is sending it).
  std::unordered_map<uint64_t, std::thread> connect_threads;

  ~bridge_state() {
    for (auto& [id, t] : connect_threads)
      t.join();
  }

  std::string node_of(peer_id p) const {
    auto it = peer_node.find(p);
    return it == peer_node.end() ? "peer " + std::to_string(p) : "node '" + it->second + "'";
  }
};

// The actor is dynamically typed inside (so it can make typed requests of
// any published interface through bridge_protocol's invokers) and handed
// out as a bridge_actor.
using bridge_pointer = caf::stateful_actor<bridge_state>*;

/// Encodes `env` and sends it to `peer` for actor `to`; a failed send is
/// reported to the bridge as completed(op, error) when op != 0, else logged.
void send_envelope(bridge_pointer self, peer_id peer, const std::string& to,
                   const wire::envelope& env, uint64_t op) {
  auto frame = wire::encode(wire::wire_message{env}, self->state.cfg.limits);
  auto handle = caf::actor_cast<bridge_actor>(self);
  if (!frame) {
    if (op != 0)
      self->send(handle, completed_atom_v, op, frame.error());
    else
      spdlog::warn("bridge {}: cannot encode a reply: {}", self->state.cfg.node_id,
                   error_text(frame.error()));
    return;
  }
  transport::message msg{to, std::move(*frame)};
  self->state.tr->send(peer, std::move(msg), [handle, op](const caf::error& err) {
    if (!err)
      return;
    if (op != 0)
      caf::anon_send(handle, completed_atom_v, op, err);
    else if (err == transport_errc::closed || err == transport_errc::peer_failed ||
             err == transport_errc::not_connected)
      // The node that asked stopped or failed meanwhile (a graceful stop of
      // the router's node while its workers answer a heartbeat): nobody
      // waits for this reply, and the node's leaving is logged where its
      // connection ends (on_peer_failed).
      spdlog::info("bridge: a reply was not delivered, its node is gone: {}", error_text(err));
    else
      spdlog::warn("bridge: a reply was not delivered: {}", error_text(err));
  });
}

/// Encodes `payload` as an inner frame (empty for none).
caf::expected<std::vector<std::byte>> encode_payload(bridge_pointer self,
                                                     const std::optional<wire::wire_message>& m) {
  if (!m)
    return std::vector<std::byte>{};
  return wire::encode(*m, self->state.cfg.limits);
}

/// Sends a request envelope to `peer`; `done` runs (in the actor) with the
/// reply, the peer's failure, or a timeout.
void start_call(bridge_pointer self, peer_id peer, const std::string& actor,
                const std::string& target, wire_call call, std::function<void(wire_reply)> done) {
  auto payload = encode_payload(self, call.arg);
  if (!payload) {
    done(payload.error());
    return;
  }
  auto& st = self->state;
  const uint64_t id = st.next_id++;
  st.calls.emplace(id, bridge_state::pending_call{peer, target, std::move(done)});
  wire::envelope env{wire::envelope_kind::request, id, std::move(call.operation), std::move(*payload)};
  send_envelope(self, peer, actor, env, id);
  self->delayed_send(self, st.cfg.call_timeout, expire_atom_v, id);
}

/// Finishes call `id` (if still pending) with `r`.
void finish_call(bridge_pointer self, uint64_t id, wire_reply r) {
  auto it = self->state.calls.find(id);
  if (it == self->state.calls.end())
    return;
  auto done = std::move(it->second.done);
  self->state.calls.erase(it);
  done(std::move(r));
}

/// " (N more since the last line)" for a rate-limited line, or "".
std::string left_out(const log_permit& p) {
  return p.suppressed ? " (" + std::to_string(p.suppressed) + " more since the last line)" : std::string{};
}

void answer(bridge_pointer self, peer_id peer, const wire::envelope& req, wire_reply r) {
  if (req.kind != wire::envelope_kind::request) {
    if (!r)
      if (auto permit = self->state.failed_tell_log.admit())
        spdlog::warn("bridge {}: one-way '{}' from {} failed: {}{}", self->state.cfg.node_id, req.operation,
                     self->state.node_of(peer), error_text(r.error()), left_out(permit));
    return;
  }
  wire::envelope env{wire::envelope_kind::response, req.call_id, {}, {}};
  if (r) {
    auto payload = encode_payload(self, *r);
    if (payload)
      env.payload = std::move(*payload);
    else
      r = payload.error();
  }
  if (!r) {
    env.kind = wire::envelope_kind::failure;
    env.payload = wire::encode(wire::wire_message{wire::to_wire_error(r.error())}).value();
  }
  send_envelope(self, peer, bridge_name, env, 0);
}

/// Refuses `peer`: counted under `reason`, logged, disconnected.
void refuse(bridge_pointer self, peer_id peer, const std::string& reason, const std::string& why) {
  auto& st = self->state;
  ++st.refusals[reason];
  if (auto permit = st.refusal_log.admit())
    spdlog::warn("bridge {}: refused {} ({}): {}{}", st.cfg.node_id, st.node_of(peer), reason, why,
                 left_out(permit));
  st.tr->disconnect(peer);
}

/// Exports the transport's refusals and the bridge's own as
/// tessera_wire_rejected_peers_total{reason}.
void export_refusals(bridge_pointer self) {
  auto& st = self->state;
  if (!st.cfg.metrics)
    return;
  auto counts = st.tr->rejections();
  for (const auto& [reason, n] : st.refusals)
    counts.emplace_back(reason, n);
  for (const auto& [reason, n] : counts) {
    auto& seen = st.exported[reason];
    if (n > seen)
      st.cfg.metrics
        ->counter("tessera_wire_rejected_peers_total",
                  "Peers and messages refused at the cluster wire (failed handshakes, messages "
                  "without a session, oversized or ungranted data, impersonation), by reason.",
                  {{"reason", reason}})
        .inc(static_cast<double>(n - seen));
    seen = n;
  }
  for (const auto& [reason, n] : st.drops) {
    auto& seen = st.drops_exported[reason];
    if (n > seen)
      st.cfg.metrics
        ->counter("tessera_bridge_dropped_messages_total",
                  "One-way messages the bridge dropped, by reason (not_connected: the target's node "
                  "was not connected, as during a join, when heartbeats start before the connection).",
                  {{"reason", reason}})
        .inc(static_cast<double>(n - seen));
    seen = n;
  }
}

/// Grants `peer` the blocks of `g` that need data (block_bytes each) for
/// the life of the hand-off. Errors: the transport's.
caf::error grant_blocks(bridge_pointer self, peer_id peer, const wire::kv_grant& g,
                        uint64_t block_bytes) {
  auto& st = self->state;
  std::vector<transport::memory_range> ranges;
  for (const auto& b : g.blocks)
    if (b.needs_data)
      ranges.push_back({g.dst_region, b.dst_offset, block_bytes});
  if (ranges.empty())
    return {};
  auto id = st.tr->grant(peer, std::move(ranges));
  if (!id)
    return id.error();
  st.grants[*id] = {peer, g.request_id};
  self->delayed_send(self, 2 * st.cfg.call_timeout, revoke_atom_v, *id);
  return {};
}

/// Revokes the grants `peer` holds for `request_id` (its hand-off ended).
void revoke_request(bridge_pointer self, peer_id peer, uint64_t request_id) {
  auto& st = self->state;
  for (auto it = st.grants.begin(); it != st.grants.end();) {
    if (it->second.peer == peer && it->second.request_id == request_id) {
      st.tr->revoke(it->first);
      it = st.grants.erase(it);
    } else {
      ++it;
    }
  }
}

void map_node(bridge_pointer self, const std::string& node, peer_id peer) {
  auto& st = self->state;
  if (auto old = st.node_peer.find(node); old != st.node_peer.end() && old->second != peer)
    st.peer_node.erase(old->second);
  st.node_peer[node] = peer;
  st.peer_node[peer] = node;
}

wire::membership my_membership(bridge_pointer self) {
  wire::membership m;
  m.node_id = self->state.cfg.node_id;
  return m;
}

caf::error no_such_actor(bridge_pointer self, const std::string& name) {
  return make_transport_error(transport_errc::no_such_actor,
                              "bridge: node '" + self->state.cfg.node_id + "' has no actor '" +
                                name + "'");
}

caf::error not_connected(bridge_pointer self, const std::string& node) {
  return make_transport_error(transport_errc::not_connected,
                              "bridge: node '" + self->state.cfg.node_id +
                                "' is not connected to node '" + node + "'");
}

/// A tell or request from another node for local actor `to`.
void serve(bridge_pointer self, peer_id peer, const std::string& to, const wire::envelope& env) {
  auto& st = self->state;
  std::optional<wire::wire_message> arg;
  if (!env.payload.empty()) {
    auto inner = st.decoder.decode(env.payload, st.node_of(peer));
    if (!inner)
      return answer(self, peer, env, inner.error());
    arg = std::move(*inner);
  }
  if (to == bridge_name) {
    auto* hello = arg ? std::get_if<wire::membership>(&*arg) : nullptr;
    if (env.operation != hello_operation || hello == nullptr)
      return answer(self, peer, env,
                    make_transport_error(transport_errc::no_such_actor,
                                         "bridge: the bridge only accepts hello(membership), got '" +
                                           env.operation + "'"));
    // The node id must be the one the transport's handshake proved, and
    // a node is mapped once: a second peer claiming it is refused while
    // the first lives.
    const auto proven = st.tr->peer_identity(peer);
    std::string refusal, reason;
    if (!proven.empty() && proven != hello->node_id) {
      reason = "impersonation";
      refusal = "its hello names node '" + hello->node_id + "' but it proved '" + proven + "'";
    } else if (auto np = st.node_peer.find(hello->node_id);
               np != st.node_peer.end() && np->second != peer) {
      reason = "duplicate_node";
      refusal = "node '" + hello->node_id + "' is connected already";
    } else if (auto pn = st.peer_node.find(peer); pn != st.peer_node.end() && pn->second != hello->node_id) {
      reason = "impersonation";
      refusal = "it joined as '" + pn->second + "' and now says '" + hello->node_id + "'";
    }
    if (!reason.empty()) {
      answer(self, peer, env,
             make_transport_error(transport_errc::unauthenticated, "bridge: refused: " + refusal));
      return refuse(self, peer, reason, refusal);
    }
    map_node(self, hello->node_id, peer);
    spdlog::info("bridge {}: node '{}' joined", st.cfg.node_id, hello->node_id);
    return answer(self, peer, env, std::optional<wire::wire_message>{my_membership(self)});
  }
  if (!st.peer_node.contains(peer)) {
    answer(self, peer, env,
           make_transport_error(transport_errc::unauthenticated,
                                "bridge: node '" + st.cfg.node_id + "' takes no call before hello"));
    return refuse(self, peer, "before_hello",
                  "it called '" + env.operation + "' on '" + to + "' before its hello");
  }
  auto dest = st.published.find(to);
  if (dest == st.published.end())
    return answer(self, peer, env, no_such_actor(self, to));
  std::optional<wire::message_type> arg_type;
  if (arg)
    arg_type = wire::type_of(*arg);
  const auto* op = st.cfg.protocol->find(env.operation, arg_type);
  if (op == nullptr)
    return answer(self, peer, env,
                  make_transport_error(transport_errc::no_such_actor,
                                       "bridge: actor '" + to + "' on node '" + st.cfg.node_id +
                                         "' does not accept '" + env.operation + "'" +
                                         (arg_type ? " with a " + std::string(wire::to_string(*arg_type))
                                                   : std::string(" without an argument"))));
  const bool want_reply = env.kind == wire::envelope_kind::request;
  // A hand-off with KV: its grant opens exactly the granted blocks to
  // this peer; its commit or cancel closes them.
  uint64_t block_bytes = 0;
  if (auto* h = arg ? std::get_if<wire::request_handoff>(&*arg) : nullptr; h && h->kv)
    block_bytes = h->kv->layout.block_bytes();
  if (auto* c = arg ? std::get_if<wire::kv_transfer_batch>(&*arg) : nullptr)
    revoke_request(self, peer, c->request_id);
  if (auto* c = arg ? std::get_if<wire::request_cancel>(&*arg) : nullptr)
    revoke_request(self, peer, c->request_id);
  // An SDK client is the node its connection proved, whatever it says
  // (actors/frontend/sdk_gateway.hpp).
  if (auto* c = arg ? std::get_if<wire::client_submit>(&*arg) : nullptr)
    c->client = st.peer_node.at(peer);
  if (auto* c = arg ? std::get_if<wire::client_cancel>(&*arg) : nullptr)
    c->client = st.peer_node.at(peer);
  op->invoke(self, dest->second, std::move(arg), want_reply, st.cfg.call_timeout,
             [self, peer, env, block_bytes](wire_reply r) {
               auto* g = r && *r ? std::get_if<wire::kv_grant>(&**r) : nullptr;
               if (g != nullptr && block_bytes > 0)
                 if (auto err = grant_blocks(self, peer, *g, block_bytes))
                   r = std::move(err);
               answer(self, peer, env, std::move(r));
             });
}

/// A response or failure from `peer` for one of our calls.
void settle(bridge_pointer self, peer_id peer, const wire::envelope& env) {
  auto& st = self->state;
  auto it = st.calls.find(env.call_id);
  if (it == st.calls.end() || it->second.peer != peer) {
    if (auto permit = st.bogus_reply_log.admit())
      spdlog::warn("bridge {}: a reply from {} for unknown call {} (late or bogus), dropped{}", st.cfg.node_id,
                   st.node_of(peer), env.call_id, left_out(permit));
    return;
  }
  std::optional<wire::wire_message> value;
  if (!env.payload.empty()) {
    auto inner = st.decoder.decode(env.payload, st.node_of(peer));
    if (!inner)
      return finish_call(self, env.call_id, inner.error());
    value = std::move(*inner);
  }
  if (env.kind == wire::envelope_kind::failure) {
    auto* e = value ? std::get_if<wire::wire_error>(&*value) : nullptr;
    return finish_call(self, env.call_id,
                       e ? wire::from_wire_error(*e)
                         : make_transport_error(transport_errc::invalid_message,
                                                "bridge: a failure without an error"));
  }
  finish_call(self, env.call_id, std::move(value));
}

void on_inbound(bridge_pointer self, peer_id peer, const std::string& to,
                const std::vector<std::byte>& frame) {
  auto& st = self->state;
  auto m = st.decoder.decode(frame, st.node_of(peer));
  if (!m)
    return; // counted and logged by the decoder
  auto* env = std::get_if<wire::envelope>(&*m);
  if (env == nullptr) {
    st.decoder.reject(make_transport_error(transport_errc::invalid_message,
                                           "bridge: expected an envelope, got a " +
                                             std::string(wire::to_string(wire::type_of(*m)))),
                      st.node_of(peer));
    return;
  }
  if (env->kind == wire::envelope_kind::response || env->kind == wire::envelope_kind::failure)
    settle(self, peer, *env);
  else
    serve(self, peer, to, *env);
}

void on_peer_down(bridge_pointer self, peer_id peer, const caf::error& why) {
  auto& st = self->state;
  const auto who = st.node_of(peer);
  if (auto it = st.peer_node.find(peer); it != st.peer_node.end()) {
    if (auto np = st.node_peer.find(it->second); np != st.node_peer.end() && np->second == peer) {
      st.node_peer.erase(np);
      for (const auto& w : st.watchers)
        self->send(w, node_down_atom_v, it->second);
    }
    st.peer_node.erase(it);
  }
  std::erase_if(st.grants, [peer](const auto& g) { return g.second.peer == peer; });
  std::vector<uint64_t> failed;
  for (const auto& [id, call] : st.calls)
    if (call.peer == peer)
      failed.push_back(id);
  for (auto id : failed)
    finish_call(self, id,
                make_transport_error(transport_errc::peer_failed,
                                     "bridge: " + who + " failed before replying: " + error_text(why)));
  spdlog::info("bridge {}: {} is gone: {}", st.cfg.node_id, who, error_text(why));
}

caf::behavior bridge_fn(bridge_pointer self, transport::transport* tr,
                        std::shared_ptr<detail::region_table> regions, bridge_config cfg) {
  self->state.cfg = std::move(cfg);
  self->state.tr = tr;
  self->state.regions = std::move(regions);
  self->state.decoder = wire::frame_decoder{self->state.cfg.limits};
  // A one-way call's target may still return a value: it comes back here.
  self->set_default_handler(caf::drop);
  if (self->state.cfg.metrics)
    self->send(self, step_atom_v);
  return {
    [self](connect_atom, std::string node, std::string address) -> caf::result<void> {
      auto& st = self->state;
      auto rp = self->make_response_promise<void>();
      const uint64_t id = st.next_id++;
      st.connects.emplace(id, bridge_state::pending_connect{rp, node});
      auto handle = caf::actor_cast<bridge_actor>(self);
      st.connect_threads.emplace(id, std::thread{[tr = st.tr, handle, id, address] {
        auto peer = tr->connect(address);
        caf::anon_send(handle, connected_atom_v, id, peer ? *peer : peer_id{0},
                       peer ? caf::error{} : peer.error());
      }});
      return rp;
    },
    [self](connected_atom, uint64_t id, peer_id peer, caf::error err) {
      if (auto t = self->state.connect_threads.find(id); t != self->state.connect_threads.end()) {
        t->second.join();
        self->state.connect_threads.erase(t);
      }
      auto it = self->state.connects.find(id);
      if (it == self->state.connects.end())
        return;
      auto pc = std::move(it->second);
      self->state.connects.erase(it);
      if (err) {
        pc.rp.deliver(std::move(err));
        return;
      }
      wire_call hello{hello_operation, wire::wire_message{my_membership(self)}};
      start_call(self, peer, bridge_name, "the bridge of node '" + pc.node + "'", std::move(hello),
                 [self, pc, peer](wire_reply r) mutable {
                   auto* m = r && *r ? std::get_if<wire::membership>(&**r) : nullptr;
                   if (!r)
                     return pc.rp.deliver(r.error());
                   if (m == nullptr || m->node_id != pc.node)
                     return pc.rp.deliver(make_transport_error(
                       transport_errc::invalid_message,
                       "bridge: the node at that address is '" + (m ? m->node_id : std::string{"?"}) +
                         "', not '" + pc.node + "'"));
                   if (auto proven = self->state.tr->peer_identity(peer);
                       !proven.empty() && proven != pc.node) {
                     refuse(self, peer, "impersonation",
                            "it answered as '" + pc.node + "' but proved '" + proven + "'");
                     return pc.rp.deliver(make_transport_error(
                       transport_errc::unauthenticated,
                       "bridge: the node at that address proved '" + proven + "', not '" + pc.node + "'"));
                   }
                   map_node(self, pc.node, peer);
                   pc.rp.deliver(caf::unit);
                 });
    },
    [self](publish_atom, std::string name, caf::actor a) {
      self->state.published[std::move(name)] = std::move(a);
    },
    [self](forward_atom, std::string node, std::string name,
           caf::message msg) -> caf::result<caf::message> {
      const bool is_request = self->current_message_id().is_request();
      auto peer = self->state.node_peer.find(node);
      caf::error err = bridge_protocol::check(msg);
      if (!err && node == self->state.cfg.node_id) {
        // An actor of this node: no wire, the message itself (the same
        // check keeps local and remote calls interchangeable).
        auto dest = self->state.published.find(name);
        if (dest != self->state.published.end())
          return self->delegate(dest->second, std::move(msg));
        err = no_such_actor(self, name);
      } else if (!err && peer == self->state.node_peer.end()) {
        err = not_connected(self, node);
      }
      if (err) {
        if (is_request)
          return err;
        // Workers and stores start heartbeating (one-way joins and loads,
        // repeated every interval) before their node has connected to the
        // router's: those first few drops are part of a normal join, and
        // a node that is gone was already logged by on_peer_failed.
        if (err == transport_errc::not_connected) {
          ++self->state.drops["not_connected"];
          spdlog::debug("bridge {}: dropped a one-way message for '{}' on '{}': {}",
                        self->state.cfg.node_id, name, node, error_text(err));
        } else {
          ++self->state.drops["other"];
          if (auto permit = self->state.drop_log.admit())
            spdlog::warn("bridge {}: dropped a one-way message for '{}' on '{}': {}{}", self->state.cfg.node_id,
                         name, node, error_text(err), left_out(permit));
        }
        return caf::typed_response_promise<caf::message>{};
      }
      auto call = bridge_protocol::to_wire(msg); // checked above: cannot fail
      if (!is_request) {
        auto payload = encode_payload(self, call->arg);
        if (!payload) {
          spdlog::warn("bridge {}: cannot encode a message for '{}': {}", self->state.cfg.node_id,
                       name, error_text(payload.error()));
          return caf::typed_response_promise<caf::message>{};
        }
        wire::envelope env{wire::envelope_kind::tell, 0, std::move(call->operation),
                           std::move(*payload)};
        send_envelope(self, peer->second, name, env, 0);
        return caf::typed_response_promise<caf::message>{};
      }
      auto rp = self->make_response_promise<caf::message>();
      start_call(self, peer->second, name, "actor '" + name + "' on node '" + node + "'",
                 std::move(*call), [rp](wire_reply r) mutable {
                   if (!r)
                     rp.deliver(r.error());
                   else if (!*r)
                     static_cast<caf::response_promise&>(rp).deliver(caf::unit);
                   else
                     rp.deliver(bridge_protocol::to_message(std::move(*r)));
                 });
      return rp;
    },
    [self](transfer_atom, std::string node, transport::transfer_batch batch) -> caf::result<void> {
      if (node == self->state.cfg.node_id) {
        if (auto err = self->state.regions->copy(batch))
          return err;
        return caf::unit;
      }
      auto peer = self->state.node_peer.find(node);
      if (peer == self->state.node_peer.end())
        return not_connected(self, node);
      auto rp = self->make_response_promise<void>();
      const uint64_t id = self->state.next_id++;
      self->state.transfers.emplace(id, rp);
      auto handle = caf::actor_cast<bridge_actor>(self);
      self->state.tr->transfer(peer->second, std::move(batch), [handle, id](const caf::error& err) {
        caf::anon_send(handle, completed_atom_v, id, err);
      });
      return rp;
    },
    [self](peers_atom) {
      std::vector<std::string> out;
      for (const auto& [node, peer] : self->state.node_peer)
        out.push_back(node);
      std::sort(out.begin(), out.end());
      return out;
    },
    [self](watch_atom, caf::actor watcher) { self->state.watchers.push_back(std::move(watcher)); },
    [self](disconnect_atom, const std::string& node) {
      auto& st = self->state;
      auto it = st.node_peer.find(node);
      if (it == st.node_peer.end())
        return false;
      const auto peer = it->second;
      st.tr->disconnect(peer);
      // At once, not when the transport reports it: whoever asked knows
      // every watcher has node_down once this replies.
      on_peer_down(self, peer,
                   make_transport_error(transport_errc::peer_failed, "node '" + node + "' left the cluster"));
      return true;
    },
    [self](inbound_atom, peer_id peer, const std::string& to, const std::vector<std::byte>& frame) {
      on_inbound(self, peer, to, frame);
    },
    [](peer_up_atom, peer_id, const std::string&) {
      // Nothing to do until its hello names the node.
    },
    [self](peer_down_atom, peer_id peer, const caf::error& why) { on_peer_down(self, peer, why); },
    [](arrived_atom, peer_id, uint64_t) {
      // The sender's transfer completion is what the KV protocol relies on
      // (its flush means the blocks landed); nothing to do here.
    },
    [self](completed_atom, uint64_t id, caf::error err) {
      if (auto t = self->state.transfers.find(id); t != self->state.transfers.end()) {
        auto rp = t->second;
        self->state.transfers.erase(t);
        if (err)
          rp.deliver(std::move(err));
        else
          rp.deliver(caf::unit);
        return;
      }
      if (err)
        finish_call(self, id, std::move(err));
    },
    [self](revoke_atom, uint64_t id) {
      if (self->state.grants.erase(id) > 0)
        self->state.tr->revoke(id);
    },
    [self](step_atom) {
      export_refusals(self);
      self->delayed_send(self, std::chrono::seconds{1}, step_atom_v);
    },
    [self](expire_atom, uint64_t id) {
      auto it = self->state.calls.find(id);
      if (it == self->state.calls.end())
        return;
      auto target = it->second.target;
      finish_call(self, id,
                  make_transport_error(transport_errc::timeout,
                                       "bridge: " + target + " did not reply within " +
                                         std::to_string(self->state.cfg.call_timeout.count()) +
                                         " ms"));
    },
  };
}

} // namespace

/// Forwards the transport's events (on its progress thread) to the bridge
/// actor as messages.
class bridge::relay final : public transport::transport_handler {
public:
  explicit relay(bridge_actor target) : target_(std::move(target)) {}
  void on_peer_connected(peer_id peer, const std::string& address) override {
    caf::anon_send(target_, peer_up_atom_v, peer, address);
  }
  void on_message(peer_id from, transport::message msg) override {
    caf::anon_send(target_, inbound_atom_v, from, std::move(msg.actor), std::move(msg.frame));
  }
  void on_blocks_arrived(peer_id from, const transport::transfer_batch& batch) override {
    caf::anon_send(target_, arrived_atom_v, from, batch.batch_id);
  }
  void on_peer_failed(peer_id peer, const caf::error& why) override {
    caf::anon_send(target_, peer_down_atom_v, peer, why);
  }

private:
  bridge_actor target_;
};

bridge::bridge(caf::actor_system& sys, std::unique_ptr<transport::transport> tr,
               bridge_config cfg)
    : sys_(sys), regions_(std::make_shared<detail::region_table>()), transport_(std::move(tr)) {
  actor_ = caf::actor_cast<bridge_actor>(
    sys.spawn(bridge_fn, transport_.get(), regions_, std::move(cfg)));
  relay_ = std::make_unique<relay>(actor_);
  transport_->set_handler(relay_.get());
}

caf::expected<transport::region_id> bridge::register_region(std::span<std::byte> memory) {
  auto id = transport_->register_region(memory);
  if (id)
    regions_->add(*id, memory);
  return id;
}

bridge::~bridge() {
  {
    caf::scoped_actor self{sys_};
    self->monitor(actor_);
    self->send_exit(actor_, caf::exit_reason::user_shutdown);
    self->receive([](const caf::down_msg&) {});
  }
  transport_.reset();
  relay_.reset();
}

} // namespace tessera::actors
