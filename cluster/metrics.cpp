#include "cluster/metrics.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "common/assert.hpp"

namespace tessera::cluster {

namespace {

void atomic_add(std::atomic<double>& a, double by) {
  double cur = a.load(std::memory_order_relaxed);
  while (!a.compare_exchange_weak(cur, cur + by, std::memory_order_relaxed)) {
  }
}

bool valid_name(const std::string& s) {
  if (s.empty())
    return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9'))
      return false;
  }
  return true;
}

// Label values escape backslash, double quote and newline.
std::string escape(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"')
      out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string render_labels(const metric_labels& labels) {
  if (labels.empty())
    return {};
  std::string out = "{";
  for (size_t i = 0; i < labels.size(); ++i) {
    TESSERA_ASSERT(valid_name(labels[i].first), "bad metric label name");
    out += (i ? "," : "") + labels[i].first + "=\"" + escape(labels[i].second) + "\"";
  }
  return out + "}";
}

// The label set with one more label (for histogram buckets).
std::string with_label(const std::string& set, const std::string& label) {
  if (set.empty())
    return "{" + label + "}";
  return set.substr(0, set.size() - 1) + "," + label + "}";
}

std::string number(double v) {
  if (std::isinf(v))
    return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v))
    return "NaN";
  // The shortest of %.15g / %.17g that reads back as v.
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.15g", v);
  if (std::strtod(buf, nullptr) != v)
    std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

} // namespace

void metric_counter::inc(double by) {
  TESSERA_ASSERT(by >= 0.0, "a counter only goes up");
  atomic_add(value_, by);
}

void metric_gauge::add(double by) {
  atomic_add(value_, by);
}

metric_histogram::metric_histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), buckets_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
  for (size_t i = 0; i + 1 < bounds_.size(); ++i)
    TESSERA_ASSERT(bounds_[i] < bounds_[i + 1], "histogram bounds must increase");
  for (size_t i = 0; i <= bounds_.size(); ++i)
    buckets_[i].store(0, std::memory_order_relaxed);
}

void metric_histogram::observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i])
    ++i;
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  atomic_add(sum_, v);
  count_.fetch_add(1, std::memory_order_relaxed);
}

std::vector<uint64_t> metric_histogram::cumulative_counts() const {
  std::vector<uint64_t> out(bounds_.size() + 1);
  uint64_t total = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i)
    out[i] = total += buckets_[i].load(std::memory_order_relaxed);
  return out;
}

std::vector<double> latency_buckets_seconds() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}

metrics_registry::family& metrics_registry::family_of(const std::string& name,
                                                      const std::string& help, kind type) {
  TESSERA_ASSERT(valid_name(name), "bad metric name");
  auto [it, fresh] = families_.try_emplace(name, family{type, help, {}, {}, {}, {}, {}});
  TESSERA_ASSERT(it->second.type == type, "a metric name is used with two types");
  (void) fresh;
  return it->second;
}

template <class Series, class... Args>
Series& metrics_registry::series(family& f, std::deque<Series>& store, const metric_labels& labels,
                                 Args&&... args) {
  auto set = render_labels(labels);
  if (auto it = f.index.find(set); it != f.index.end())
    return store[it->second];
  f.index.emplace(set, store.size());
  f.label_sets.push_back(set);
  return store.emplace_back(std::forward<Args>(args)...);
}

metric_counter& metrics_registry::counter(const std::string& name, const std::string& help,
                                          const metric_labels& labels) {
  std::lock_guard lock{mu_};
  auto& f = family_of(name, help, kind::counter);
  return series(f, f.counters, labels);
}

metric_gauge& metrics_registry::gauge(const std::string& name, const std::string& help,
                                      const metric_labels& labels) {
  std::lock_guard lock{mu_};
  auto& f = family_of(name, help, kind::gauge);
  return series(f, f.gauges, labels);
}

metric_histogram& metrics_registry::histogram(const std::string& name, const std::string& help,
                                              const std::vector<double>& bounds,
                                              const metric_labels& labels) {
  std::lock_guard lock{mu_};
  auto& f = family_of(name, help, kind::histogram);
  return series(f, f.histograms, labels, bounds);
}

std::string metrics_registry::render() const {
  std::lock_guard lock{mu_};
  std::ostringstream out;
  for (const auto& [name, f] : families_) {
    out << "# HELP " << name << ' ' << f.help << '\n';
    const char* type = f.type == kind::counter ? "counter" : f.type == kind::gauge ? "gauge" : "histogram";
    out << "# TYPE " << name << ' ' << type << '\n';
    for (size_t i = 0; i < f.label_sets.size(); ++i) {
      const auto& set = f.label_sets[i];
      if (f.type == kind::counter) {
        out << name << set << ' ' << number(f.counters[i].value()) << '\n';
      } else if (f.type == kind::gauge) {
        out << name << set << ' ' << number(f.gauges[i].value()) << '\n';
      } else {
        const auto& h = f.histograms[i];
        auto counts = h.cumulative_counts();
        for (size_t b = 0; b < h.bounds().size(); ++b)
          out << name << "_bucket" << with_label(set, "le=\"" + number(h.bounds()[b]) + "\"") << ' '
              << counts[b] << '\n';
        out << name << "_bucket" << with_label(set, "le=\"+Inf\"") << ' ' << counts.back() << '\n';
        out << name << "_sum" << set << ' ' << number(h.sum()) << '\n';
        out << name << "_count" << set << ' ' << counts.back() << '\n';
      }
    }
  }
  return out.str();
}

} // namespace tessera::cluster
