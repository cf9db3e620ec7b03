#include "bench/server_metrics.hpp"

#include <cstdlib>
#include <sstream>

#include <caf/sec.hpp>

namespace tessera::bench {

std::map<std::string, double> metric_by_label(const std::string& text, const std::string& name,
                                              const std::string& label) {
  std::map<std::string, double> out;
  const std::string key = label + "=\"";
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.compare(0, name.size(), name) != 0 || line.size() <= name.size() || line[name.size()] != '{')
      continue;
    const auto close = line.find('}', name.size());
    const auto at = line.find(key, name.size());
    if (close == std::string::npos || at == std::string::npos || at > close)
      continue;
    const auto from = at + key.size();
    const auto to = line.find('"', from);
    if (to == std::string::npos || to > close)
      continue;
    const char* value = line.c_str() + close + 1;
    char* end = nullptr;
    const double v = std::strtod(value, &end);
    if (end != value)
      out[line.substr(from, to - from)] += v; // e.g. one outcome over every worker
  }
  return out;
}

caf::expected<std::map<std::string, double>> scrape_by_label(const http_endpoint& ep, const std::string& name,
                                                             const std::string& label,
                                                             std::chrono::milliseconds timeout) {
  auto r = http_fetch(ep, "GET", "/metrics", "", timeout);
  if (!r)
    return r.error();
  if (r->status != 200)
    return caf::make_error(caf::sec::runtime_error, "GET /metrics answered " + std::to_string(r->status));
  return metric_by_label(r->body, name, label);
}

} // namespace tessera::bench
