#include "bench/trace_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "bench/fixed_format.hpp"

namespace tessera::bench {

namespace {

using json = nlohmann::json;

double ratio(int64_t a, int64_t b) { return b > 0 ? static_cast<double>(a) / static_cast<double>(b) : 0.0; }

void put_latency(json& j, const std::string& name, const latency_percentiles& p) {
  j[name + "_p50"] = p.p50_ms;
  j[name + "_p90"] = p.p90_ms;
  j[name + "_p99"] = p.p99_ms;
  j[name + "_mean"] = p.mean_ms;
}

// "p50/p90/p99" of `prefix` from a result JSON, whole ms from 100 up.
std::string triple(const json& j, const std::string& prefix) {
  std::string out;
  for (const char* p : {"_p50", "_p90", "_p99"}) {
    const double v = j.value(prefix + p, 0.0);
    if (!out.empty())
      out += '/';
    out += fixed(v >= 100 ? "%.0f" : "%.1f", v);
  }
  return out;
}

} // namespace

std::string token_count(int64_t n) {
  const auto v = static_cast<double>(n);
  if (n < 10'000)
    return std::to_string(n);
  return n < 10'000'000 ? fixed("%.1fk", v / 1e3) : fixed("%.1fM", v / 1e6);
}

trace_summary summarize_trace(const std::vector<trace_sample>& samples, const std::vector<int64_t>& optimal_hits) {
  trace_summary s;
  s.requests = samples.size();
  std::vector<request_sample> sent;
  std::vector<double> lags;
  for (size_t i = 0; i < samples.size(); ++i) {
    const auto& x = samples[i];
    s.optimal_input_tokens += x.prompt_tokens;
    s.optimal_hit_tokens += i < optimal_hits.size() ? optimal_hits[i] : 0;
    if (x.sent) {
      sent.push_back(x.timing);
      lags.push_back(std::max(0.0, x.timing.start_s - x.due_s));
    }
    if (!x.timing.error.empty()) {
      if (s.errors++ == 0)
        s.first_error = x.timing.error;
      continue;
    }
    const int64_t prompt = x.usage_prompt_tokens >= 0 ? x.usage_prompt_tokens : x.prompt_tokens;
    if (x.usage_prompt_tokens >= 0 && x.usage_prompt_tokens != x.prompt_tokens)
      ++s.prompt_token_mismatches;
    if (x.cached_tokens < 0)
      ++s.missing_cached_tokens;
    const int64_t cached = std::clamp<int64_t>(x.cached_tokens, 0, prompt);
    s.prompt_tokens += prompt;
    s.cached_tokens += cached;
  }
  s.prefill_tokens_computed = s.prompt_tokens - s.cached_tokens;
  s.hit_rate = ratio(s.cached_tokens, s.prompt_tokens);
  s.optimal_hit_rate = ratio(s.optimal_hit_tokens, s.optimal_input_tokens);
  s.fraction_of_optimal = s.optimal_hit_rate > 0 ? s.hit_rate / s.optimal_hit_rate : 0.0;
  s.latency = summarize_level(0, sent);
  s.send_lag = latency_percentiles_ms(lags);
  return s;
}

std::vector<trace_window> trace_windows(const std::vector<trace_sample>& samples,
                                        const std::vector<int64_t>& optimal_hits, double window_s) {
  std::vector<trace_window> out;
  if (samples.empty() || !(window_s > 0))
    return out;
  const double t0 = samples.front().trace_s;
  size_t i = 0;
  while (i < samples.size()) {
    const auto k = static_cast<int64_t>(std::floor((samples[i].trace_s - t0) / window_s));
    const double start = static_cast<double>(k) * window_s;
    std::vector<trace_sample> in;
    std::vector<int64_t> hits;
    // Samples are in arrival order, so a window is a run of them.
    for (; i < samples.size() && samples[i].trace_s - t0 < start + window_s; ++i) {
      in.push_back(samples[i]);
      hits.push_back(i < optimal_hits.size() ? optimal_hits[i] : 0);
    }
    out.push_back({start, start + window_s, summarize_trace(in, hits)});
  }
  return out;
}

json trace_summary_json(const trace_summary& s) {
  json j;
  j["requests"] = s.requests;
  j["errors"] = s.errors;
  if (!s.first_error.empty())
    j["first_error"] = s.first_error;
  j["hit_rate"] = s.hit_rate;
  j["optimal_hit_rate"] = s.optimal_hit_rate;
  j["fraction_of_optimal"] = s.fraction_of_optimal;
  j["prompt_tokens"] = s.prompt_tokens;
  j["cached_tokens"] = s.cached_tokens;
  j["prefill_tokens_computed"] = s.prefill_tokens_computed;
  j["optimal_input_tokens"] = s.optimal_input_tokens;
  j["optimal_hit_tokens"] = s.optimal_hit_tokens;
  j["wall_s"] = s.latency.wall_s;
  j["output_tokens"] = s.latency.output_tokens;
  j["requests_per_s"] = s.latency.requests_per_s;
  j["output_tok_s"] = s.latency.output_tok_s;
  put_latency(j, "ttft_ms", s.latency.ttft);
  put_latency(j, "itl_ms", s.latency.itl);
  put_latency(j, "tpot_ms", s.latency.tpot);
  j["send_lag_ms_p50"] = s.send_lag.p50_ms;
  j["send_lag_ms_p99"] = s.send_lag.p99_ms;
  j["missing_cached_tokens"] = s.missing_cached_tokens;
  j["prompt_token_mismatches"] = s.prompt_token_mismatches;
  return j;
}

json trace_window_json(const trace_window& w) {
  json j = trace_summary_json(w.summary);
  j["start_s"] = w.start_s;
  j["end_s"] = w.end_s;
  if (w.recommended_workers >= 0) {
    j["units_demanded_per_s"] = w.units_demanded_per_s;
    j["recommended_workers"] = w.recommended_workers;
  }
  return j;
}

void attach_autoscale(std::vector<trace_window>& windows, const std::vector<autoscale_sample>& samples) {
  for (auto& w : windows) {
    double demand = 0, rec = 0;
    size_t n = 0;
    for (const auto& s : samples)
      if (s.trace_s >= w.start_s && s.trace_s < w.end_s) {
        demand += s.units_demanded_per_s;
        rec += s.recommended_workers;
        ++n;
      }
    if (n > 0) {
      w.units_demanded_per_s = demand / static_cast<double>(n);
      w.recommended_workers = rec / static_cast<double>(n);
    }
  }
}

std::string trace_timeline(const std::vector<trace_window>& windows) {
  auto fmt = [](const char* f, auto... v) {
    char buf[160];
    std::snprintf(buf, sizeof buf, f, v...);
    return std::string{buf};
  };
  std::string out = fmt("%9s %9s %13s %14s %12s\n", "trace min", "requests", "TTFT p90 ms", "units/s", "recommended");
  for (const auto& w : windows) {
    out += fmt("%9.1f %9zu ", w.start_s / 60, w.summary.requests);
    out += w.summary.latency.ttft.count > 0 ? fmt("%13.0f ", w.summary.latency.ttft.p90_ms) : fmt("%13s ", "-");
    out += w.recommended_workers >= 0 ? fmt("%14.0f %12.1f\n", w.units_demanded_per_s, w.recommended_workers)
                                      : fmt("%14s %12s\n", "-", "-");
  }
  return out;
}

/// triple(j, key), or "host-bound" for a run the host-saturation guard
/// flagged (host_guard.hpp) unless it was allowed.
std::string latency(const json& j, const char* key) {
  if (j.value("host_bound", false) && !j.value("host_bound_allowed", false))
    return "host-bound";
  return triple(j, key);
}

std::string trace_table(const std::vector<json>& results) {
  size_t width = 5;
  for (const auto& j : results)
    width = std::max(width, j.value("label", std::string{"-"}).size());
  const int w = static_cast<int>(width);
  char line[1024];
  std::snprintf(line, sizeof line, "%-*s %6s %5s %6s %6s %6s %11s %20s %17s %7s %9s\n", w, "label", "reqs", "errs",
                "hit %", "opt %", "of opt", "prefill tok", "TTFT p50/90/99 ms", "ITL p50/90/99 ms", "req/s",
                "out tok/s");
  std::string out = line;
  for (const auto& j : results) {
    std::snprintf(line, sizeof line, "%-*s %6zu %5zu %6.1f %6.1f %6.3f %11s %20s %17s %7.2f %9.1f\n", w,
                  j.value("label", std::string{"-"}).c_str(), j.value("requests", size_t{0}),
                  j.value("errors", size_t{0}), 100 * j.value("hit_rate", 0.0), 100 * j.value("optimal_hit_rate", 0.0),
                  j.value("fraction_of_optimal", 0.0), token_count(j.value("prefill_tokens_computed", int64_t{0})).c_str(),
                  latency(j, "ttft_ms").c_str(), latency(j, "itl_ms").c_str(), j.value("requests_per_s", 0.0),
                  j.value("output_tok_s", 0.0));
    out += line;
  }
  return out;
}

std::vector<chart> trace_charts(const std::string& label, const trace_summary& total,
                                const std::vector<trace_window>& windows) {
  chart hits;
  hits.title = "Prefix-cache hit rate per window of trace time, " + label;
  hits.x_label = "trace time, minutes";
  hits.y_label = "prompt tokens served from cache, %";
  hits.log2_x = false;
  hits.y_max = 100;
  chart_series replay{"replay", {}};
  chart_series best{"unbounded cache", {}};
  chart ttft;
  ttft.title = "Time to first token per window of trace time, " + label;
  ttft.x_label = "trace time, minutes";
  ttft.y_label = "TTFT, ms";
  ttft.log2_x = false;
  chart_series p50{"TTFT p50", {}};
  chart_series p90{"TTFT p90", {}};
  for (const auto& w : windows) {
    const double x = (w.start_s + w.end_s) / 2 / 60;
    best.points.emplace_back(x, 100 * w.summary.optimal_hit_rate);
    if (w.summary.prompt_tokens > 0) // some request succeeded
      replay.points.emplace_back(x, 100 * w.summary.hit_rate);
    if (w.summary.latency.ttft.count > 0) {
      p50.points.emplace_back(x, w.summary.latency.ttft.p50_ms);
      p90.points.emplace_back(x, w.summary.latency.ttft.p90_ms);
    }
  }
  hits.series = {std::move(replay), std::move(best)};
  hits.hlines = {{"replay " + fixed("%.1f%%", 100 * total.hit_rate), 100 * total.hit_rate},
                 {"optimum " + fixed("%.1f%%", 100 * total.optimal_hit_rate), 100 * total.optimal_hit_rate}};
  ttft.series = {std::move(p50), std::move(p90)};
  std::vector<chart> out{std::move(hits), std::move(ttft)};
  chart scale;
  scale.title = "Autoscaling signal per window of trace time, " + label;
  scale.x_label = "trace time, minutes";
  scale.y_label = "workers";
  scale.log2_x = false;
  chart_series rec{"recommended workers", {}};
  chart_series demand{"demand, units/s / 1000", {}};
  for (const auto& w : windows)
    if (w.recommended_workers >= 0) {
      const double x = (w.start_s + w.end_s) / 2 / 60;
      rec.points.emplace_back(x, w.recommended_workers);
      demand.points.emplace_back(x, w.units_demanded_per_s / 1000);
    }
  if (!rec.points.empty()) {
    scale.series = {std::move(rec), std::move(demand)};
    out.push_back(std::move(scale));
  }
  return out;
}

} // namespace tessera::bench
