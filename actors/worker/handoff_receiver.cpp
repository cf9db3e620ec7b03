#include "actors/worker/handoff_receiver.hpp"

#include <algorithm>
#include <utility>

#include "engine/engine_errc.hpp"

namespace tessera::actors {

using engine::engine_errc;
using engine::make_engine_error;

namespace {

/// The first decode step's context of hand-off `h`: the exported sequence
/// (prompt and the prefill's token), or without one the prompt and a token.
int64_t decode_context(const transport::wire::request_handoff& h) {
  if (h.kv)
    return static_cast<int64_t>(h.kv->tokens.size());
  return static_cast<int64_t>(h.request.prompt.size()) + 1;
}

} // namespace

handoff_receiver::handoff_receiver(std::string name, std::chrono::milliseconds timeout)
  : name_(std::move(name)), timeout_(timeout) {}

bool handoff_receiver::holds(uint64_t id) const {
  return grants_.contains(id)
         || std::any_of(waiting_.begin(), waiting_.end(), [id](const waiter& w) { return w.handoff.request.id == id; });
}

bool handoff_receiver::try_grant(waiter& w, clock::time_point now, const reserve_fn& reserve,
                                 std::vector<answer>& out) {
  auto grant = reserve(w.handoff);
  if (!grant && grant.error() == engine_errc::no_free_blocks)
    return false;
  if (grant) {
    const auto id = w.handoff.request.id;
    auto& g = grants_[id];
    g.grant = *grant;
    g.reply_to = w.handoff.reply_to;
    if (w.handoff.kv)
      g.tokens = w.handoff.kv->tokens;
    g.cache_salt = w.handoff.request.cache_salt;
    g.max_tokens = w.handoff.request.params.max_tokens;
    g.context = decode_context(w.handoff);
    g.deadline = now + timeout_;
  }
  out.push_back({w.ticket, std::move(grant)});
  return true;
}

std::vector<handoff_receiver::answer> handoff_receiver::offered(transport::wire::request_handoff h, uint64_t ticket,
                                                                clock::time_point now, const reserve_fn& reserve) {
  std::vector<answer> out;
  const auto id = h.request.id;
  if (holds(id)) {
    // A duplicate (the wire may deliver a message twice): the first stands.
    out.push_back({ticket, make_engine_error(engine_errc::unknown_request,
                                             "worker " + name_ + " already holds a hand-off of request "
                                               + std::to_string(id))});
    return out;
  }
  waiter w{std::move(h), ticket, now + timeout_};
  // Behind others that wait, it waits too: first come, first served.
  if (waiting_.empty() && try_grant(w, now, reserve, out))
    return out;
  waiting_.push_back(std::move(w));
  return out;
}

std::vector<handoff_receiver::answer> handoff_receiver::retry(clock::time_point now, const reserve_fn& reserve) {
  std::vector<answer> out;
  while (!waiting_.empty()) {
    auto& w = waiting_.front();
    if (now > w.deadline) {
      out.push_back({w.ticket, make_engine_error(engine_errc::no_free_blocks,
                                                 "worker " + name_ + " freed too few KV blocks for request "
                                                   + std::to_string(w.handoff.request.id)
                                                   + " within the hand-off timeout")});
      waiting_.pop_front();
      continue;
    }
    if (!try_grant(w, now, reserve, out))
      break;
    waiting_.pop_front();
  }
  return out;
}

caf::expected<handoff_receiver::granted> handoff_receiver::commit(uint64_t id) {
  auto it = grants_.find(id);
  if (it == grants_.end()) {
    std::string why = "worker " + name_ + " granted no hand-off for request " + std::to_string(id);
    auto e = std::find_if(ended_.rbegin(), ended_.rend(), [id](const auto& x) { return x.first == id; });
    if (e != ended_.rend())
      why += " (its grant ended: " + e->second + ")";
    return make_engine_error(engine_errc::unknown_request, std::move(why));
  }
  auto g = std::move(it->second);
  grants_.erase(it);
  return g;
}

handoff_receiver::cancelled handoff_receiver::cancel(uint64_t id, const std::string& reason) {
  cancelled c;
  for (auto w = waiting_.begin(); w != waiting_.end(); ++w)
    if (w->handoff.request.id == id) {
      c.answers.push_back({w->ticket, make_engine_error(engine_errc::unknown_request, "request " + std::to_string(id)
                                                                                         + " was cancelled: " + reason)});
      waiting_.erase(w);
      break;
    }
  if (grants_.erase(id) > 0) {
    c.cancel_import = true;
    remember_end(id, "cancelled: " + reason);
  }
  return c;
}

bool handoff_receiver::expire(uint64_t id, clock::time_point now) {
  auto it = grants_.find(id);
  if (it == grants_.end() || now < it->second.deadline)
    return false;
  grants_.erase(it);
  remember_end(id, "no commit within the hand-off timeout");
  return true;
}

std::vector<handoff_receiver::granted> handoff_receiver::fail_all(const std::string& why,
                                                                  std::vector<answer>& answers) {
  for (auto& w : waiting_) // the prefill side tells the client
    answers.push_back({w.ticket, make_engine_error(engine_errc::device_error, why)});
  waiting_.clear();
  std::vector<granted> held;
  for (auto& [id, g] : grants_) {
    remember_end(id, why);
    held.push_back(std::move(g));
  }
  grants_.clear();
  return held;
}

double handoff_receiver::outstanding(const engine::model_units& u) const {
  // The first token came from the prefill worker: the decode makes the
  // rest, the first of them after the prompt and that token.
  auto decode = [&u](int64_t context, int32_t max_tokens) {
    return u.decode(context, std::max(0, max_tokens - 1)) + u.per_request;
  };
  double sum = 0;
  for (const auto& [id, g] : grants_)
    sum += decode(g.context, g.max_tokens);
  for (const auto& w : waiting_)
    sum += decode(decode_context(w.handoff), w.handoff.request.params.max_tokens);
  return sum;
}

void handoff_receiver::remember_end(uint64_t id, std::string why) {
  ended_.emplace_back(id, std::move(why));
  if (ended_.size() > ended_memory)
    ended_.pop_front();
}

} // namespace tessera::actors
