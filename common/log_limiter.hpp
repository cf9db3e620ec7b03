#pragma once
/// @file
/// Rate limiting for log lines an outside party can cause at will (rejected
/// frames, bad requests): a flood of bad input must not become a flood of
/// log lines. Counters of those events stay exact; only the lines are cut.
///
/// One stream of similar lines:
///
///   quiet --event--> burst: the first `burst` lines are logged
///     ^                |
///     |             more events: counted, not logged; at most one line per
///     |             `interval` is logged, saying how many were left out
///     |                |
///     +--- no event for a whole `interval` (the burst is available again)

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>

namespace tessera {

/// What to do with one event's log line.
struct log_permit {
  /// Log this event's line.
  bool log = false;
  /// Lines left out since the last logged one, to be mentioned in this
  /// line (0 when none; always 0 when `log` is false).
  uint64_t suppressed = 0;

  explicit operator bool() const { return log; }
};

/// Decides which lines of one stream of similar log lines to write. The
/// first `burst` lines are logged; after that, at most one line per
/// `interval`, which reports how many lines were left out since the last
/// one. A stream with no event for a whole `interval` starts a fresh burst.
/// Lines left out at the end of a flood are reported with the next logged
/// line (there is no timer). Thread-safe: one limiter may be shared by any
/// number of threads.
class log_limiter {
public:
  /// The time source, called under the limiter's lock; tests inject a
  /// fake one.
  using clock_fn = std::function<std::chrono::steady_clock::time_point()>;

  /// Logs the first `burst` lines, then one per `interval`.
  /// Defaults: 10 lines, 10 s, std::chrono::steady_clock.
  explicit log_limiter(uint64_t burst = 10,
                       std::chrono::steady_clock::duration interval = std::chrono::seconds{10},
                       clock_fn now = {});

  /// Counts one event and says whether to log its line.
  [[nodiscard]] log_permit admit();

  /// Events counted so far, logged or not.
  [[nodiscard]] uint64_t events() const;
  /// Lines left out so far (over the limiter's life).
  [[nodiscard]] uint64_t suppressed_total() const;

private:
  const uint64_t burst_;
  const std::chrono::steady_clock::duration interval_;
  const clock_fn now_;
  mutable std::mutex mu_;
  uint64_t events_ = 0;
  uint64_t suppressed_total_ = 0;
  uint64_t burst_used_ = 0;
  uint64_t suppressed_ = 0; // since the last logged line
  bool logged_any_ = false;
  std::chrono::steady_clock::time_point last_event_;
  std::chrono::steady_clock::time_point last_logged_;
};

} // namespace tessera
