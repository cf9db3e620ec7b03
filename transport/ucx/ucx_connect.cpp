// ucx_core's connections: the listener, client endpoints, the HELLO /
// HELLO_ACK handshake, BYE, and the failure of a peer.

#include "transport/ucx/ucx_core.hpp"

#include <algorithm>

namespace tessera::transport::detail {

caf::expected<std::string> ucx_core::listen(const std::string& address) {
  sockaddr_in sa{};
  if (!parse_address(address, sa))
    return make_transport_error(transport_errc::invalid_message,
                                "ucx: listen address '" + address + "' is not host:port");
  return call<std::string>([this, sa, address]() -> caf::expected<std::string> {
    ucp_listener_params_t params{};
    params.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
    params.sockaddr.addr = reinterpret_cast<const sockaddr*>(&sa);
    params.sockaddr.addrlen = sizeof(sa);
    params.conn_handler.cb = &ucx_core::on_conn_request;
    params.conn_handler.arg = this;
    ucp_listener_h listener = nullptr;
    auto st = ucp_listener_create(worker_, &params, &listener);
    if (st == UCS_ERR_BUSY)
      return ucx_error(transport_errc::address_in_use, "listen on " + address, st);
    if (st != UCS_OK)
      return ucx_error(transport_errc::peer_unreachable, "listen on " + address, st);
    ucp_listener_attr_t attr{};
    attr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
    st = ucp_listener_query(listener, &attr);
    if (st != UCS_OK) {
      ucp_listener_destroy(listener);
      return ucx_error(transport_errc::peer_unreachable, "query listener", st);
    }
    listeners_.push_back(listener);
    auto bound = to_string(attr.sockaddr);
    auto host = address.substr(0, address.rfind(':'));
    auto port = bound.substr(bound.rfind(':') + 1);
    return host + ":" + port;
  });
}

caf::expected<peer_id> ucx_core::connect(const std::string& address) {
  sockaddr_in sa{};
  if (!parse_address(address, sa))
    return make_transport_error(transport_errc::invalid_message,
                                "ucx: connect address '" + address + "' is not host:port");
  auto prom = std::make_shared<std::promise<caf::expected<peer_id>>>();
  auto fut = prom->get_future();
  auto id = next_peer_.fetch_add(1);
  if (!post([this, sa, address, prom, id] { start_connect(id, sa, address, prom); }))
    return closed_error();
  if (fut.wait_for(opts_.peer_timeout) == std::future_status::ready)
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

void ucx_core::start_connect(peer_id id, sockaddr_in sa, const std::string& address,
                             std::shared_ptr<std::promise<caf::expected<peer_id>>> prom) {
  auto params = ep_params();
  params.field_mask |= UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR;
  params.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
  params.sockaddr.addr = reinterpret_cast<const sockaddr*>(&sa);
  params.sockaddr.addrlen = sizeof(sa);
  ucp_ep_h ep = nullptr;
  auto st = ucp_ep_create(worker_, &params, &ep);
  if (st != UCS_OK) {
    prom->set_value(ucx_error(transport_errc::peer_unreachable, "connect to " + address, st));
    return;
  }
  auto& p = peers_[id];
  p.id = id;
  p.ep = ep;
  p.address = address;
  p.connect_promise = std::move(prom);
  p.last_progress = clock::now();
  ep_to_peer_[ep] = id;
  writer w;
  encode_regions(w);
  am_send(p, am_hello, {}, std::move(w.out), {});
}

void ucx_core::on_conn_request(ucp_conn_request_h req, void* arg) {
  auto* self = static_cast<ucx_core*>(arg);
  if (self->shutting_down_ || self->listeners_.empty())
    return; // listeners are being destroyed; the client times out
  ucp_conn_request_attr_t attr{};
  attr.field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR;
  std::string address = "ucx-peer";
  if (ucp_conn_request_query(req, &attr) == UCS_OK)
    address = to_string(attr.client_address);
  auto params = self->ep_params();
  params.field_mask |= UCP_EP_PARAM_FIELD_CONN_REQUEST;
  params.conn_request = req;
  ucp_ep_h ep = nullptr;
  if (ucp_ep_create(self->worker_, &params, &ep) != UCS_OK)
    return;
  auto id = self->next_peer_.fetch_add(1);
  auto& p = self->peers_[id];
  p.id = id;
  p.ep = ep;
  p.accepted = true;
  p.address = address;
  p.last_progress = clock::now();
  self->ep_to_peer_[ep] = id;
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
  for (auto& [rid, r] : p.regions)
    ucp_rkey_destroy(r.rkey);
  p.regions.clear();
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
  if (was == peer_state::connected && !shutting_down_)
    if (auto* h = handler_.load())
      h->on_peer_failed(id, why);
}

void ucx_core::on_hello(peer& p, reader& rd) {
  decode_regions(p, rd);
  p.state = peer_state::connected;
  writer w;
  encode_regions(w);
  am_send(p, am_hello_ack, {}, std::move(w.out), {});
  if (auto* h = handler_.load())
    h->on_peer_connected(p.id, p.address);
}

void ucx_core::on_hello_ack(peer& p, reader& rd) {
  decode_regions(p, rd);
  if (p.state == peer_state::connecting) {
    p.state = peer_state::connected;
    if (p.connect_promise) {
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
