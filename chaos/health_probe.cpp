#include "chaos/health_probe.hpp"

#include <nlohmann/json.hpp>

namespace tessera::chaos {

health_sample poll_health(const bench::http_endpoint& ep, const std::string& path) {
  health_sample s;
  auto reply = bench::http_fetch(ep, "GET", path, "", std::chrono::milliseconds{1000});
  if (!reply)
    return s;
  s.http_status = reply->status;
  auto j = nlohmann::json::parse(reply->body, nullptr, false);
  if (j.is_object()) {
    if (auto it = j.find("status"); it != j.end() && it->is_string())
      s.status = it->get<std::string>();
    if (auto it = j.find("workers"); it != j.end() && it->is_number_integer())
      s.workers = it->get<int>();
  }
  return s;
}

std::string pick_health_path(const bench::http_endpoint& ep) {
  auto reply = bench::http_fetch(ep, "GET", "/ready", "", std::chrono::milliseconds{2000});
  return reply && reply->status != 404 ? "/ready" : "/health";
}

health_probe::health_probe(bench::http_endpoint ep, std::string path, clock::time_point t0,
                           std::chrono::milliseconds period)
  : ep_(std::move(ep)), path_(std::move(path)), t0_(t0), period_(period), thread_([this] { run(); }) {
}

health_probe::~health_probe() {
  (void) stop();
}

std::vector<health_sample> health_probe::stop() {
  stop_ = true;
  if (thread_.joinable())
    thread_.join();
  std::lock_guard guard{mutex_};
  return changes_;
}

void health_probe::run() {
  auto next = clock::now();
  while (!stop_) {
    // Stamped when the answer came (or the poll gave up): when the harness
    // could first know, and never before a fault that the poll saw.
    auto s = poll_health(ep_, path_);
    s.t_s = std::chrono::duration<double>(clock::now() - t0_).count();
    {
      std::lock_guard guard{mutex_};
      if (changes_.empty() || !same_health(changes_.back(), s))
        changes_.push_back(std::move(s));
    }
    next += period_;
    const auto now = clock::now();
    if (next < now)
      next = now; // a slow poll (a hung frontend) does not make the next ones burst
    while (!stop_ && clock::now() < next)
      std::this_thread::sleep_for(std::min<clock::duration>(next - clock::now(), std::chrono::milliseconds{20}));
  }
}

} // namespace tessera::chaos
