// ucx_core's rendezvous KV path (protocol in ucx_kv_am.hpp): the sender's
// notice, runs and wait for the ack; the receiver's checks, receives into
// the destination region and batch bookkeeping.

#include "transport/ucx/ucx_core.hpp"

#include <spdlog/spdlog.h>

#include <cstring>

namespace tessera::transport::detail {

namespace {

// user_data of a rendezvous receive: looked up again by ids when it
// completes (the peer may have failed meanwhile).
struct kv_recv {
  ucx_core* self;
  peer_id from;
  uint64_t seq;
};

} // namespace

// --- sending ---

void ucx_core::start_rndv_transfer(peer& p, const std::shared_ptr<transfer_batch>& b,
                                   std::vector<kv_run> runs, const completion& done) {
  auto* op = new_op(p.id, done);
  op->batch = b;
  op->kv_seq = next_kv_seq_++;
  writer w;
  w.out.reserve(24 + b->blocks.size() * block_copy_bytes);
  encode_batch_notice(w, kv_batch_notice{op->kv_seq, static_cast<uint32_t>(runs.size()), *b});
  // A notice that fits rides in run 0's header (a folded batch,
  // ucx_kv_am.hpp); a larger one goes first, eager on the same endpoint:
  // the runs follow it on the active-message lane, so the receiver
  // normally knows the batch before its first run (it copes either way).
  const bool folded = w.out.size() <= kv_fold_max_;
  if (!folded)
    am_send(p, am_kv_batch, {}, std::move(w.out), {});
  ++op->outstanding; // the ack
  kv_waiting_[op->kv_seq] = op;
  ++op->outstanding; // held until every run is posted
  // Headers stay alive until each send completed (UCX 1.13 reads them
  // until then); one buffer for all, never resized after this.
  // Each run's header: the receiver's session for us, then the block
  // header (run 0's of a folded batch then the notice).
  constexpr size_t hdr_bytes = session_bytes + kv_block_header_bytes;
  const size_t notice_bytes = folded ? w.out.size() : 0;
  op->header.resize(runs.size() * hdr_bytes + notice_bytes);
  if (folded)
    kv_folded_sent_.fetch_add(1, std::memory_order_relaxed);
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto& r = runs[i];
    const size_t len = i == 0 ? hdr_bytes + notice_bytes : hdr_bytes;
    auto* hdr = op->header.data() + (i == 0 ? 0 : i * hdr_bytes + notice_bytes);
    std::memcpy(hdr, &p.peer_session, session_bytes);
    const kv_block_header bh{op->kv_seq, static_cast<uint32_t>(i), r.dst, r.dst_offset, r.size};
    if (i == 0 && folded)
      encode_folded_header(bh, w.out, hdr + session_bytes);
    else
      encode_block_header(bh, hdr + session_bytes);
    const auto& src = regions_.at(r.src);
    ucp_request_param_t rp{};
    rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA
                      | UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_MEMH;
    // Up to kv_eager_max_bytes eager (UCX sends the run in segments with
    // no handshake; the receiver copies it from UCX's buffer into the
    // region after the same checks); larger runs by rendezvous (the data
    // goes from the registered source region straight into the peer's
    // region once it accepted the run). Forced either way: UCX's own
    // choice would differ from run to run and from host to host.
    rp.flags = r.size <= kv_eager_max_ ? UCP_AM_SEND_FLAG_EAGER : UCP_AM_SEND_FLAG_RNDV;
    rp.cb.send = &ucx_core::on_kv_send_done;
    rp.user_data = op;
    rp.memh = src.memh;
    auto* req = ucp_am_send_nbx(p.ep, am_kv_block, hdr, len,
                                src.memory.data() + r.src_offset, r.size, &rp);
    if (!op->hold(req))
      break;
  }
  --op->outstanding;
  if (op->status != UCS_OK) {
    // The receiver never completes this batch: stop waiting for its ack.
    kv_waiting_.erase(op->kv_seq);
    --op->outstanding;
    finish_op(op, status_error(op, op->status));
  }
  kv_maybe_done(op);
}

void ucx_core::on_kv_send_done(void* request, ucs_status_t status, void* user_data) {
  auto* op = static_cast<pending_op*>(user_data);
  auto* self = op->self;
  ucp_request_free(request);
  --op->outstanding;
  if (status == UCS_OK) {
    self->note_progress(op->peer);
  } else {
    if (op->status == UCS_OK)
      op->status = status;
    // Fail at once rather than wait for an ack that may never come.
    self->finish_op(op, self->status_error(op, status));
  }
  self->kv_maybe_done(op);
}

