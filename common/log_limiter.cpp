#include "common/log_limiter.hpp"

#include <utility>

namespace tessera {

log_limiter::log_limiter(uint64_t burst, std::chrono::steady_clock::duration interval,
                         clock_fn now)
  : burst_(burst), interval_(interval),
    now_(now ? std::move(now) : clock_fn{[] { return std::chrono::steady_clock::now(); }}) {}

log_permit log_limiter::admit() {
  std::lock_guard lock{mu_};
  // Read under the lock, so that the events' times are in their order.
  const auto now = now_();
  // A whole interval without events ends the flood: the next lines are news.
  if (events_ > 0 && now - last_event_ >= interval_)
    burst_used_ = 0;
  ++events_;
  last_event_ = now;
  const bool in_burst = burst_used_ < burst_;
  if (in_burst || !logged_any_ || now - last_logged_ >= interval_) {
    if (in_burst)
      ++burst_used_;
    logged_any_ = true;
    last_logged_ = now;
    return {true, std::exchange(suppressed_, 0)};
  }
  ++suppressed_;
  ++suppressed_total_;
  return {};
}

uint64_t log_limiter::events() const {
  std::lock_guard lock{mu_};
  return events_;
}

uint64_t log_limiter::suppressed_total() const {
  std::lock_guard lock{mu_};
  return suppressed_total_;
}

} // namespace tessera
