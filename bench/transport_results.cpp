#include "bench/transport_results.hpp"

#include <algorithm>
#include <limits>
#include <set>

#include "transport/ucx/ucx_transport.hpp"

namespace tessera::bench {

namespace {

// Median over the rounds of `get(round)`, skipping rounds without a value.
template <class Round, class Get>
std::optional<double> median_over(const std::vector<Round>& rounds, Get get) {
  std::vector<double> v;
  for (const auto& r : rounds)
    if (std::optional<double> x = get(r))
      v.push_back(*x);
  if (v.empty())
    return std::nullopt;
  return median_of(std::move(v));
}

template <class Map, class Key>
auto find_opt(const Map& m, const Key& k) -> std::optional<typename Map::mapped_type> {
  auto it = m.find(k);
  if (it == m.end())
    return std::nullopt;
  return it->second;
}

// A by-size map of medians: `get(round)` gives that round's map.
template <class Round, class Get>
std::map<uint64_t, double> median_by_size(const std::vector<Round>& rounds, Get get) {
  std::set<uint64_t> sizes;
  for (const auto& r : rounds)
    if (auto m = get(r))
      for (const auto& [k, v] : *m)
        sizes.insert(k);
  std::map<uint64_t, double> out;
  for (auto k : sizes)
    if (auto x = median_over(rounds, [&](const Round& r) -> std::optional<double> {
          auto m = get(r);
          return m ? find_opt(*m, k) : std::nullopt;
        }))
      out[k] = *x;
  return out;
}

// The per-field median of perftest results (nullopt when none ran).
std::optional<perftest_result> median_result(const std::vector<perftest_result>& v) {
  if (v.empty())
    return std::nullopt;
  auto field = [&](double perftest_result::*f) {
    std::vector<double> x;
    for (const auto& r : v)
      x.push_back(r.*f);
    return median_of(std::move(x));
  };
  perftest_result m;
  m.iterations = v.front().iterations;
  m.latency_us_p50 = field(&perftest_result::latency_us_p50);
  m.latency_us_avg = field(&perftest_result::latency_us_avg);
  m.bandwidth_mib_s = field(&perftest_result::bandwidth_mib_s);
  m.msgs_per_s = field(&perftest_result::msgs_per_s);
  return m;
}

perftest_figures summarize_perftest(const std::vector<const perftest_figures*>& rounds) {
  perftest_figures f;
  f.tls = rounds.front()->tls;
  std::vector<perftest_result> lat, rate;
  std::map<uint64_t, std::vector<perftest_result>> tag, put;
  for (size_t i = 0; i < rounds.size(); ++i) {
    const auto& p = *rounds[i];
    if (p.tag_lat)
      lat.push_back(*p.tag_lat);
    if (p.tag_rate)
      rate.push_back(*p.tag_rate);
    for (const auto& [k, v] : p.tag_bw)
      tag[k].push_back(v);
    for (const auto& [k, v] : p.put_bw)
      put[k].push_back(v);
    if (i == 0)
      f.commands = p.commands;
    for (const auto& e : p.errors)
      f.errors.push_back("round " + std::to_string(i + 1) + ": " + e);
  }
  f.tag_lat = median_result(lat);
  f.tag_rate = median_result(rate);
  for (const auto& [k, v] : tag)
    f.tag_bw[k] = *median_result(v);
  for (const auto& [k, v] : put)
    f.put_bw[k] = *median_result(v);
  return f;
}

} // namespace

perftest_setup plain_perftest_setup(const transport_selection& sel) {
  perftest_setup s;
  s.tls = sel.tls;
  return s;
}

perftest_setup node_perftest_setup(const transport_selection& sel) {
  perftest_setup s;
  if (sel.perftest_key == "shm") {
    s.tls = "sm,self";
    return s;
  }
  const transport::ucx_options node;
  s.tls = sel.tls;
  s.env = {"UCX_NET_DEVICES=lo",
           "UCX_TCP_TX_SEG_SIZE=" + std::to_string(node.tcp_tx_seg_bytes),
           "UCX_TCP_RX_SEG_SIZE=" + std::to_string(node.tcp_rx_seg_bytes)};
  s.error_handling = true;
  s.put_bw = false;
  return s;
}

double median_of(std::vector<double> v) {
  if (v.empty())
    return std::numeric_limits<double>::quiet_NaN();
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void summarize_rounds(transport_bench_results& r) {
  r.tessera.clear();
  r.perftest.clear();
  r.perftest_node.clear();
  r.errors.clear();
  for (size_t i = 0; i < r.rounds.size(); ++i)
    for (const auto& [key, e] : r.rounds[i].errors) {
      auto& all = r.errors[key];
      all += (all.empty() ? "" : "; ") + ("round " + std::to_string(i + 1) + ": " + e);
    }
  for (const auto& sel : r.selections) {
    using probe_map = std::map<uint64_t, double>;
    std::vector<transport_probe_result> have;
    for (const auto& round : r.rounds)
      if (auto t = find_opt(round.tessera, sel.key))
        have.push_back(*t);
    if (have.empty())
      continue;
    auto scalar = [&](double transport_probe_result::*f) {
      return *median_over(have, [&](const transport_probe_result& t) -> std::optional<double> {
        return t.*f;
      });
    };
    auto sized = [&](probe_map transport_probe_result::*f) {
      return median_by_size(have, [&](const transport_probe_result& t) -> std::optional<probe_map> {
        return t.*f;
      });
    };
    transport_probe_result m;
    m.control_frame_bytes = have.front().control_frame_bytes;
    m.kv_path = have.front().kv_path;
    m.rtt_us_p50 = scalar(&transport_probe_result::rtt_us_p50);
    m.rtt_us_p99 = scalar(&transport_probe_result::rtt_us_p99);
    m.rtt_us_max = scalar(&transport_probe_result::rtt_us_max);
    m.rtt_codec_us_p50 = scalar(&transport_probe_result::rtt_codec_us_p50);
    m.rtt_codec_us_p99 = scalar(&transport_probe_result::rtt_codec_us_p99);
    m.msgs_per_s = scalar(&transport_probe_result::msgs_per_s);
    m.idle_cpu_pct_self = scalar(&transport_probe_result::idle_cpu_pct_self);
    m.idle_cpu_pct_peer = scalar(&transport_probe_result::idle_cpu_pct_peer);
    m.block_gb_s = sized(&transport_probe_result::block_gb_s);
    m.batch_us_p50 = sized(&transport_probe_result::batch_us_p50);
    m.batch_us_p99 = sized(&transport_probe_result::batch_us_p99);
    m.batch_us_max = sized(&transport_probe_result::batch_us_max);
    m.one_block_gb_s = sized(&transport_probe_result::one_block_gb_s);
    r.tessera[sel.key] = std::move(m);
  }
  for (auto of : {&transport_round::perftest, &transport_round::perftest_node}) {
    std::map<std::string, std::vector<const perftest_figures*>> perftest;
    for (const auto& round : r.rounds)
      for (const auto& [key, p] : round.*of)
        perftest[key].push_back(&p);
    auto& out = of == &transport_round::perftest ? r.perftest : r.perftest_node;
    for (const auto& [key, rounds] : perftest)
      out[key] = summarize_perftest(rounds);
  }
}

} // namespace tessera::bench
