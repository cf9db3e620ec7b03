#pragma once
/// @file
/// CPU use as Linux's /proc reports it: how idle the machine is (to start a
/// benchmark round on quiet cores) and how much CPU a process used (to see
/// whether a transport's progress threads sleep when idle).

#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tessera::bench {

/// Share of time (percent, all cores) the CPUs were idle or waiting for I/O
/// over `window`; blocks for `window`. 0 where /proc/stat cannot be read.
[[nodiscard]] double cpu_idle_pct(std::chrono::milliseconds window);

/// The machine's CPU counters at one moment (/proc/stat's first line).
struct cpu_sample {
  uint64_t total = 0; // all jiffies
  uint64_t idle = 0;  // idle + iowait jiffies
};

/// Now's counters (zeros where /proc/stat cannot be read).
[[nodiscard]] cpu_sample cpu_sample_now();

/// Share (0..1, all cores) of the time between `a` and `b` the CPUs were
/// busy; 0 when no time passed.
[[nodiscard]] double cpu_busy_share(const cpu_sample& a, const cpu_sample& b);

/// User + system clock ticks in one line of /proc/<pid>/stat (fields 14
/// and 15, counted past the parenthesised command name, which may hold
/// spaces and parentheses); nullopt for a line too short.
[[nodiscard]] std::optional<uint64_t> stat_line_cpu_ticks(std::string_view line);

/// CPU seconds (user + system) process `pid` used so far (0: this
/// process); nullopt where /proc cannot tell (e.g. the process is gone).
[[nodiscard]] std::optional<double> process_cpu_seconds(int pid);

} // namespace tessera::bench