void ucx_core::kv_maybe_done(pending_op* op) {
  if (op->outstanding > 0)
    return;
  finish_op(op, op->status == UCS_OK ? caf::error{} : status_error(op, op->status));
  release_op(op);
}

void ucx_core::on_kv_ack(peer& p, reader& rd) {
  auto ack = decode_batch_ack(rd);
  if (!ack) {
    spdlog::error("ucx: malformed KV batch ack from peer {} dropped", p.id);
    return;
  }
  kv_acked(p, ack->seq, ack->ok, ack->why);
}

void ucx_core::on_kv_acks(peer& p, reader& rd) {
  auto seqs = decode_landed_acks(rd);
  if (!seqs) {
    spdlog::error("ucx: malformed KV batch acks from peer {} dropped", p.id);
    return;
  }
  for (auto seq : *seqs)
    kv_acked(p, seq, true, {});
}

void ucx_core::kv_acked(peer& p, uint64_t seq, bool ok, const std::string& why) {
  auto it = kv_waiting_.find(seq);
  if (it == kv_waiting_.end() || it->second->peer != p.id)
    return; // failed (and forgotten) already, or not ours
  auto* op = it->second;
  kv_waiting_.erase(it);
  --op->outstanding;
  if (!ok)
    finish_op(op, make_transport_error(transport_errc::invalid_message,
                                       "ucx: peer rejected batch "
                                         + std::to_string(op->batch->batch_id) + ": " + why));
  kv_maybe_done(op);
}

void ucx_core::kv_flush_acks() {
  if (ack_due_peers_.empty())
    return;
  for (auto id : ack_due_peers_) {
    auto it = peers_.find(id);
    if (it == peers_.end())
      continue;
    auto& p = it->second;
    if (p.state == peer_state::connected && !p.acks_due.empty()) {
      writer w;
      encode_landed_acks(w, p.acks_due);
      am_send(p, am_kv_acks, {}, std::move(w.out), {});
    }
    p.acks_due.clear();
  }
  ack_due_peers_.clear();
}

