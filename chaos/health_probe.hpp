#pragma once
/// @file
/// Polls the frontend's health endpoint (GET /ready, or /health on a
/// frontend without it) every 100 ms on a thread of its own and keeps the
/// changes (HTTP status, the body's "status" and "workers"), stamped in
/// seconds since a given start when each answer came (a hung frontend's
/// poll gives up after 1 s), for the time to detect each fault.

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench/http_client.hpp"
#include "chaos/chaos_report.hpp"

namespace tessera::chaos {

/// One poll of `path` on `ep` (timeout 1 s): status 0 when there was no
/// answer. `t_s` is left 0.
[[nodiscard]] health_sample poll_health(const bench::http_endpoint& ep, const std::string& path);

/// "/ready" if the frontend at `ep` answers it (any status but 404), else
/// "/health".
[[nodiscard]] std::string pick_health_path(const bench::http_endpoint& ep);

class health_probe {
public:
  using clock = std::chrono::steady_clock;

  /// Starts polling `path` on `ep` every `period`; times are since `t0`.
  health_probe(bench::http_endpoint ep, std::string path, clock::time_point t0,
               std::chrono::milliseconds period = std::chrono::milliseconds{100});
  health_probe(const health_probe&) = delete;
  health_probe& operator=(const health_probe&) = delete;
  /// Stops polling (stop()).
  ~health_probe();

  /// Stops polling and returns the first sample and every change after it.
  std::vector<health_sample> stop();

private:
  void run();

  bench::http_endpoint ep_;
  std::string path_;
  clock::time_point t0_;
  std::chrono::milliseconds period_;
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::vector<health_sample> changes_;
  std::thread thread_;
};

} // namespace tessera::chaos
