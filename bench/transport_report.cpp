#include "bench/transport_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <thread>

#include <nlohmann/json.hpp>

namespace tessera::bench {

namespace {

using json = nlohmann::json;

std::string size_label(uint64_t bytes) {
  if (bytes >= (uint64_t{1} << 20) && bytes % (uint64_t{1} << 20) == 0)
    return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= 1024 && bytes % 1024 == 0)
    return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " B";
}

// "%.Nf" of v, or "-" where v is missing (NaN).
std::string cell(double v, int decimals) {
  if (!std::isfinite(v))
    return "-";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string pad(const std::string& s, size_t width, bool left_align = false) {
  if (s.size() >= width)
    return s + " ";
  const std::string fill(width - s.size(), ' ');
  return left_align ? s + fill : fill + s;
}

constexpr double missing = std::numeric_limits<double>::quiet_NaN();

template <class Map>
double lookup(const Map& m, uint64_t k) {
  auto it = m.find(k);
  return it == m.end() ? missing : it->second;
}

double perftest_gb_s(const std::map<uint64_t, perftest_result>& m, uint64_t k) {
  auto it = m.find(k);
  return it == m.end() ? missing : it->second.bandwidth_gb_s();
}

using tessera_map = std::map<std::string, transport_probe_result>;
using perftest_map = std::map<std::string, perftest_figures>;

const perftest_figures* perftest_of(const perftest_map& m, const transport_selection& s) {
  auto it = m.find(s.perftest_key);
  return it == m.end() ? nullptr : &it->second;
}

const perftest_figures* perftest_of(const transport_bench_results& r, const transport_selection& s) {
  return perftest_of(r.perftest, s);
}

// The node set-up's reference for a batch of `bytes`: ucp_put_bw where it
// ran (a node's context has RMA: shm's same-host one), else tag_bw.
double node_reference_gb_s(const perftest_figures* p, uint64_t bytes) {
  if (!p)
    return missing;
  const double put = perftest_gb_s(p->put_bw, bytes);
  return std::isfinite(put) ? put : perftest_gb_s(p->tag_bw, bytes);
}

// ucx_perftest's round trip: tag_lat prints half of it.
double perftest_rtt_us(const perftest_figures* p) {
  return p && p->tag_lat ? 2 * p->tag_lat->latency_us_p50 : missing;
}

json number_or_null(double v) {
  return std::isfinite(v) ? json(v) : json(nullptr);
}

json by_size(const std::map<uint64_t, double>& m, const std::vector<uint64_t>& sizes) {
  json j = json::object();
  for (auto b : sizes)
    j[std::to_string(b)] = number_or_null(lookup(m, b));
  return j;
}

std::map<uint64_t, double> gb_s_map(const std::map<uint64_t, perftest_result>& m) {
  std::map<uint64_t, double> out;
  for (const auto& [k, v] : m)
    out[k] = v.bandwidth_gb_s();
  return out;
}

std::map<uint64_t, double> ratio_map(const std::map<uint64_t, double>& num,
                                     const std::map<uint64_t, double>& den) {
  std::map<uint64_t, double> out;
  for (const auto& [k, v] : num)
    if (auto d = lookup(den, k); std::isfinite(d) && d > 0)
      out[k] = v / d;
  return out;
}

// The figures of one set of results (the medians, or one round): every
// key of the documented shape but the run's settings.
// ucx_perftest's figures of one set-up, as the JSON's "ucx_perftest".
json perftest_json(const perftest_map& perftest, const std::vector<uint64_t>& sizes) {
  json pt;
  for (const char* k : {"rtt_us_p50", "tag_lat_us", "msgs_per_s", "tag_bw_gb_s", "ucp_put_bw_gb_s", "ucx_tls"})
    pt[k] = json::object();
  pt["commands"] = json::array();
  pt["errors"] = json::array();
  for (const auto& [key, p] : perftest) {
    pt["ucx_tls"][key] = p.tls;
    pt["rtt_us_p50"][key] = number_or_null(perftest_rtt_us(&p));
    pt["tag_lat_us"][key] = number_or_null(p.tag_lat ? p.tag_lat->latency_us_p50 : missing);
    pt["msgs_per_s"][key] = number_or_null(p.tag_rate ? p.tag_rate->msgs_per_s : missing);
    pt["tag_bw_gb_s"][key] = by_size(gb_s_map(p.tag_bw), sizes);
    pt["ucp_put_bw_gb_s"][key] = by_size(gb_s_map(p.put_bw), sizes);
    for (const auto& c : p.commands)
      pt["commands"].push_back(c);
    for (const auto& e : p.errors)
      pt["errors"].push_back(key + ": " + e);
  }
  return pt;
}

// The ratios of `t` to one set-up's perftest figures `p` (may be null),
// under the keys `rtt`, `put` and `tag`.
void ratios_json(json& j, const std::string& sel, const transport_probe_result* t,
                 const perftest_figures* p, const std::vector<uint64_t>& sizes, const char* rtt,
                 const char* put, const char* tag) {
  const std::map<uint64_t, double> none;
  j[rtt][sel] = number_or_null(t ? t->rtt_us_p50 / perftest_rtt_us(p) : missing);
  j[put][sel] = by_size(t && p ? ratio_map(t->block_gb_s, gb_s_map(p->put_bw)) : none, sizes);
  j[tag][sel] = by_size(t && p ? ratio_map(t->block_gb_s, gb_s_map(p->tag_bw)) : none, sizes);
}

json figures_json(const std::vector<transport_selection>& selections,
                  const std::vector<uint64_t>& sizes, const tessera_map& tessera,
                  const perftest_map& perftest, const perftest_map& perftest_node) {
  json j;
  for (const char* k : {"rtt_us_p50", "rtt_us_p99", "rtt_us_max", "rtt_codec_us_p50",
                        "rtt_codec_us_p99", "msgs_per_s", "rtt_vs_perftest",
                        "block_gb_s", "block_gb_s_one_block", "batch_us_p50", "batch_us_p99",
                        "batch_us_max", "block_vs_put_bw", "block_vs_tag_bw", "idle_cpu_pct",
                        "kv_path", "rtt_vs_node_perftest", "block_vs_node_put_bw",
                        "block_vs_node_tag_bw"})
    j[k] = json::object();
  for (const auto& sel : selections) {
    auto it = tessera.find(sel.key);
    const transport_probe_result empty;
    const auto& t = it == tessera.end() ? empty : it->second;
    const bool have = it != tessera.end();
    j["rtt_us_p50"][sel.key] = number_or_null(have ? t.rtt_us_p50 : missing);
    j["rtt_us_p99"][sel.key] = number_or_null(have ? t.rtt_us_p99 : missing);
    j["rtt_us_max"][sel.key] = number_or_null(have ? t.rtt_us_max : missing);
    j["rtt_codec_us_p50"][sel.key] = number_or_null(have ? t.rtt_codec_us_p50 : missing);
    j["rtt_codec_us_p99"][sel.key] = number_or_null(have ? t.rtt_codec_us_p99 : missing);
    j["msgs_per_s"][sel.key] = number_or_null(have ? t.msgs_per_s : missing);
    j["kv_path"][sel.key] = have ? json(t.kv_path) : json(nullptr);
    j["idle_cpu_pct"][sel.key] = {{"self", number_or_null(have ? t.idle_cpu_pct_self : missing)},
                                  {"peer", number_or_null(have ? t.idle_cpu_pct_peer : missing)}};
    j["block_gb_s"][sel.key] = by_size(t.block_gb_s, sizes);
    j["block_gb_s_one_block"][sel.key] = by_size(t.one_block_gb_s, sizes);
    j["batch_us_p50"][sel.key] = by_size(t.batch_us_p50, sizes);
    j["batch_us_p99"][sel.key] = by_size(t.batch_us_p99, sizes);
    j["batch_us_max"][sel.key] = by_size(t.batch_us_max, sizes);
    const auto* ours = have ? &t : nullptr;
    ratios_json(j, sel.key, ours, perftest_of(perftest, sel), sizes, "rtt_vs_perftest",
                "block_vs_put_bw", "block_vs_tag_bw");
    ratios_json(j, sel.key, ours, perftest_of(perftest_node, sel), sizes, "rtt_vs_node_perftest",
                "block_vs_node_put_bw", "block_vs_node_tag_bw");
  }
  j["ucx_perftest"] = perftest_json(perftest, sizes);
  j["ucx_perftest_node_setup"] = perftest_json(perftest_node, sizes);
  return j;
}

// figures_json of each round, in order.
std::vector<json> round_figures(const transport_bench_results& r) {
  std::vector<json> out;
  for (const auto& round : r.rounds)
    out.push_back(figures_json(r.selections, r.probe.batch_bytes, round.tessera, round.perftest,
                               round.perftest_node));
  return out;
}

// Each figure with ucx_perftest's of the same round, as the median over
// the rounds of the per-round ratios, under "rtt_vs_perftest",
// "block_vs_put_bw" and "block_vs_tag_bw": of the plain set-up's ratios,
// or with `node`, of the node set-up's (rtt_vs_node_perftest, ...).
json paired_ratios(const transport_bench_results& r, const std::vector<json>& rounds,
                   bool node = false) {
  const auto& sizes = r.probe.batch_bytes;
  // The median over rounds of j[key][sel] (or j[key][sel][size]); null
  // where no round has it.
  auto median_at = [&](const char* key, const std::string& sel, const std::string* size) {
    std::vector<double> v;
    for (const auto& f : rounds) {
      const auto& x = size ? f[key][sel][*size] : f[key][sel];
      if (x.is_number())
        v.push_back(x.get<double>());
    }
    return number_or_null(v.empty() ? missing : median_of(std::move(v)));
  };
  // (key written, key read in each round)
  const std::pair<const char*, const char*> keys[] = {
    {"rtt_vs_perftest", node ? "rtt_vs_node_perftest" : "rtt_vs_perftest"},
    {"block_vs_put_bw", node ? "block_vs_node_put_bw" : "block_vs_put_bw"},
    {"block_vs_tag_bw", node ? "block_vs_node_tag_bw" : "block_vs_tag_bw"},
  };
  json j;
  for (const auto& [out, in] : keys)
    j[out] = json::object();
  for (const auto& sel : r.selections) {
    j[keys[0].first][sel.key] = median_at(keys[0].second, sel.key, nullptr);
    for (const auto& [out, in] : {keys[1], keys[2]}) {
      j[out][sel.key] = json::object();
      for (auto b : sizes) {
        const auto size = std::to_string(b);
        j[out][sel.key][size] = median_at(in, sel.key, &size);
      }
    }
  }
  return j;
}

} // namespace

std::string transport_table(const transport_bench_results& r) {
  const auto& sizes = r.probe.batch_bytes;
  uint64_t frame_bytes = 0;
  for (const auto& [k, v] : r.tessera)
    frame_bytes = v.control_frame_bytes;
  std::string s = "Medians of " + std::to_string(r.rounds.size()) + " round(s).\n";
  s += "Control messages (wire heartbeat frames of " + std::to_string(frame_bytes)
       + " bytes); rtt = the frame sent back as it came; +codec = decoded and a new one "
         "encoded at each end; perftest = ucx_perftest tag_lat x 2 (a round trip) and tag_bw "
         "msg rate; node = ucx_perftest in a node's own set-up\n";
  s += pad("transport", 24, true) + pad("rtt p50 us", 11) + pad("rtt p99 us", 11)
       + pad("perftest rtt", 13) + pad("ratio", 7) + pad("node rtt", 9) + pad("ratio", 7)
       + pad("+codec p50", 11) + pad("msgs/s", 10)
       + pad("perftest msgs/s", 16) + pad("idle CPU % us/peer", 19) + "\n";
  for (const auto& sel : r.selections) {
    auto it = r.tessera.find(sel.key);
    const auto* p = perftest_of(r, sel);
    const double ours = it == r.tessera.end() ? missing : it->second.rtt_us_p50;
    const double theirs = perftest_rtt_us(p);
    const double node = perftest_rtt_us(perftest_of(r.perftest_node, sel));
    s += pad(sel.label, 24, true) + pad(cell(ours, 1), 11)
         + pad(cell(it == r.tessera.end() ? missing : it->second.rtt_us_p99, 1), 11)
         + pad(cell(theirs, 1), 13) + pad(cell(ours / theirs, 2), 7) + pad(cell(node, 1), 9)
         + pad(cell(ours / node, 2), 7)
         + pad(cell(it == r.tessera.end() ? missing : it->second.rtt_codec_us_p50, 1), 11)
         + pad(cell(it == r.tessera.end() ? missing : it->second.msgs_per_s, 0), 10)
         + pad(cell(p && p->tag_rate ? p->tag_rate->msgs_per_s : missing, 0), 16)
         + pad(cell(it == r.tessera.end() ? missing : it->second.idle_cpu_pct_self, 0) + "/"
                 + cell(it == r.tessera.end() ? missing : it->second.idle_cpu_pct_peer, 0),
               19)
         + "\n";
  }
  s += "\nKV block batches, GB/s (1e9 B/s): tessera = batches of "
       + size_label(r.probe.block_bytes) + " blocks"
       + (r.probe.scatter_blocks ? " (scattered: reverse order in the peer's pool)" : "")
       + (r.probe.allocated_regions ? ", regions allocated by the transport"
                                    : ", regions of heap memory registered")
       + (r.probe.grants ? ", secret + grants (a same-host peer of our uid: put over shared "
                           "memory; others: no rkeys, rendezvous into granted ranges)"
                         : "")
       + (r.probe.peer_acks ? ", timed transfer() -> the peer's ack message, "
                            : ", timed transfer() -> its done (every block landed), ")
       + std::to_string(r.window) + " in flight; range = tessera's lowest-highest round; "
         "put_bw, tag_bw = ucx_perftest as UCX_TLS alone sets it up; node = ucx_perftest in a "
         "node's own set-up (tcp: -e, UCX_NET_DEVICES=lo, the node's segment sizes, tag_bw; "
         "shm: UCX_TLS=sm,self, ucp_put_bw)\n";
  s += pad("transport [KV path]", 34, true) + pad("batch", 8) + pad("tessera", 9) + pad("range", 13)
       + pad("1-block", 9) + pad("batch p50/max us", 17) + pad("put_bw", 8) + pad("tag_bw", 8)
       + pad("/put_bw", 9) + pad("/tag_bw", 9) + pad("node", 8) + pad("/node", 7) + "\n";
  for (const auto& sel : r.selections) {
    auto it = r.tessera.find(sel.key);
    const auto* p = perftest_of(r, sel);
    for (auto b : sizes) {
      const double ours = it == r.tessera.end() ? missing : lookup(it->second.block_gb_s, b);
      const double one = it == r.tessera.end() ? missing : lookup(it->second.one_block_gb_s, b);
      const double us = it == r.tessera.end() ? missing : lookup(it->second.batch_us_p50, b);
      const double us_max = it == r.tessera.end() ? missing : lookup(it->second.batch_us_max, b);
      const double put = p ? perftest_gb_s(p->put_bw, b) : missing;
      const double tag = p ? perftest_gb_s(p->tag_bw, b) : missing;
      const double node = node_reference_gb_s(perftest_of(r.perftest_node, sel), b);
      double lo = missing, hi = missing;
      for (const auto& round : r.rounds)
        if (auto rt = round.tessera.find(sel.key); rt != round.tessera.end())
          if (const double v = lookup(rt->second.block_gb_s, b); std::isfinite(v)) {
            lo = std::isfinite(lo) ? std::min(lo, v) : v;
            hi = std::isfinite(hi) ? std::max(hi, v) : v;
          }
      const std::string kv = it == r.tessera.end() ? "?" : it->second.kv_path;
      s += pad(sel.label + " [" + kv + "]", 34, true) + pad(size_label(b), 8) + pad(cell(ours, 2), 9)
           + pad(cell(lo, 2) + "-" + cell(hi, 2), 13) + pad(cell(one, 2), 9) + pad(cell(us, 0) + "/" + cell(us_max, 0), 17) + pad(cell(put, 2), 8)
           + pad(cell(tag, 2), 8) + pad(cell(ours / put, 2), 9) + pad(cell(ours / tag, 2), 9)
           + pad(cell(node, 2), 8) + pad(cell(ours / node, 2), 7) + "\n";
    }
  }
  if (r.rounds.size() > 1) {
    // Each round's ratio pairs our figure with ucx_perftest's from the same
    // minutes; the machine's state can change between rounds.
    const auto rounds = round_figures(r);
    const auto paired = paired_ratios(r, rounds);
    const auto paired_node = paired_ratios(r, rounds, true);
    auto num = [](const json& x) { return x.is_number() ? x.get<double>() : missing; };
    s += "\nPaired (median over rounds of each round's ratio): round trip / perftest's; per batch "
         "size /put_bw and /tag_bw; then the same against ucx_perftest in a node's set-up\n";
    for (const auto& sel : r.selections)
      for (const auto* pj : {&paired, &paired_node}) {
        s += pad(sel.label + (pj == &paired ? "" : " /node"), 24, true)
             + pad(cell(num((*pj)["rtt_vs_perftest"][sel.key]), 2), 7);
        for (auto b : sizes) {
          const auto size = std::to_string(b);
          s += "  " + size_label(b) + " " + cell(num((*pj)["block_vs_put_bw"][sel.key][size]), 2)
               + " / " + cell(num((*pj)["block_vs_tag_bw"][sel.key][size]), 2);
        }
        s += "\n";
      }
  }
  for (const auto& [key, err] : r.errors)
    s += "\n" + key + " failed: " + err + "\n";
  if (!r.perftest_note.empty())
    s += "\nucx_perftest: " + r.perftest_note + "\n";
  for (const auto& [key, p] : r.perftest)
    for (const auto& e : p.errors)
      s += "ucx_perftest (" + key + "): " + e + "\n";
  for (const auto& [key, p] : r.perftest_node)
    for (const auto& e : p.errors)
      s += "ucx_perftest (" + key + ", node set-up): " + e + "\n";
  return s;
}


std::string transport_json(const transport_bench_results& r) {
  const auto& sizes = r.probe.batch_bytes;
  json j;
  j["benchmark"] = "transport";
  j["quick"] = r.quick;
  j["rounds"] = r.rounds.size();
  j["statistic"] = "median over rounds of each figure";
  j.update(figures_json(r.selections, sizes, r.tessera, r.perftest, r.perftest_node));
  auto rounds = round_figures(r);
  j["paired"] = paired_ratios(r, rounds);
  j["paired_node_setup"] = paired_ratios(r, rounds, true);
  j["ucx_perftest"]["available"] = r.perftest_note.empty();
  j["ucx_perftest"]["note"] = r.perftest_note;
  j["ucx_perftest_node_setup"]["available"] = r.perftest_note.empty();
  j["ucx_perftest_node_setup"]["note"] =
    r.perftest_note.empty() ? "ucx_perftest as a node's own UCX context runs (tcp: -e, "
                              "UCX_NET_DEVICES=lo, the node's tcp segment sizes, tag_bw only; "
                              "shm: UCX_TLS=sm,self, the same-host context), right after the "
                              "plain run"
                            : r.perftest_note;
  j["transports"] = json::object();
  for (const auto& sel : r.selections)
    j["transports"][sel.key] = {{"label", sel.label},
                                {"ucx_tls", sel.tls},
                                {"peer_error_handling", sel.peer_error_handling},
                                {"kv_path_option", std::string{transport::to_string(sel.kv_path)}},
                                {"perftest", sel.perftest_key}};
  j["per_round"] = json::array();
  for (size_t i = 0; i < r.rounds.size(); ++i) {
    const auto& round = r.rounds[i];
    auto& f = rounds[i];
    f["ucx_perftest"].erase("commands");
    f["ucx_perftest_node_setup"].erase("commands");
    f["idle_before_pct"] = round.idle_before_pct;
    f["load_avg_1min_before"] = round.load_before;
    json errors = json::object();
    for (const auto& [k, e] : round.errors)
      errors[k] = e;
    f["errors"] = errors;
    j["per_round"].push_back(f);
  }
  json errors = json::object();
  for (const auto& [k, e] : r.errors)
    errors[k] = e;
  j["errors"] = errors;
  const auto& o = r.probe;
  j["config"] = {{"batch_bytes", sizes},
                 {"block_bytes", o.block_bytes},
                 {"window", r.window},
                 {"scatter_blocks", o.scatter_blocks},
                 {"region_memory", o.allocated_regions ? "allocated" : "registered"},
                 {"grants", o.grants},
                 {"until", o.peer_acks ? "peer-ack" : "done"},
                 {"progress_spin_us", o.progress_spin_us},
                 {"rtt_warmup", o.rtt_warmup},
                 {"rtt_iterations", o.rtt_iterations},
                 {"msgs_warmup", o.msgs_warmup},
                 {"msgs", o.msgs},
                 {"stream_window", o.stream_window},
                 {"target_bytes_per_size", o.target_bytes},
                 {"min_batches", o.min_batches},
                 {"max_batches", o.max_batches},
                 {"warmup_batches", o.warmup_batches},
                 {"units", "GB/s = 1e9 bytes/s; ucx_perftest prints MiB/s, converted"}};
  j["machine"] = {{"cores", std::thread::hardware_concurrency()},
                  {"load_avg_1min_before", r.load_before},
                  {"load_avg_1min_after", r.load_after}};
  return j.dump(2) + "\n";
}

bar_chart transport_chart(const transport_bench_results& r) {
  bar_chart c;
  c.title = "KV block batches between two processes: Tessera vs ucx_perftest";
  c.y_label = "GB/s";
  c.log_y = true; // shm put_bw from cache reaches ~100 GB/s, tcp ~1
  c.series = {"tessera (" + size_label(r.probe.block_bytes) + " blocks)", "tessera (1 block)",
              "ucx_perftest ucp_put_bw", "ucx_perftest tag_bw", "ucx_perftest (node set-up)"};
  c.values.assign(c.series.size(), {});
  for (const auto& sel : r.selections) {
    auto it = r.tessera.find(sel.key);
    const auto* p = perftest_of(r, sel);
    for (auto b : r.probe.batch_bytes) {
      c.groups.push_back(sel.label + " " + size_label(b));
      c.values[0].push_back(it == r.tessera.end() ? missing : lookup(it->second.block_gb_s, b));
      c.values[1].push_back(it == r.tessera.end() ? missing : lookup(it->second.one_block_gb_s, b));
      c.values[2].push_back(p ? perftest_gb_s(p->put_bw, b) : missing);
      c.values[3].push_back(p ? perftest_gb_s(p->tag_bw, b) : missing);
      c.values[4].push_back(node_reference_gb_s(perftest_of(r.perftest_node, sel), b));
    }
  }
  return c;
}

} // namespace tessera::bench
