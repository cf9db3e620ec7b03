// ucx_core's connections: the listener, client endpoints, the HELLO /
// HELLO_ACK handshake, BYE, and the failure of a peer.

#include "transport/ucx/ucx_core.hpp"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "common/error.hpp"

namespace tessera::transport::detail {

const char* to_string(rejection r) {
  switch (r) {
    case rejection::no_session: return "no_session";
    case rejection::too_large: return "too_large";
    case rejection::not_granted: return "not_granted";
    default: return detail::to_string(static_cast<handshake_failure>(r));
  }
}

caf::expected<std::string> ucx_core::listen(const std::string& address) {
  sockaddr_in sa{};
  if (!parse_address(address, sa))
    return make_transport_error(transport_errc::invalid_message,
                                "ucx: listen address '" + address + "' is not host:port");
  front_door_options fo;
  fo.secret = opts_.cluster_secret;
  fo.id = opts_.identity;
  fo.worker_address = worker_address_;
  fo.same_host_address = local_address_;
  fo.handshake_timeout = opts_.peer_timeout;
  fo.on_peer = [this](const handshake_peer& hp, uint64_t my_session, const std::string& from) {
    // Registered on the progress thread before the final message leaves,
    // so the client's HELLO always finds its session.
    auto ok = call<bool>([this, hp, my_session, from]() -> caf::expected<bool> {
      return accept_peer(hp, my_session, from);
    });
    return ok && *ok;
  };
  fo.on_reject = [this](handshake_failure why, const std::string& from, const std::string& what) {
    count_rejection(static_cast<rejection>(why), from, what);
  };
  auto door = front_door::listen(sa, std::move(fo));
  if (!door)
    return door.error();
  auto port = (*door)->port();
  {
    std::lock_guard lock{doors_mu_};
    doors_.push_back(std::move(*door));
  }
  return address.substr(0, address.rfind(':')) + ":" + std::to_string(port);
}

caf::expected<peer_id> ucx_core::connect(const std::string& address) {
  sockaddr_in sa{};
  if (!parse_address(address, sa))
    return make_transport_error(transport_errc::invalid_message,
                                "ucx: connect address '" + address + "' is not host:port");
  const auto deadline = clock::now() + opts_.peer_timeout;
  const auto my_session = random_session();
  auto why = handshake_failure::malformed;
  const handshake_offer offer{opts_.identity, worker_address_, my_session};
  // A node on this host, run by our uid, answers at its same-host door
  // (the kernel vouches for both ends); anything else falls back to TCP.
  auto hp = local_address_.empty()
              ? caf::expected<handshake_peer>{make_transport_error(
                  transport_errc::not_connected, "ucx: no same-host path here")}
              : front_door_connect_same_host(sa, opts_.cluster_secret, offer, local_address_,
                                             opts_.peer_timeout, &why);
  if (!hp) {
    // No door (another host, a node without the path) is ordinary; a door
    // held by a process we do not trust, or one that failed the handshake,
    // is worth a line.
    if (!local_address_.empty()) {
      const bool untrusted =
        hp.error().code() == static_cast<uint8_t>(transport_errc::unauthenticated);
      spdlog::log(untrusted ? spdlog::level::warn : spdlog::level::debug,
                  "ucx: connect to {}: no same-host path ({}); over TCP", address,
                  caf::to_string(hp.error()));
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
    hp = front_door_connect(sa, opts_.cluster_secret, offer,
                            std::max(left, std::chrono::milliseconds{1}), &why);
  }
  if (!hp) {
    if (hp.error().code() == static_cast<uint8_t>(transport_errc::unauthenticated))
      count_rejection(static_cast<rejection>(why), address, error_message(hp.error()));
    return hp.error();
  }
  auto prom = std::make_shared<std::promise<caf::expected<peer_id>>>();
  auto fut = prom->get_future();
  auto id = next_peer_.fetch_add(1);
  if (!post([this, hp = *hp, my_session, address, prom, id] {
        start_connect(id, hp, my_session, address, prom);
      }))
    return closed_error();
  if (fut.wait_until(deadline) == std::future_status::ready)
    return fut.get();
  // Timed out: fail the attempt on the progress thread (it answers the
  // promise, unless the answer raced us; either way we report timeout).
  post([this, id] {
    fail_peer(id, make_transport_error(transport_errc::timeout, "ucx: connect timed out"), true);
  });
  return make_transport_error(transport_errc::timeout,
                              "ucx: connect to " + address + " timed out after "
                                + std::to_string(opts_.peer_timeout.count()) + " ms");
}

void ucx_core::disconnect(peer_id peer) {
  post([this, peer] {
    auto it = peers_.find(peer);
    if (it == peers_.end() || it->second.state == peer_state::failed)
      return;
    am_send(it->second, am_bye, {}, {}, {});
    fail_peer(peer, make_transport_error(transport_errc::closed, "ucx: disconnected"), false);
  });
}

ucx_core::peer* ucx_core::usable_peer(peer_id to, const completion& done) {
  auto it = peers_.find(to);
  if (it == peers_.end()) {
    if (done)
      done(make_transport_error(transport_errc::not_connected,
                                "ucx: no peer " + std::to_string(to)));
    return nullptr;
  }
  if (it->second.state != peer_state::connected) {
    if (done)
      done(it->second.state == peer_state::failed
             ? make_transport_error(transport_errc::peer_failed,
                                    "ucx: peer " + std::to_string(to) + " failed: "
                                      + caf::to_string(it->second.why))
             : make_transport_error(transport_errc::not_connected,
                                    "ucx: peer " + std::to_string(to) + " still connecting"));
    return nullptr;
  }
  return &it->second;
}

ucx_core::peer* ucx_core::peer_of(ucp_ep_h ep) {
  auto it = ep_to_peer_.find(ep);
  if (it == ep_to_peer_.end())
    return nullptr;
  auto p = peers_.find(it->second);
  return p == peers_.end() ? nullptr : &p->second;
}

ucp_ep_params_t ucx_core::ep_params() {
  ucp_ep_params_t ep{};
  ep.field_mask = UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  ep.err_mode = ucx_.peer_error_handling ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
  if (ucx_.peer_error_handling) {
    ep.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.err_handler.cb = &ucx_core::on_ep_error;
    ep.err_handler.arg = this;
  }
  return ep;
}

ucx_core::peer* ucx_core::add_peer(peer_id id, const handshake_peer& hp, uint64_t my_session,
                                  const std::string& address, bool accepted) {
  auto params = ep_params();
  params.field_mask |= UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
  params.address = reinterpret_cast<const ucp_address_t*>(hp.worker_address.data());
  ucp_ep_h ep = nullptr;
  auto st = ucp_ep_create(worker_, &params, &ep);
  if (st != UCS_OK) {
    count_rejection(rejection::refused, address,
                    std::string{"cannot create an endpoint to its worker address: "}
                      + ucs_status_string(st));
    return nullptr;
  }
  auto& p = peers_[id];
  p.id = id;
  p.ep = ep;
  if (!hp.same_host_address.empty())
    add_local_ep(p, hp.same_host_address);
  p.accepted = accepted;
  p.address = address;
  p.identity = hp.id;
  p.my_session = my_session;
  p.peer_session = hp.session;
  p.last_progress = clock::now();
  ep_to_peer_[ep] = id;
  session_to_peer_[my_session] = id;
  return &p;
}

void ucx_core::start_connect(peer_id id, const handshake_peer& hp, uint64_t my_session,
                             const std::string& address,
                             std::shared_ptr<std::promise<caf::expected<peer_id>>> prom) {
  auto* p = add_peer(id, hp, my_session, address, false);
  if (!p) {
    prom->set_value(make_transport_error(transport_errc::peer_unreachable,
                                         "ucx: connect to " + address
                                           + ": cannot create an endpoint to its worker"));
    return;
  }
  p->connect_promise = std::move(prom);
  writer w;
  encode_regions(w);
  am_send(*p, am_hello, {}, std::move(w.out), {});
  send_local_regions(*p);
}

bool ucx_core::accept_peer(const handshake_peer& hp, uint64_t my_session, const std::string& from) {
  if (shutting_down_)
    return false;
  auto* p = add_peer(next_peer_.fetch_add(1), hp, my_session, from, true);
  if (p != nullptr && !hp.same_host_address.empty() && p->local_ep == nullptr) {
    // It will wait for our same-host keys, which cannot come: refused, so
    // that it falls back to the TCP door.
    fail_peer(p->id, make_transport_error(transport_errc::unavailable, "no same-host endpoint"),
              true);
    return false;
  }
  return p != nullptr;
}

void ucx_core::remember_identity(const peer& p) {
  std::lock_guard lock{identities_mu_};
  identities_[p.id] = p.identity;
}

std::string ucx_core::peer_identity(peer_id peer) const {
  std::lock_guard lock{identities_mu_};
  auto it = identities_.find(peer);
  return it == identities_.end() ? std::string{} : it->second;
}

std::vector<std::pair<std::string, uint64_t>> ucx_core::rejections() const {
  std::vector<std::pair<std::string, uint64_t>> out;
  for (size_t i = 0; i < rejection_count; ++i)
    out.emplace_back(to_string(static_cast<rejection>(i)), rejections_[i].load());
  return out;
}

void ucx_core::count_rejection(rejection why, const std::string& from, const std::string& what) {
  rejections_[static_cast<size_t>(why)].fetch_add(1);
  if (auto permit = refusal_log_.admit())
    spdlog::warn("ucx: refused {} ({}): {}{}", from, to_string(why), what,
                 permit.suppressed == 0
                   ? std::string{}
                   : " (" + std::to_string(permit.suppressed) + " more refusals not logged)");
}

void ucx_core::refuse_peer(peer& p, rejection why, const std::string& what) {
  count_rejection(why, "peer " + std::to_string(p.id) + " ('" + p.identity + "')", what);
  auto id = p.id;
  auto err = make_transport_error(transport_errc::not_granted, "ucx: peer refused: " + what);
  // Closed outside UCX's receive callback.
  post([this, id, err] { fail_peer(id, err, true); });
}

// --- grants ---

caf::expected<grant_id> ucx_core::grant(peer_id peer, std::vector<memory_range> ranges) {
  auto id = next_grant_.fetch_add(1);
  return call<grant_id>([this, peer, id, ranges = std::move(ranges)]() -> caf::expected<grant_id> {
    auto it = peers_.find(peer);
    if (it == peers_.end() || it->second.state == peer_state::failed)
      return make_transport_error(transport_errc::not_connected,
                                  "ucx: grant to peer " + std::to_string(peer)
                                    + ", which is not connected");
    for (const auto& r : ranges) {
      auto reg = regions_.find(r.region);
      if (reg == regions_.end() || r.size == 0 || r.offset > reg->second.memory.size()
          || r.size > reg->second.memory.size() - r.offset)
        return make_transport_error(transport_errc::invalid_message,
                                    "ucx: grant of [" + std::to_string(r.offset) + ", +"
                                      + std::to_string(r.size) + ") outside region "
                                      + std::to_string(r.region));
    }
    auto& keys = grants_[id];
    keys.first = peer;
    for (const auto& r : ranges) {
      auto key = std::make_pair(r.region, r.offset);
      // A range granted twice keeps its latest grant (the older one's
      // revoke then leaves it alone).
      it->second.granted[key] = grant_piece{r.offset + r.size, id};
      keys.second.push_back(key);
    }
    return id;
  });
}

void ucx_core::revoke(grant_id id) {
  // Waits until the progress thread applied it, as grant() does: a block
  // run that arrives after revoke() returned finds no grant.
  (void) call<bool>([this, id]() -> caf::expected<bool> {
    auto g = grants_.find(id);
    if (g == grants_.end())
      return false;
    auto p = peers_.find(g->second.first);
    if (p != peers_.end())
      for (const auto& key : g->second.second) {
        auto piece = p->second.granted.find(key);
        if (piece != p->second.granted.end() && piece->second.id == id)
          p->second.granted.erase(piece);
      }
    grants_.erase(g);
    return true;
  });
}

bool ucx_core::is_granted(const peer& p, region_id region, uint64_t offset, uint64_t size) const {
  // Walk the pieces that cover [offset, offset + size) back to back.
  const uint64_t end = offset + size;
  auto it = p.granted.upper_bound({region, offset});
  if (it == p.granted.begin())
    return false;
  --it;
  uint64_t covered = offset;
  while (it != p.granted.end() && it->first.first == region && it->first.second <= covered) {
    covered = std::max(covered, it->second.end);
    if (covered >= end)
      return true;
    ++it;
  }
  return false;
}

void ucx_core::on_ep_error(void* arg, ucp_ep_h ep, ucs_status_t status) {
  auto* self = static_cast<ucx_core*>(arg);
  auto* p = self->peer_of(ep);
  if (!p || p->state == peer_state::failed)
    return;
  auto id = p->id;
  auto err = p->state == peer_state::connecting && !p->accepted
               ? ucx_error(transport_errc::peer_unreachable, "connect to " + p->address, status)
               : ucx_error(transport_errc::peer_failed, "peer " + std::to_string(id), status);
  // Close (force) outside the callback.
  self->post([self, id, err] { self->fail_peer(id, err, true); });
}

void ucx_core::note_progress(peer_id id) {
  auto it = peers_.find(id);
  if (it != peers_.end())
    it->second.last_progress = clock::now();
}

ucx_core::clock::duration ucx_core::stall_check_interval() const {
  return std::max<clock::duration>(opts_.peer_timeout / 8, std::chrono::milliseconds{1});
}

void ucx_core::check_stalled_peers() {
  if (!ucx_.peer_error_handling || shutting_down_)
    return;
  auto now = clock::now();
  if (now < next_stall_check_)
    return;
  next_stall_check_ = now + stall_check_interval();
  // A peer that passed the front door but never sent its HELLO holds a
  // record and an endpoint: dropped after peer_timeout.
  std::vector<peer_id> silent;
  for (const auto& [id, p] : peers_)
    if (p.accepted && p.state == peer_state::connecting && now - p.last_progress >= opts_.peer_timeout)
      silent.push_back(id);
  for (auto id : silent)
    fail_peer(id,
              make_transport_error(transport_errc::timeout,
                                   "ucx: peer " + std::to_string(id) + " sent no HELLO within "
                                     + std::to_string(opts_.peer_timeout.count()) + " ms"),
              true);
  // Each peer's oldest unfinished operation.
  std::map<peer_id, clock::time_point> waiting_since;
  for (const auto* op : ops_)
    if (!op->finished) {
      auto [it, fresh] = waiting_since.emplace(op->peer, op->posted);
      if (!fresh)
        it->second = std::min(it->second, op->posted);
    }
  for (const auto& [id, since] : waiting_since) {
    auto it = peers_.find(id);
    if (it == peers_.end() || it->second.state != peer_state::connected)
      continue; // connect() has its own timeout
    auto stalled = now - std::max(since, it->second.last_progress);
    if (stalled < opts_.peer_timeout)
      continue;
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(stalled).count();
    fail_peer(id,
              make_transport_error(transport_errc::peer_failed,
                                   "ucx: peer " + std::to_string(id) + " made no progress for "
                                     + std::to_string(ms) + " ms (peer_timeout "
                                     + std::to_string(opts_.peer_timeout.count()) + " ms)"),
              true);
  }
}

void ucx_core::fail_peer(peer_id id, const caf::error& why, bool force) {
  auto it = peers_.find(id);
  if (it == peers_.end() || it->second.state == peer_state::failed)
    return;
  auto& p = it->second;
  auto was = p.state;
  p.state = peer_state::failed;
  p.why = why;
  if (p.connect_promise) {
    p.connect_promise->set_value(why);
    p.connect_promise.reset();
  }
  for (auto& [rid, r] : p.regions) {
    if (r.rkey != nullptr)
      ucp_rkey_destroy(r.rkey);
    if (r.local_rkey != nullptr)
      ucp_rkey_destroy(r.local_rkey);
  }
  p.regions.clear();
  if (p.local_ep) {
    ucp_request_param_t rp{};
    rp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    rp.flags = UCP_EP_CLOSE_FLAG_FORCE;
    auto* req = ucp_ep_close_nbx(p.local_ep, &rp);
    if (UCS_PTR_IS_PTR(req))
      close_requests_.push_back(req);
    p.local_ep = nullptr;
  }
  if (p.ep) {
    ucp_request_param_t rp{};
    rp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    rp.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    auto* req = ucp_ep_close_nbx(p.ep, &rp);
    if (UCS_PTR_IS_PTR(req))
      close_requests_.push_back(req);
    ep_to_peer_.erase(p.ep);
    p.ep = nullptr;
  }
  // UCX completes the peer's outstanding requests with an error as the
  // endpoint closes; anything it still holds is failed here.
  for (auto* op : ops_)
    if (op->peer == id && !op->finished) {
      op->finished = true;
      if (op->done)
        op->done(why);
    }
  kv_forget_peer(id);
  p.kv_in.clear();
  p.acks_due.clear();
  session_to_peer_.erase(p.my_session);
  for (auto& [key, piece] : p.granted)
    grants_.erase(piece.id);
  p.granted.clear();
  {
    std::lock_guard lock{identities_mu_};
    identities_.erase(id);
  }
  if (was == peer_state::connected && !shutting_down_)
    if (auto* h = handler_.load())
      h->on_peer_failed(id, why);
}

void ucx_core::on_hello(peer& p, reader& rd) {
  if (!p.accepted || p.state != peer_state::connecting)
    return refuse_peer(p, rejection::malformed, "a HELLO out of turn");
  decode_regions(p, rd);
  p.state = peer_state::connected;
  remember_identity(p);
  // Our same-host keys leave first, on their own endpoint: the client's
  // connect() returns once both arrived.
  send_local_regions(p);
  writer w;
  encode_regions(w);
  am_send(p, am_hello_ack, {}, std::move(w.out), {});
  if (auto* h = handler_.load())
    h->on_peer_connected(p.id, p.address);
}

void ucx_core::on_hello_ack(peer& p, reader& rd) {
  if (p.accepted || p.state != peer_state::connecting)
    return refuse_peer(p, rejection::malformed, "a HELLO_ACK out of turn");
  decode_regions(p, rd);
  {
    p.state = peer_state::connected;
    remember_identity(p);
    if (p.connect_promise && !p.local_keys_pending) {
      p.connect_promise->set_value(p.id);
      p.connect_promise.reset();
    }
  }
}

void ucx_core::on_bye(peer& p) {
  // Close outside UCX's receive callback.
  auto id = p.id;
  post([this, id] {
    fail_peer(id, make_transport_error(transport_errc::closed, "ucx: peer closed the connection"),
              true);
  });
}

} // namespace tessera::transport::detail
