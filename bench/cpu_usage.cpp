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

double cpu_idle_pct(std::chrono::milliseconds window) {
  const auto [t1, i1] = cpu_jiffies();
  std::this_thread::sleep_for(window); // a measuring window, not a wait for an event
  const auto [t2, i2] = cpu_jiffies();
  // Signed: on NOHZ kernels the idle counters can step backwards a little.
  const double total = static_cast<double>(t2) - static_cast<double>(t1);
  const double idle = static_cast<double>(i2) - static_cast<double>(i1);
  return total > 0 ? std::clamp(100.0 * idle / total, 0.0, 100.0) : 0;
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