void ucx_core::kv_forget_peer(peer_id id) {
  std::vector<pending_op*> forgotten;
  for (auto it = kv_waiting_.begin(); it != kv_waiting_.end();) {
    if (it->second->peer == id) {
      forgotten.push_back(it->second);
      it = kv_waiting_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto* op : forgotten) {
    --op->outstanding;
    release_op(op); // its sends, if any are left, complete with an error
  }
}

// --- receiving ---

void ucx_core::on_kv_batch(peer& p, reader& rd) {
  auto n = decode_batch_notice(rd);
  if (!n) {
    rejected_blocks_.fetch_add(1);
    spdlog::error("ucx: malformed KV batch notice from peer {} dropped", p.id);
    return;
  }
  kv_take_notice(p, std::move(*n));
}

bool ucx_core::kv_take_notice(peer& p, kv_batch_notice&& n) {
  if (p.kv_in.size() >= max_peer_kv_batches && !p.kv_in.contains(n.seq)) {
    refuse_peer(p, rejection::not_granted,
                "over " + std::to_string(max_peer_kv_batches) + " KV batches in flight");
    return false;
  }
  auto& in = p.kv_in[n.seq];
  if (in.have_notice) {
    kv_reject(p, n.seq, "a second notice for the batch");
    return false;
  }
  in.have_notice = true;
  in.runs = n.runs;
  in.batch = std::move(n.batch);
  kv_check_complete(p, n.seq);
  return true;
}

void ucx_core::on_kv_block(peer& p, const void* header, size_t header_length, void* data,
                           size_t length, const ucp_am_recv_param_t* param) {
  const bool rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
  auto rh = decode_run_header(header, header_length);
  if (!rh) {
    // No batch to blame: count and log only. Returning without receiving
    // makes UCX release a rendezvous descriptor and complete the sender.
    rejected_blocks_.fetch_add(1);
    spdlog::error("ucx: KV block message from peer {} with a malformed header ({} bytes) dropped",
                  p.id, header_length);
    return;
  }
  const auto* h = &rh->block;
  // Every run of a batch not yet known makes its record (kv_in): bounded
  // as notices are, so runs without notices cannot grow it without end.
  if (p.kv_in.size() >= max_peer_kv_batches && !p.kv_in.contains(h->seq))
    return refuse_peer(p, rejection::not_granted,
                       "over " + std::to_string(max_peer_kv_batches) + " KV batches in flight");
  if (rh->folded) {
    // The batch's notice, taken before its run is checked, as if it had
    // come in its own am_kv_batch just before.
    if (!rh->notice) {
      kv_reject(p, h->seq, "run " + std::to_string(h->run) + ": a malformed folded notice");
      return;
    }
    kv_folded_received_.fetch_add(1, std::memory_order_relaxed);
    if (!kv_take_notice(p, std::move(*rh->notice)))
      return;
  }
  auto region = regions_.find(h->dst);
  auto why = check_block_target(*h, region == regions_.end()
                                      ? std::nullopt
                                      : std::optional<uint64_t>{region->second.memory.size()},
                                length);
  if (!why.empty()) {
    kv_reject(p, h->seq, "run " + std::to_string(h->run) + ": " + why);
    return;
  }
  if (opts_.grants_only && !is_granted(p, h->dst, h->dst_offset, length)) {
    // Counted as a refusal too: only a faulty or hostile peer writes
    // where it was not granted.
    count_rejection(rejection::not_granted,
                    "peer " + std::to_string(p.id) + " ('" + p.identity + "')",
                    "KV run into region " + std::to_string(h->dst) + " ["
                      + std::to_string(h->dst_offset) + ", +" + std::to_string(length)
                      + ") outside its grants");
    kv_reject(p, h->seq, "run " + std::to_string(h->run) + ": not granted");
    return;
  }
  auto* dst = region->second.memory.data() + h->dst_offset;
  if (!rndv) {
    // Eager (ucx_options::kv_eager_max_bytes): the whole run is here now,
    // in UCX's buffer, valid until we return; checked as strictly as a
    // rendezvous run, above.
    std::memcpy(dst, data, length);
    eager_runs_received_.fetch_add(1, std::memory_order_relaxed);
    kv_landed(p.id, h->seq);
    return;
  }
  auto* r = new kv_recv{this, p.id, h->seq};
  ucp_request_param_t rp{};
  rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA
                    | UCP_OP_ATTR_FIELD_MEMH;
  rp.cb.recv_am = &ucx_core::on_kv_recv_done;
  rp.user_data = r;
  rp.memh = region->second.memh;
  auto* req = ucp_am_recv_data_nbx(worker_, data, dst, length, &rp);
  if (req == nullptr) {
    delete r;
    kv_landed(p.id, h->seq);
  } else if (UCS_PTR_IS_ERR(req)) {
    delete r;
    kv_reject(p, h->seq,
              "run " + std::to_string(h->run) + ": receive failed: "
                + ucs_status_string(UCS_PTR_STATUS(req)));
  }
}

void ucx_core::on_kv_recv_done(void* request, ucs_status_t status, size_t, void* user_data) {
  auto* r = static_cast<kv_recv*>(user_data);
  ucp_request_free(request);
  auto* self = r->self;
  auto it = self->peers_.find(r->from);
  if (it != self->peers_.end() && it->second.state == peer_state::connected) {
    if (status == UCS_OK)
      self->kv_landed(r->from, r->seq);
    else
      self->kv_reject(it->second, r->seq,
                      std::string{"receive failed: "} + ucs_status_string(status));
  }
  delete r;
}

void ucx_core::kv_landed(peer_id from, uint64_t seq) {
  auto it = peers_.find(from);
  if (it == peers_.end() || it->second.state != peer_state::connected)
    return;
  it->second.last_progress = clock::now();
  ++it->second.kv_in[seq].landed;
  kv_check_complete(it->second, seq);
}

void ucx_core::kv_reject(peer& p, uint64_t seq, const std::string& why) {
  rejected_blocks_.fetch_add(1);
  if (auto permit = kv_reject_log_.admit())
    spdlog::error("ucx: rendezvous KV batch (sequence {}) from peer {}: {}; dropped{}", seq, p.id,
                  why,
                  permit.suppressed == 0
                    ? std::string{}
                    : " (" + std::to_string(permit.suppressed) + " more dropped runs not logged)");
  auto& in = p.kv_in[seq];
  ++in.dropped;
  if (!in.rejected) {
    in.rejected = true;
    writer w;
    encode_batch_ack(w, kv_batch_ack{seq, false, why});
    am_send(p, am_kv_ack, {}, std::move(w.out), {});
  }
  kv_check_complete(p, seq);
}

void ucx_core::kv_check_complete(peer& p, uint64_t seq) {
  auto it = p.kv_in.find(seq);
  if (it == p.kv_in.end())
    return;
  auto& in = it->second;
  if (!in.have_notice || in.landed + in.dropped < in.runs)
    return;
  if (!in.rejected) {
    if (auto* h = handler_.load())
      h->on_blocks_arrived(p.id, in.batch);
    if (p.acks_due.empty())
      ack_due_peers_.push_back(p.id);
    p.acks_due.push_back(seq);
  }
  p.kv_in.erase(it);
}

} // namespace tessera::transport::detail
