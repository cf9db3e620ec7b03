#include "bench/serve_rounds.hpp"

#include <algorithm>

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
  std::vector<double> tok_s, p50, p90;
  transport_rounds t;
  for (const auto& r : rounds) {
    tok_s.push_back(r.output_tok_s);
    p50.push_back(r.ttft.p50_ms);
    p90.push_back(r.ttft.p90_ms);
    t.errors += r.errors;
  }
  t.output_tok_s = spread_of(std::move(tok_s));
  t.ttft_p50_ms = spread_of(std::move(p50));
  t.ttft_p90_ms = spread_of(std::move(p90));
  return t;
}

double median_ratio(const transport_rounds& http, const transport_rounds& sdk) {
  return http.output_tok_s.median > 0 ? sdk.output_tok_s.median / http.output_tok_s.median : 0.0;
}

} // namespace tessera::bench
