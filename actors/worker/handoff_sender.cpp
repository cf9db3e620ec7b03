#include "actors/worker/handoff_sender.hpp"

namespace tessera::actors {

bool handoff_sender::started(uint64_t id, transport::wire::actor_address decode_at,
                             transport::wire::actor_address reply_to) {
  return handoffs_.try_emplace(id, handoff{std::move(decode_at), std::move(reply_to)}).second;
}

handoff_sender::effects handoff_sender::base(uint64_t id, const handoff& h) {
  effects fx;
  fx.id = id;
  fx.decode_at = h.decode_at;
  fx.reply_to = h.reply_to;
  return fx;
}

handoff_sender::effects handoff_sender::end(uint64_t id) {
  auto node = handoffs_.extract(id);
  auto fx = base(id, node.mapped());
  fx.release = !node.mapped().released;
  if (node.mapped().cancelled)
    fx.cancel_peer = node.mapped().cancel_reason;
  return fx;
}

handoff_sender::effects handoff_sender::granted(uint64_t id) {
  auto it = handoffs_.find(id);
  if (it == handoffs_.end() || it->second.at != step::granting)
    return {};
  if (it->second.cancelled)
    return end(id);
  it->second.at = step::putting;
  auto fx = base(id, it->second);
  fx.put = true;
  return fx;
}

handoff_sender::effects handoff_sender::put_done(uint64_t id) {
  auto it = handoffs_.find(id);
  if (it == handoffs_.end() || it->second.at != step::putting)
    return {};
  if (it->second.cancelled)
    return end(id);
  auto& h = it->second;
  h.at = step::committing;
  auto fx = base(id, h);
  fx.release = !h.released;
  h.released = true;
  fx.commit = true;
  return fx;
}

handoff_sender::effects handoff_sender::committed(uint64_t id) {
  auto it = handoffs_.find(id);
  if (it == handoffs_.end() || it->second.at != step::committing)
    return {};
  auto fx = end(id);
  fx.cancel_peer.clear(); // a cancel while committing told D already
  return fx;
}

handoff_sender::effects handoff_sender::failed(uint64_t id, const std::string& error) {
  auto it = handoffs_.find(id);
  if (it == handoffs_.end())
    return {};
  const bool cancelled = it->second.cancelled;
  const bool told = cancelled && it->second.at == step::committing;
  auto fx = end(id);
  if (told)
    fx.cancel_peer.clear();
  else if (!cancelled) {
    // A cancelled request's client went away: it hears nothing more.
    fx.fail_client = "hand-off to " + fx.decode_at.actor + " on node '" + fx.decode_at.node + "' failed: " + error;
    fx.cancel_peer = "the hand-off failed";
  }
  return fx;
}

handoff_sender::effects handoff_sender::cancel(uint64_t id, const std::string& reason) {
  auto it = handoffs_.find(id);
  if (it == handoffs_.end() || it->second.cancelled)
    return {};
  auto& h = it->second;
  h.cancelled = true;
  h.cancel_reason = reason;
  auto fx = base(id, h);
  switch (h.at) {
  case step::granting: // nothing reads the blocks: free them now
    fx.release = !h.released;
    h.released = true;
    break;
  case step::putting: // the puts read the blocks: put_done frees them
    break;
  case step::committing:
    fx.cancel_peer = reason;
    break;
  }
  return fx;
}

std::vector<handoff_sender::effects> handoff_sender::fail_all(const std::string& why) {
  std::vector<effects> out;
  for (auto& [id, h] : handoffs_) {
    auto fx = base(id, h);
    fx.cancel_peer = why;
    if (!h.cancelled)
      fx.fail_client = why;
    out.push_back(std::move(fx));
  }
  handoffs_.clear();
  return out;
}

} // namespace tessera::actors
