#include "actors/router/worker_health.hpp"

#include <algorithm>
#include <cstdio>

namespace tessera::actors {

namespace {

/// "1.6 s" (one decimal): reasons are read by people.
std::string seconds_text(std::chrono::steady_clock::duration d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", std::chrono::duration<double>(d).count());
  return buf;
}

} // namespace

void worker_health::heard(clock::time_point now) {
  last_seen_ = std::max(last_seen_, now);
  down_node_.reset();
}

void worker_health::node_down(const std::string& node, clock::time_point now) {
  down_node_ = node;
  down_since_ = now;
}

bool worker_health::canary_due(clock::time_point now, const health_options& opts) const {
  if (opts.canary_interval.count() <= 0 || canary_id_ || down_node_)
    return false;
  return !canary_ever_sent_ || now - canary_sent_at_ >= opts.canary_interval;
}

void worker_health::canary_sent(uint64_t id, clock::time_point now) {
  canary_id_ = id;
  canary_sent_at_ = now;
  canary_ever_sent_ = true;
}

bool worker_health::canary_passed(uint64_t id, clock::time_point now) {
  if (canary_id_ != id)
    return false;
  canary_id_.reset();
  canary_error_.clear();
  canary_latency_ = std::chrono::duration_cast<std::chrono::milliseconds>(now - canary_sent_at_);
  return true;
}

bool worker_health::canary_failed(uint64_t id, std::string why, clock::time_point /*now*/) {
  if (canary_id_ != id)
    return false;
  canary_id_.reset();
  canary_error_ = why.empty() ? std::string{"unknown error"} : std::move(why);
  canary_error_late_ = false;
  return true;
}

bool worker_health::canary_timed_out(uint64_t id, std::string why, clock::time_point now) {
  if (!canary_failed(id, std::move(why), now))
    return false;
  canary_error_late_ = true;
  return true;
}

std::optional<uint64_t> worker_health::expire_canary(clock::time_point now, const health_options& opts) {
  if (!canary_id_ || now - canary_sent_at_ <= opts.canary_timeout)
    return std::nullopt;
  const auto id = *canary_id_;
  canary_id_.reset();
  canary_error_ = "no answer within " + seconds_text(opts.canary_timeout);
  canary_error_late_ = true;
  return id;
}

health_verdict worker_health::check(clock::time_point now, const health_options& opts) const {
  if (down_node_)
    return {false, "node '" + *down_node_ + "' disconnected " + seconds_text(now - down_since_) + " ago",
            health_fault::node_down};
  const bool failed = !canary_error_.empty() && !canary_error_late_;
  // A lateness reason comes first; a canary's error, if there is one, is
  // named after it, since it is what keeps the worker from panic routing.
  auto late = [&](std::string reason) -> health_verdict {
    if (failed)
      return {false, reason + "; health canary failed: " + canary_error_, health_fault::canary_failed};
    return {false, std::move(reason), health_fault::late};
  };
  if (now - last_seen_ > opts.heartbeat_timeout)
    return late("no heartbeat for " + seconds_text(now - last_seen_) + " (timeout " +
                seconds_text(opts.heartbeat_timeout) + ")");
  if (canary_id_ && now - canary_sent_at_ > opts.canary_timeout)
    return late("health canary unanswered for " + seconds_text(now - canary_sent_at_) + " (timeout " +
                seconds_text(opts.canary_timeout) + ")");
  if (!canary_error_.empty())
    return {false, "health canary failed: " + canary_error_,
            canary_error_late_ ? health_fault::late : health_fault::canary_failed};
  return {true, {}, health_fault::none};
}

const char* to_string(health_fault f) {
  switch (f) {
    case health_fault::none: return "none";
    case health_fault::late: return "late";
    case health_fault::canary_failed: return "canary_failed";
    case health_fault::node_down: return "node_down";
  }
  return "unknown";
}

void set_health(worker_load& w, const health_verdict& v, bool drained) {
  w.healthy = v.healthy && !drained;
  w.late = v.fault == health_fault::late && !drained;
}

const char* to_string(serving_status s) {
  switch (s) {
    case serving_status::starting: return "starting";
    case serving_status::ok: return "ok";
    case serving_status::degraded: return "degraded";
    case serving_status::unavailable: return "unavailable";
  }
  return "unknown";
}

serving_health assess_serving(std::span<const worker_status> workers) {
  serving_health out;
  if (workers.empty()) {
    out.reason = "no worker has joined yet";
    return out;
  }
  std::string unhealthy;
  bool can_decode = false;
  bool prefill_role = false;
  bool prefill_healthy = false;
  for (const auto& w : workers) {
    prefill_role |= w.role == worker_role::prefill;
    if (w.healthy) {
      ++out.healthy;
      can_decode |= w.role != worker_role::prefill;
      prefill_healthy |= w.role == worker_role::prefill;
      continue;
    }
    if (!unhealthy.empty())
      unhealthy += "; ";
    unhealthy += w.name + " on node '" + w.node + "' (" + to_string(w.role) + "): " + w.reason;
  }
  out.ready = can_decode;
  if (!out.ready) {
    out.status = serving_status::unavailable;
    out.reason = "no healthy worker can decode";
    if (!unhealthy.empty())
      out.reason += ": " + unhealthy;
  } else if (out.healthy < workers.size()) {
    out.status = serving_status::degraded;
    out.reason = unhealthy;
    if (prefill_role && !prefill_healthy)
      out.reason += " (no prefill worker: decode workers prefill their own prompts)";
  } else {
    out.status = serving_status::ok;
  }
  return out;
}

} // namespace tessera::actors
