// The worker's hand-offs, both sides: the shell that feeds handoff_sender
// and handoff_receiver and carries out what they answer.
#include "actors/worker/worker_state.hpp"

#include <algorithm>
#include <utility>

#include <spdlog/spdlog.h>

#include "actors/common/kv_handoff.hpp"
#include "common/error.hpp"

namespace tessera::actors::worker_shell {

namespace {

/// Carries out what the hand-off sender said (handoff_sender::effects),
/// except the puts and the commit, which its callers run.
void carry_out(worker_pointer self, const handoff_sender::effects& fx) {
  if (fx.release)
    (void) self->state.eng->release_request(fx.id);
  if (!fx.fail_client.empty())
    fail(self, fx.reply_to, fx.id, fx.fail_client);
  if (!fx.cancel_peer.empty())
    self->send(peer(self, fx.decode_at), cancel_atom_v, wire::request_cancel{fx.id, fx.cancel_peer});
}

void send_commit(worker_pointer self, uint64_t id, const wire::actor_address& at, wire::kv_transfer_batch d) {
  const auto& cfg = self->state.cfg;
  double bytes = 0;
  for (const auto& b : d.blocks)
    bytes += static_cast<double>(b.size_bytes);
  const auto verify = std::chrono::milliseconds{static_cast<int64_t>(1000.0 * bytes / cfg.commit_bytes_per_second)};
  const auto timeout = std::min(cfg.handoff_timeout, cfg.commit_base + verify);
  self->request(peer(self, at), timeout, commit_atom_v, std::move(d))
    .then([self, id]() { carry_out(self, self->state.sender.committed(id)); },
          [self, id](caf::error& err) { carry_out(self, self->state.sender.failed(id, error_text(err))); });
}

/// The decode side granted request `id`'s hand-off: put the blocks.
void put_blocks(worker_pointer self, uint64_t id, const engine::kv_export_blocks& src, const wire::kv_grant& grant) {
  auto& st = self->state;
  auto fx = st.sender.granted(id);
  if (!fx.put)
    return carry_out(self, fx);
  auto puts = plan_puts(*st.eng, src, st.cfg.pool_region, grant, st.next_batch++);
  if (!puts)
    return carry_out(self, st.sender.failed(id, error_text(puts.error())));
  uint64_t bytes = 0;
  for (const auto& b : puts->batch.blocks)
    bytes += b.size;
  const auto started = std::chrono::steady_clock::now();
  self->request(st.cfg.bridge, st.cfg.handoff_timeout, transfer_atom_v, fx.decode_at.node, puts->batch)
    .then(
      [self, id, bytes, started, descriptor = std::move(puts->descriptor)]() {
        if (auto* m = self->state.metrics.get()) {
          m->transfer_bytes.inc(static_cast<double>(bytes));
          m->transfer_seconds.inc(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
        }
        auto fx = self->state.sender.put_done(id);
        carry_out(self, fx);
        if (fx.commit)
          send_commit(self, id, fx.decode_at, descriptor);
      },
      [self, id](caf::error& err) { carry_out(self, self->state.sender.failed(id, error_text(err))); });
}

} // namespace

/// P's side of a hand-off, after the prefill of `t` finished: export, get a
/// grant, put the blocks, commit (handoff_sender.hpp).
void start_handoff(worker_pointer self, uint64_t id, tracked t) {
  auto& st = self->state;
  if (!st.sender.started(id, t.decode_at, t.reply_to))
    return;
  auto src = st.eng->export_request_blocks(id);
  if (!src)
    return carry_out(self, st.sender.failed(id, error_text(src.error())));
  auto h = make_handoff(t.original, *src);
  h.reply_to = t.reply_to;
  self->request(peer(self, t.decode_at), st.cfg.handoff_timeout, handoff_atom_v, std::move(h))
    .then([self, id, src = std::move(*src)](wire::kv_grant& grant) { put_blocks(self, id, src, grant); },
          [self, id](caf::error& err) { carry_out(self, self->state.sender.failed(id, error_text(err))); });
}

namespace {

handoff_receiver::reserve_fn reserver(worker_state& st) {
  return [&st](const wire::request_handoff& h) { return grant_handoff(*st.eng, h, st.cfg.pool_region); };
}

/// Answers hand-offs that waited for blocks; a grant's timer starts.
void deliver(worker_pointer self, std::vector<handoff_receiver::answer> answers) {
  auto& st = self->state;
  for (auto& a : answers) {
    if (a.grant)
      self->delayed_send(self, st.cfg.handoff_timeout, expire_atom_v, a.grant->request_id);
    auto p = st.grant_promises.extract(a.ticket);
    if (p.empty())
      continue;
    if (a.grant)
      p.mapped().deliver(std::move(*a.grant));
    else
      p.mapped().deliver(a.grant.error());
  }
}

} // namespace

void grant_waiting(worker_pointer self) {
  deliver(self, self->state.receiver.retry(std::chrono::steady_clock::now(), reserver(self->state)));
}

caf::result<wire::kv_grant> on_handoff(worker_pointer self, wire::request_handoff h) {
  auto& st = self->state;
  const auto ticket = st.next_ticket++;
  auto answers = st.receiver.offered(std::move(h), ticket, std::chrono::steady_clock::now(), reserver(st));
  if (answers.empty()) { // it waits for blocks
    auto rp = self->make_response_promise<wire::kv_grant>();
    st.grant_promises.emplace(ticket, rp);
    return rp;
  }
  auto answer = std::move(answers.front().grant);
  if (!answer)
    return answer.error();
  self->delayed_send(self, st.cfg.handoff_timeout, expire_atom_v, answer->request_id);
  return std::move(*answer);
}

caf::result<void> on_commit(worker_pointer self, const wire::kv_transfer_batch& d) {
  auto& st = self->state;
  auto g = st.receiver.commit(d.request_id);
  if (!g)
    return g.error();
  if (auto err = commit_handoff(*st.eng, g->grant, d)) {
    grant_waiting(self); // its blocks are free again
    return err;
  }
  auto& t = st.requests[d.request_id] = tracked{g->reply_to, {}, {}, std::move(g->tokens), std::move(g->cache_salt)};
  // The prefill worker made the first token: the first decode here reads
  // the prompt and it.
  t.context = g->context;
  t.output_left = std::max(0, g->max_tokens - 1);
  t.units_left = st.cfg.units.decode(t.context, t.output_left) + st.cfg.units.per_request;
  t.prefilled = true;
  kick(self);
  return caf::unit;
}

void on_expire(worker_pointer self, uint64_t id) {
  auto& st = self->state;
  if (st.receiver.expire(id, std::chrono::steady_clock::now())) {
    spdlog::warn("worker {}: hand-off of request {} was granted but never committed; freed", st.cfg.name, id);
    (void) st.eng->cancel_import(id);
    grant_waiting(self);
  }
}

void cancel_handoff(worker_pointer self, uint64_t id, const std::string& reason) {
  auto& st = self->state;
  auto ended = st.receiver.cancel(id, reason);
  deliver(self, std::move(ended.answers));
  if (ended.cancel_import)
    (void) st.eng->cancel_import(id);
  carry_out(self, st.sender.cancel(id, reason));
}

void fail_handoffs(worker_pointer self, const std::string& why) {
  auto& st = self->state;
  for (const auto& fx : st.sender.fail_all(why))
    carry_out(self, fx);
  std::vector<handoff_receiver::answer> answers; // the prefill side tells the client
  for (const auto& g : st.receiver.fail_all(why, answers))
    fail(self, g.reply_to, g.grant.request_id, why);
  deliver(self, std::move(answers));
}

} // namespace tessera::actors::worker_shell
