#include "bench/cpu_usage.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <utility>

namespace tessera::bench {

namespace {

// (all jiffies, idle + iowait jiffies) from /proc/stat's first line.
std::pair<uint64_t, uint64_t> cpu_jiffies() {
  std::ifstream f{"/proc/stat"};
  std::string cpu;
  uint64_t v[8] = {};
  f >> cpu;
  uint64_t total = 0;
  for (auto& x : v) {
    f >> x;
    total += x;
  }
  return {total, v[3] + v[4]};
}

} // namespace

cpu_sample cpu_sample_now() {
  const auto [total, idle] = cpu_jiffies();
  return {total, idle};
}

double cpu_busy_share(const cpu_sample& a, const cpu_sample& b) {
  // Signed: on NOHZ kernels the idle counters can step backwards a little.
  const double total = static_cast<double>(b.total) - static_cast<double>(a.total);
  const double idle = static_cast<double>(b.idle) - static_cast<double>(a.idle);
  return total > 0 ? std::clamp(1.0 - idle / total, 0.0, 1.0) : 0;
}

double cpu_idle_pct(std::chrono::milliseconds window) {
  const auto a = cpu_sample_now();
  std::this_thread::sleep_for(window); // a measuring window, not a wait for an event
  const auto b = cpu_sample_now();
  return a.total < b.total ? 100.0 * (1.0 - cpu_busy_share(a, b)) : 0;
}

std::optional<uint64_t> stat_line_cpu_ticks(std::string_view line) {
  const auto close = line.rfind(')');
  if (close == std::string_view::npos || close + 2 > line.size())
    return std::nullopt;
  // After "pid (comm) " comes field 3 (state); utime is 14, stime 15.
  std::istringstream in{std::string{line.substr(close + 2)}};
  std::string field;
  uint64_t utime = 0, stime = 0;
  for (int i = 3; i <= 15; ++i) {
    if (!(in >> field))
      return std::nullopt;
    if (i == 14 || i == 15) {
      char* end = nullptr;
      const uint64_t v = std::strtoull(field.c_str(), &end, 10);
      if (*end != '\0')
        return std::nullopt;
      (i == 14 ? utime : stime) = v;
    }
  }
  return utime + stime;
}

std::optional<double> process_cpu_seconds(int pid) {
  std::ifstream f{pid == 0 ? std::string{"/proc/self/stat"}
                           : "/proc/" + std::to_string(pid) + "/stat"};
  std::string line;
  if (!std::getline(f, line))
    return std::nullopt;
  auto ticks = stat_line_cpu_ticks(line);
  if (!ticks)
    return std::nullopt;
  return static_cast<double>(*ticks) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

} // namespace tessera::bench
