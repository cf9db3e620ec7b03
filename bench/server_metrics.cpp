#include "bench/server_metrics.hpp"

#include <cstdlib>
#include <sstream>

#include <caf/sec.hpp>

namespace tessera::bench {

std::map<std::string, double> metric_by_label(const std::string& text, const std::string& name,
                                              const std::string& label) {
  std::map<std::string, double> out;
  const std::string key = label + "=\"";
  // Adds the number at `value` (if one is there) to out[k].
  auto add = [&out](const std::string& k, const char* value) {
    char* end = nullptr;
    const double v = std::strtod(value, &end);
    if (end != value)
      out[k] += v; // e.g. one outcome over every worker
  };
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.compare(0, name.size(), name) != 0 || line.size() <= name.size())
      continue;
    const char after = line[name.size()];
    if (after == ' ') {
      if (label.empty())
        add("", line.c_str() + name.size());
      continue;
    }
    if (after != '{')
      continue;
    const auto close = line.find('}', name.size());
    if (close == std::string::npos)
      continue;
    if (label.empty()) {
      add("", line.c_str() + close + 1);
      continue;
    }
    const auto at = line.find(key, name.size());
    if (at == std::string::npos || at > close)
      continue;
    const auto from = at + key.size();
    const auto to = line.find('"', from);
    if (to == std::string::npos || to > close)
      continue;
    add(line.substr(from, to - from), line.c_str() + close + 1);
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

caf::expected<std::map<std::string, double>> scrape_cluster(const metrics_endpoints& eps, const std::string& name,
                                                            const std::string& label, bool per_node,
                                                            std::chrono::milliseconds timeout) {
  auto out = scrape_by_label(eps.server, name, label, timeout);
  for (const auto& node : eps.nodes) {
    auto m = scrape_by_label(node, name, label, timeout);
    if (!m)
      continue;
    if (!out)
      out = std::map<std::string, double>{};
    const std::string prefix = per_node ? node.host + ":" + std::to_string(node.port) + "/" : "";
    for (const auto& [key, v] : *m)
      (*out)[prefix + key] += v;
  }
  return out;
}

} // namespace tessera::bench
