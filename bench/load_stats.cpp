#include "bench/load_stats.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

namespace tessera::bench {

double percentile(std::vector<double> values, double p) {
  if (values.empty())
    return 0;
  std::sort(values.begin(), values.end());
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(rank));
  const auto hi = std::min(lo + 1, values.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return values[lo] + (values[hi] - values[lo]) * frac;
}

latency_percentiles latency_percentiles_ms(const std::vector<double>& seconds) {
  latency_percentiles out;
  out.count = seconds.size();
  if (seconds.empty())
    return out;
  std::vector<double> ms(seconds.size());
  double sum = 0;
  for (size_t i = 0; i < seconds.size(); ++i) {
    ms[i] = seconds[i] * 1e3;
    sum += ms[i];
  }
  out.mean_ms = sum / static_cast<double>(ms.size());
  std::sort(ms.begin(), ms.end());
  out.p50_ms = percentile(ms, 50);
  out.p90_ms = percentile(ms, 90);
  out.p99_ms = percentile(ms, 99);
  return out;
}

std::vector<int32_t> load_prompt(uint64_t seed, uint64_t index, int tokens) {
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32),
                    static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32)};
  std::mt19937_64 rng{seq};
  std::uniform_int_distribution<int32_t> id{8, 263};
  std::vector<int32_t> out(static_cast<size_t>(std::max(tokens, 0)));
  for (auto& t : out)
    t = id(rng);
  return out;
}

level_summary summarize_level(int concurrency, const std::vector<request_sample>& samples) {
  level_summary s;
  s.concurrency = concurrency;
  s.requests = samples.size();
  double first = std::numeric_limits<double>::infinity();
  double last = -std::numeric_limits<double>::infinity();
  std::vector<double> ttft, itl, tpot;
  size_t ok = 0;
  for (const auto& r : samples) {
    first = std::min(first, r.start_s);
    last = std::max(last, r.end_s);
    if (!r.error.empty()) {
      if (s.errors++ == 0)
        s.first_error = r.error;
      continue;
    }
    ++ok;
    s.output_tokens += r.output_tokens;
    if (r.first_token_s >= 0)
      ttft.push_back(r.first_token_s - r.start_s);
    itl.insert(itl.end(), r.token_gaps_s.begin(), r.token_gaps_s.end());
    if (r.output_tokens >= 2 && r.first_token_s >= 0 && r.last_token_s >= r.first_token_s)
      tpot.push_back((r.last_token_s - r.first_token_s) / static_cast<double>(r.output_tokens - 1));
  }
  s.wall_s = samples.empty() ? 0 : std::max(0.0, last - first);
  if (s.wall_s > 0) {
    s.requests_per_s = static_cast<double>(ok) / s.wall_s;
    s.output_tok_s = static_cast<double>(s.output_tokens) / s.wall_s;
  }
  s.ttft = latency_percentiles_ms(ttft);
  s.itl = latency_percentiles_ms(itl);
  s.tpot = latency_percentiles_ms(tpot);
  return s;
}

} // namespace tessera::bench
