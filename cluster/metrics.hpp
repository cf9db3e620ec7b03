#pragma once
/// @file
/// Prometheus metrics: counters, gauges and histograms in a registry that
/// renders the text exposition format (version 0.0.4) for GET /metrics.
///
/// Thread-safety: a registry may be read (render) and its series updated
/// from any thread at once; series are created under a lock and never move,
/// so a reference returned by counter()/gauge()/histogram() stays valid for
/// the registry's life. Updates are lock-free atomics (histograms: one
/// atomic per bucket).

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace tessera::cluster {

/// Label names and values of one series, e.g. {{"kind", "bad_request"}}.
using metric_labels = std::vector<std::pair<std::string, std::string>>;

/// A value that only goes up.
class metric_counter {
public:
  void inc(double by = 1.0);
  [[nodiscard]] double value() const { return value_.load(std::memory_order_relaxed); }

private:
  std::atomic<double> value_{0.0};
};

/// A value that goes up and down.
class metric_gauge {
public:
  void set(double v) { value_.store(v, std::memory_order_relaxed); }
  void add(double by);
  [[nodiscard]] double value() const { return value_.load(std::memory_order_relaxed); }

private:
  std::atomic<double> value_{0.0};
};

/// Observations counted into buckets with fixed upper bounds (plus +Inf).
class metric_histogram {
public:
  /// `bounds`: strictly increasing upper bounds.
  explicit metric_histogram(std::vector<double> bounds);
  void observe(double v);
  [[nodiscard]] const std::vector<double>& bounds() const { return bounds_; }
  /// Observations <= bounds()[i] (cumulative), then the total count.
  [[nodiscard]] std::vector<uint64_t> cumulative_counts() const;
  [[nodiscard]] double sum() const { return sum_.load(std::memory_order_relaxed); }
  [[nodiscard]] uint64_t count() const { return count_.load(std::memory_order_relaxed); }

private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_; // bounds_.size() + 1, not cumulative
  std::atomic<double> sum_{0.0};
  std::atomic<uint64_t> count_{0};
};

/// Latency buckets in seconds, 1 ms to 60 s (for TTFT, inter-token
/// latency, request duration).
[[nodiscard]] std::vector<double> latency_buckets_seconds();

/// Named families of series. Names must match [a-zA-Z_:][a-zA-Z0-9_:]*
/// (asserted: a wrong name is a bug, not an input).
class metrics_registry {
public:
  /// The counter `name` with `labels`, created on first use.
  metric_counter& counter(const std::string& name, const std::string& help,
                          const metric_labels& labels = {});
  metric_gauge& gauge(const std::string& name, const std::string& help,
                      const metric_labels& labels = {});
  /// `bounds` is used when the series is created.
  metric_histogram& histogram(const std::string& name, const std::string& help,
                              const std::vector<double>& bounds, const metric_labels& labels = {});

  /// Every family in name order, each with its HELP and TYPE lines.
  [[nodiscard]] std::string render() const;

private:
  enum class kind { counter, gauge, histogram };
  struct family {
    kind type;
    std::string help;
    // Series by rendered label set ({a="b",...}); deques keep addresses.
    std::map<std::string, size_t> index;
    std::deque<metric_counter> counters;
    std::deque<metric_gauge> gauges;
    std::deque<metric_histogram> histograms;
    std::vector<std::string> label_sets; // by series index
  };
  family& family_of(const std::string& name, const std::string& help, kind type);
  /// The series of `f` with `labels` in `store`, made from `args` if new.
  template <class Series, class... Args>
  Series& series(family& f, std::deque<Series>& store, const metric_labels& labels, Args&&... args);

  mutable std::mutex mu_;
  std::map<std::string, family> families_; // guarded by mu_
};

} // namespace tessera::cluster
