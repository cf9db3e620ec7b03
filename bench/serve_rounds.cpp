#include "bench/serve_rounds.hpp"

#include <algorithm>
#include <cstdio>

namespace tessera::bench {

std::vector<serve_transport> abba_order(int rounds) {
  std::vector<serve_transport> order;
  for (int i = 0; i < 2 * rounds; ++i)
    order.push_back(((i + 1) / 2) % 2 == 0 ? serve_transport::http : serve_transport::sdk);
  return order;
}

round_spread spread_of(std::vector<double> values) {
  if (values.empty())
    return {};
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  const double median = n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
  return {median, values.front(), values.back()};
}

transport_rounds aggregate_rounds(const std::vector<level_summary>& rounds) {
  std::vector<double> tok_s, p50, p90, itl;
  transport_rounds t;
  for (const auto& r : rounds) {
    tok_s.push_back(r.output_tok_s);
    p50.push_back(r.ttft.p50_ms);
    p90.push_back(r.ttft.p90_ms);
    itl.push_back(r.itl.p50_ms);
    t.errors += r.errors;
  }
  t.output_tok_s = spread_of(std::move(tok_s));
  t.ttft_p50_ms = spread_of(std::move(p50));
  t.ttft_p90_ms = spread_of(std::move(p90));
  t.itl_p50_ms = spread_of(std::move(itl));
  return t;
}

double median_ratio(const transport_rounds& http, const transport_rounds& sdk) {
  return http.output_tok_s.median > 0 ? sdk.output_tok_s.median / http.output_tok_s.median : 0.0;
}

namespace {

/// "1234" or "1234 (1100-1300)"; one decimal under 100.
std::string figure(const round_spread& v, int rounds) {
  char b[64];
  const bool whole = v.median >= 100;
  if (rounds > 1)
    std::snprintf(b, sizeof b, whole ? "%.0f (%.0f-%.0f)" : "%.1f (%.1f-%.1f)", v.median, v.min, v.max);
  else
    std::snprintf(b, sizeof b, whole ? "%.0f" : "%.1f", v.median);
  return b;
}

} // namespace

std::string sdk_table(const std::vector<sdk_table_row>& rows, int rounds) {
  const int w = rounds > 1 ? 20 : 10; // a figure's column
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "%5s %*s %*s %8s %*s %*s %*s %*s %*s %*s %7s\n", "conc", w, "HTTP tok/s", w,
                "SDK tok/s", "SDK/HTTP", w, "HTTP TTFT p50", w, "SDK TTFT p50", w, "HTTP TTFT p90", w,
                "SDK TTFT p90", w, "HTTP ITL p50", w, "SDK ITL p50", "errors");
  out += line;
  for (const auto& r : rows) {
    std::snprintf(line, sizeof line, "%5d %*s %*s %8.2f %*s %*s %*s %*s %*s %*s %7zu\n", r.concurrency, w,
                  figure(r.http.output_tok_s, rounds).c_str(), w, figure(r.sdk.output_tok_s, rounds).c_str(),
                  median_ratio(r.http, r.sdk), w, figure(r.http.ttft_p50_ms, rounds).c_str(), w,
                  figure(r.sdk.ttft_p50_ms, rounds).c_str(), w, figure(r.http.ttft_p90_ms, rounds).c_str(), w,
                  figure(r.sdk.ttft_p90_ms, rounds).c_str(), w, figure(r.http.itl_p50_ms, rounds).c_str(), w,
                  figure(r.sdk.itl_p50_ms, rounds).c_str(), r.http.errors + r.sdk.errors);
    out += line;
  }
  out += "(SDK: requests of the same shape over the native client SDK, one client shared by the level's threads; ";
  if (rounds > 1)
    out += std::to_string(rounds) + " rounds per transport and level, ABBA order; median (min-max) over the "
           "rounds; SDK/HTTP = ratio of the median tok/s; TTFT and ITL in ms)\n";
  else
    out += "one round per transport and level; SDK/HTTP = ratio of the tok/s; TTFT and ITL in ms)\n";
  return out;
}

} // namespace tessera::bench
