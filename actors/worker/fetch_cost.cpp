#include "actors/worker/fetch_cost.hpp"

#include <algorithm>
#include <cmath>

namespace tessera::actors {

namespace {

/// Smallest answer whose time says something about bandwidth rather than
/// latency.
constexpr uint64_t bandwidth_sample_bytes = 64 * 1024;

double to_seconds(std::chrono::milliseconds d) {
  return std::chrono::duration<double>(d).count();
}

} // namespace

void fetch_cost_model::observe_fetch(const std::string& source, uint64_t bytes, double seconds) {
  if (!(seconds >= 0) || !std::isfinite(seconds))
    return;
  auto& s = sources_[source];
  s.slowest_s = std::max(seconds, s.slowest_s * opts_.tail_keep);
  s.stalled_s = 0;
  const double w = s.answers == 0 ? 1.0 : opts_.weight;
  if (bytes < bandwidth_sample_bytes) {
    s.latency_s += w * (seconds - s.latency_s);
    if (s.answers == 0)
      s.bytes_per_s = opts_.prior_bytes_per_s;
  } else {
    const double rate = static_cast<double>(bytes) / std::max(seconds - s.latency_s, 1e-6);
    s.bytes_per_s = s.answers == 0 ? rate : s.bytes_per_s + w * (rate - s.bytes_per_s);
    if (s.answers == 0)
      s.latency_s = opts_.prior_latency_s;
  }
  ++s.answers;
  s.skips = 0;
}

void fetch_cost_model::observe_timeout(const std::string& source, double seconds) {
  if (!(seconds >= 0) || !std::isfinite(seconds))
    return;
  auto& s = sources_[source];
  s.stalled_s = std::max(s.stalled_s, seconds);
}

void fetch_cost_model::observe_compute(uint64_t tokens, double seconds) {
  if (!(seconds > 0))
    return;
  constexpr double keep = 0.98; // about the last fifty steps
  tokens_ = keep * tokens_ + static_cast<double>(tokens);
  compute_seconds_ = keep * compute_seconds_ + seconds;
}

fetch_plan fetch_cost_model::plan(const std::string& source, uint64_t bytes, int64_t tokens,
                                  std::optional<double> backend_compute_s,
                                  std::optional<double> backend_load_s) {
  fetch_plan p;
  const auto it = sources_.find(source);
  const bool answered = it != sources_.end() && it->second.answers > 0;
  const double stalled = it != sources_.end() ? it->second.stalled_s : 0.0;
  const bool known = answered || stalled > 0;
  const double bw = answered ? it->second.bytes_per_s : opts_.prior_bytes_per_s;
  const double latency = answered ? it->second.latency_s : opts_.prior_latency_s;
  const double answered_fetch_s = latency + static_cast<double>(bytes) / std::max(bw, 1.0);
  p.fetch_s = std::max(answered_fetch_s, stalled);
  if (backend_compute_s)
    p.compute_s = *backend_compute_s;
  else if (tokens_ > 0)
    p.compute_s = static_cast<double>(tokens) * compute_seconds_ / tokens_;
  // Modelled against modelled where the backend models both.
  if (backend_compute_s && backend_load_s)
    p.modelled_fetch_s = *backend_load_s;
  const double fetch_s = p.modelled_fetch_s.value_or(p.fetch_s);
  const double min_skip = to_seconds(opts_.min_skip_fetch);
  if (known && p.compute_s && fetch_s > opts_.skip_ratio * *p.compute_s && fetch_s > min_skip) {
    auto& skips = it->second.skips;
    p.fetch = ++skips >= opts_.probe_every; // a probe: the store may be fast again
    if (p.fetch)
      skips = 0;
  }
  const double tail = answered ? opts_.tail_factor * it->second.slowest_s : 0.0;
  const double floor = std::clamp(tail, to_seconds(opts_.min_deadline),
                                  std::max(to_seconds(opts_.min_deadline), to_seconds(opts_.max_tail_floor)));
  const double s = floor + 4 * answered_fetch_s + 2 * p.compute_s.value_or(0.0);
  const auto ms = std::chrono::milliseconds{static_cast<int64_t>(std::min(s, 1e9) * 1e3)};
  p.deadline = std::clamp(ms, opts_.min_deadline, opts_.max_deadline);
  return p;
}

} // namespace tessera::actors
