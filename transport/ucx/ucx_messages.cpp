// ucx_core's active messages: bookkeeping of operations UCX has not
// finished, sending (control messages and the backend's own protocol), and
// the receive side: one dispatch for every active message, and delivery of
// control messages to the handler.

#include "transport/ucx/ucx_core.hpp"

#include <array>
#include <cstring>

namespace tessera::transport::detail {

void ucx_core::send(peer_id to, message msg, completion done) {
  if (msg.actor.size() > max_actor_bytes || msg.frame.size() > opts_.max_message_bytes) {
    auto err = make_transport_error(transport_errc::message_too_large,
                                    "ucx: message of " + std::to_string(msg.frame.size())
                                      + " bytes for actor of " + std::to_string(msg.actor.size())
                                      + " bytes is too large");
    if (!post([done, err] { if (done) done(err); }) && done)
      done(closed_error());
    return;
  }
  if (may_run_inline())
    return send_now(to, std::move(msg), std::move(done));
  auto m = std::make_shared<message>(std::move(msg));
  if (!post([this, to, m, done] { send_now(to, std::move(*m), done); }))
    if (done)
      done(closed_error());
}

void ucx_core::send_unchecked(peer_id to, const std::string& actor,
                              std::span<const std::byte> data, bool rndv, completion done) {
  post([this, to, actor, data, rndv, done] {
    auto* p = usable_peer(to, done);
    if (!p)
      return;
    auto* op = new_op(p->id, done);
    op->header = with_session(*p, {reinterpret_cast<const std::byte*>(actor.data()), actor.size()});
    ucp_request_param_t rp{};
    rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA
                      | UCP_OP_ATTR_FIELD_FLAGS;
    rp.flags = rndv ? UCP_AM_SEND_FLAG_RNDV : UCP_AM_SEND_FLAG_EAGER;
    rp.cb.send = &ucx_core::on_send_done;
    rp.user_data = op;
    auto* req = ucp_am_send_nbx(p->ep, am_message, op->header.data(), op->header.size(),
                                data.data(), data.size(), &rp);
    if (!op->hold(req) || req == nullptr) {
      finish_op(op, op->status == UCS_OK ? caf::error{} : status_error(op, op->status));
      release_op(op);
    }
  });
}

void ucx_core::send_now(peer_id to, message msg, completion done) {
  auto* p = usable_peer(to, done);
  if (!p)
    return;
  std::vector<std::byte> header(msg.actor.size());
  std::memcpy(header.data(), msg.actor.data(), msg.actor.size());
  am_send(*p, am_message, std::move(header), std::move(msg.frame), std::move(done));
}

std::vector<std::byte> ucx_core::with_session(const peer& p, std::span<const std::byte> header) {
  std::vector<std::byte> out(session_bytes + header.size());
  std::memcpy(out.data(), &p.peer_session, session_bytes);
  if (!header.empty())
    std::memcpy(out.data() + session_bytes, header.data(), header.size());
  return out;
}

ucx_core::pending_op* ucx_core::new_op(peer_id peer, completion done) {
  auto* op = new pending_op;
  op->self = this;
  op->peer = peer;
  op->done = std::move(done);
  op->posted = clock::now();
  ops_.push_back(op);
  return op;
}

void ucx_core::finish_op(pending_op* op, const caf::error& err) {
  if (!op->finished) {
    op->finished = true;
    if (op->done)
      op->done(err);
  }
}

void ucx_core::release_op(pending_op* op) {
  if (op->outstanding > 0)
    return;
  std::erase(ops_, op);
  delete op;
}

caf::error ucx_core::status_error(const pending_op* op, ucs_status_t st) {
  auto it = peers_.find(op->peer);
  if (it != peers_.end() && it->second.state == peer_state::failed)
    return make_transport_error(transport_errc::peer_failed,
                                "ucx: peer failed: " + caf::to_string(it->second.why));
  return ucx_error(transport_errc::peer_failed, "peer " + std::to_string(op->peer), st);
}

void ucx_core::on_send_done(void* request, ucs_status_t status, void* user_data) {
  auto* op = static_cast<pending_op*>(user_data);
  ucp_request_free(request);
  --op->outstanding;
  auto* self = op->self;
  if (status != UCS_OK) {
    self->finish_op(op, self->status_error(op, status));
  } else {
    self->note_progress(op->peer);
    self->finish_op(op, caf::error{});
  }
  self->release_op(op);
}

void ucx_core::am_send(peer& p, unsigned id, std::vector<std::byte> header,
                       std::vector<std::byte> data, completion done, bool local) {
  // Most of these messages (notices, acks, small control messages) fit
  // UCX's short protocol and complete within the call: tried first with
  // the header on the stack and no operation record (its allocations are
  // paid per notice and per ack, i.e. per KV batch). Forced immediate,
  // UCX sends nothing unless it completes it now; where it cannot (a long
  // message, a full queue), the message takes the path below, still in
  // order (UCX tries the same short send first there too).
  if (header.size() <= max_actor_bytes) {
    std::array<std::byte, session_bytes + max_actor_bytes> hdr;
    std::memcpy(hdr.data(), &p.peer_session, session_bytes);
    if (!header.empty())
      std::memcpy(hdr.data() + session_bytes, header.data(), header.size());
    ucp_request_param_t rp{};
    rp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL;
    rp.flags = UCP_AM_SEND_FLAG_EAGER;
    auto* req = ucp_am_send_nbx(local ? p.local_ep : p.ep, id, hdr.data(),
                                session_bytes + header.size(), data.data(), data.size(), &rp);
    if (req == nullptr) {
      if (done)
        done(caf::error{});
      return;
    }
    // Anything else (UCS_ERR_NO_RESOURCE, or a failure the path below
    // reports the usual way): nothing was sent.
    if (UCS_PTR_IS_PTR(req))
      ucp_request_free(req); // not expected with FORCE_IMM_CMPL
  }
  auto* op = new_op(p.id, std::move(done));
  op->header = with_session(p, header);
  op->data = std::move(data);
  ucp_request_param_t rp{};
  rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA
                    | UCP_OP_ATTR_FIELD_FLAGS;
  rp.flags = UCP_AM_SEND_FLAG_EAGER;
  rp.cb.send = &ucx_core::on_send_done;
  rp.user_data = op;
  auto* req = ucp_am_send_nbx(local ? p.local_ep : p.ep, id, op->header.data(),
                              op->header.size(), op->data.data(), op->data.size(), &rp);
  if (req == nullptr) {
    finish_op(op, caf::error{});
    release_op(op);
  } else if (UCS_PTR_IS_ERR(req)) {
    finish_op(op, status_error(op, UCS_PTR_STATUS(req)));
    release_op(op);
  } else {
    ++op->outstanding;
  }
}

ucs_status_t ucx_core::on_am(unsigned id, const void* header, size_t header_length, void* data,
                             size_t length, const ucp_am_recv_param_t* param, bool local) {
  if (shutting_down_)
    return UCS_OK;
  // The sender is whoever holds the session at the head of the header;
  // returning without receiving releases a rendezvous message's data.
  uint64_t session = 0;
  if (header_length >= session_bytes)
    std::memcpy(&session, header, session_bytes);
  auto known = session == 0 ? session_to_peer_.end() : session_to_peer_.find(session);
  if (known == session_to_peer_.end()) {
    count_rejection(rejection::no_session, "a UCX endpoint",
                    "active message " + std::to_string(id) + " of " + std::to_string(length)
                      + " bytes without a session this node drew");
    return UCS_OK;
  }
  auto pit = peers_.find(known->second);
  if (pit == peers_.end() || pit->second.state == peer_state::failed)
    return UCS_OK;
  auto* p = &pit->second;
  header = static_cast<const std::byte*>(header) + session_bytes;
  header_length -= session_bytes;
  p->last_progress = clock::now();
  if (id == am_kv_block) {
    on_kv_block(*p, header, header_length, data, length, param);
    return UCS_OK;
  }
  bool rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
  // Bounded before anything is allocated: a control message is at most
  // max_message_bytes, an actor name max_actor_bytes; a peer that
  // declares more is refused.
  if (length > opts_.max_message_bytes || header_length > max_actor_bytes) {
    refuse_peer(*p, rejection::too_large,
                "active message " + std::to_string(id) + " declares " + std::to_string(length)
                  + " bytes (limit " + std::to_string(opts_.max_message_bytes)
                  + ") with a header of " + std::to_string(header_length) + " bytes");
    return UCS_OK;
  }
  // Only the same-host worker carries same-host keys, and nothing else
  // (its handler is the only one registered there).
  if (local != (id == am_local_regions))
    return UCS_OK;
  // Before HELLO / HELLO_ACK the peer may say nothing else (its same-host
  // keys travel beside them, on their own endpoint).
  if (p->state != peer_state::connected && id != am_hello && id != am_hello_ack
      && id != am_bye && id != am_local_regions) {
    refuse_peer(*p, rejection::malformed,
                "active message " + std::to_string(id) + " before the connection was set up");
    return UCS_OK;
  }
  if (rndv && id != am_message)
    return UCS_OK; // control payloads are small; never rendezvous
  reader rd{static_cast<const std::byte*>(data), length};
  switch (id) {
    case am_hello:
      on_hello(*p, rd);
      break;
    case am_hello_ack:
      on_hello_ack(*p, rd);
      break;
    case am_region:
      decode_region(*p, rd);
      break;
    case am_message:
      on_message_am(*p, header, header_length, data, length, rndv);
      break;
    case am_batch:
      on_batch(*p, rd);
      break;
    case am_bye:
      on_bye(*p);
      break;
    case am_kv_batch:
      on_kv_batch(*p, rd);
      break;
    case am_kv_ack:
      on_kv_ack(*p, rd);
      break;
    case am_kv_acks:
      on_kv_acks(*p, rd);
      break;
    case am_local_regions:
      on_local_regions(*p, rd);
      break;
    default:
      break;
  }
  return UCS_OK;
}

void ucx_core::on_message_am(peer& p, const void* header, size_t header_length, void* data,
                             size_t length, bool rndv) {
  std::string actor(static_cast<const char*>(header), header_length);
  if (rndv) {
    auto* r = new rndv_recv{this, p.id, std::move(actor), std::vector<std::byte>(length)};
    ucp_request_param_t rp{};
    rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    rp.cb.recv_am = &ucx_core::on_rndv_done;
    rp.user_data = r;
    auto* req = ucp_am_recv_data_nbx(worker_, data, r->data.data(), length, &rp);
    if (req == nullptr) {
      deliver(r->from, std::move(r->actor), std::move(r->data));
      delete r;
    } else if (UCS_PTR_IS_ERR(req)) {
      delete r;
    }
    return;
  }
  auto* b = static_cast<const std::byte*>(data);
  deliver(p.id, std::move(actor), std::vector<std::byte>(b, b + length));
}

void ucx_core::on_rndv_done(void* request, ucs_status_t status, size_t, void* user_data) {
  auto* r = static_cast<rndv_recv*>(user_data);
  ucp_request_free(request);
  if (status == UCS_OK)
    r->self->deliver(r->from, std::move(r->actor), std::move(r->data));
  delete r;
}

void ucx_core::deliver(peer_id from, std::string actor, std::vector<std::byte> frame) {
  auto it = peers_.find(from);
  if (shutting_down_ || it == peers_.end() || it->second.state != peer_state::connected)
    return;
  if (auto* h = handler_.load())
    h->on_message(from, message{std::move(actor), std::move(frame)});
}

} // namespace tessera::transport::detail
