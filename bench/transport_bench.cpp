#include "bench/transport_bench.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <set>
#include <utility>

#include <caf/sec.hpp>

#include "bench/cpu_usage.hpp"
#include "bench/transport_report.hpp"
#include "common/child_process.hpp"
#include "common/error.hpp"

namespace tessera::bench {

namespace {

double load_average() {
  double l[1] = {0};
  return ::getloadavg(l, 1) == 1 ? l[0] : 0;
}

void progress(const std::string& what, const std::string& line) {
  std::fprintf(stderr, "bench transport: %s: %s\n", what.c_str(), line.c_str());
}

// Waits (at most 10 minutes) until the CPUs were `pct`% idle over 2 s;
// returns the last idle share seen.
double wait_for_idle(int pct) {
  using namespace std::chrono_literals;
  const auto deadline = std::chrono::steady_clock::now() + 10min;
  auto last_note = std::chrono::steady_clock::now();
  double idle = cpu_idle_pct(2s);
  while (idle < pct && std::chrono::steady_clock::now() < deadline) {
    if (std::chrono::steady_clock::now() - last_note > 30s) {
      progress("waiting", "CPUs " + std::to_string(static_cast<int>(idle)) + "% idle, want "
                            + std::to_string(pct) + "%");
      last_note = std::chrono::steady_clock::now();
    }
    idle = cpu_idle_pct(2s);
  }
  if (idle < pct)
    progress("waiting", "gave up after 10 minutes; measuring on a busy machine");
  return idle;
}

// Spawns the peer for `sel`, probes it, and waits for it to exit.
caf::expected<transport_probe_result> probe_selection(const std::string& self,
                                                      const transport_selection& sel,
                                                      const transport_probe_options& o) {
  using namespace std::chrono_literals;
  uint64_t pool = 1;
  for (auto b : o.batch_bytes)
    pool = std::max(pool, b);
  auto peer = child_process::spawn(self, {"bench", "transport", "--peer", "--peer-tls", sel.tls,
                                          "--peer-error-handling",
                                          sel.peer_error_handling ? "true" : "false",
                                          "--peer-pool-bytes", std::to_string(pool),
                                          "--peer-allocated", o.allocated_regions ? "true" : "false",
                                          "--peer-grants", o.grants ? "true" : "false",
                                          "--peer-progress-spin-us",
                                          std::to_string(o.progress_spin_us),
                                          "--peer-ack-blocks", o.peer_acks ? "true" : "false"});
  if (!peer)
    return peer.error();
  auto line = peer->read_line(30s);
  if (!line)
    return caf::make_error(caf::sec::runtime_error,
                           "bench: the peer did not start: " + error_text(line.error()));
  auto info = parse_peer_announcement(*line);
  if (!info)
    return info.error();
  info->pid = peer->pid();
  progress(sel.label, "peer pid " + std::to_string(peer->pid()) + " at " + info->address);
  auto r = run_transport_probe(sel, *info, o, [&](const std::string& l) { progress(sel.label, l); });
  // The probe's transport is gone (it said BYE); the peer exits on its own.
  auto code = peer->wait(10s);
  if (!code) {
    peer->kill();
    if (r)
      return caf::make_error(caf::sec::runtime_error, "bench: the peer did not exit after the probe");
  } else if (*code != 0 && r) {
    return caf::make_error(caf::sec::runtime_error,
                           "bench: the peer exited with code " + std::to_string(*code));
  }
  return r;
}

// ucx_perftest in `setup`: tag_lat and tag_bw at the control frame's size,
// then ucp_put_bw (where setup.put_bw) and tag_bw at every batch size,
// counts as our probe's. `label` names the run in progress lines.
perftest_figures run_perftests(const std::string& program, const std::string& label,
                               const perftest_setup& setup, const transport_probe_options& o,
                               uint64_t frame_bytes) {
  perftest_figures f;
  f.tls = setup.tls;
  auto run = [&](const std::string& test, uint64_t size, int n, int warmup) -> std::optional<perftest_result> {
    perftest_spec spec;
    spec.test = test;
    spec.size_bytes = size;
    spec.iterations = static_cast<uint64_t>(n);
    spec.warmup = static_cast<uint64_t>(warmup);
    spec.tls = setup.tls;
    spec.env = setup.env;
    spec.error_handling = setup.error_handling;
    spec.timeout = o.phase_timeout;
    f.commands.push_back(perftest_client_command(spec, 0));
    auto r = run_perftest(program, spec);
    if (!r) {
      f.errors.push_back(error_text(r.error()));
      progress("ucx_perftest " + label, test + " " + std::to_string(size) + " B failed: "
                                          + error_text(r.error()));
      return std::nullopt;
    }
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s %llu B: p50 %.2f us, %.2f GB/s, %.0f msgs/s", test.c_str(),
                  static_cast<unsigned long long>(size), r->latency_us_p50, r->bandwidth_gb_s(),
                  r->msgs_per_s);
    progress("ucx_perftest " + label, buf);
    return *r;
  };
  f.tag_lat = run("tag_lat", frame_bytes, o.rtt_iterations, o.rtt_warmup);
  f.tag_rate = run("tag_bw", frame_bytes, o.msgs, o.msgs_warmup);
  for (auto b : o.batch_bytes) {
    const int count = static_cast<int>(std::clamp<uint64_t>(o.target_bytes / b,
                                                            static_cast<uint64_t>(o.min_batches),
                                                            static_cast<uint64_t>(o.max_batches)));
    if (setup.put_bw)
      if (auto r = run("ucp_put_bw", b, count, o.warmup_batches))
        f.put_bw[b] = *r;
    if (auto r = run("tag_bw", b, count, o.warmup_batches))
      f.tag_bw[b] = *r;
  }
  return f;
}

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream f{path};
  f << text;
  if (!f)
    std::fprintf(stderr, "bench transport: cannot write %s\n", path.c_str());
  return static_cast<bool>(f);
}

} // namespace

transport_probe_options transport_probe_defaults(bool quick) {
  transport_probe_options o;
  // A full run repeats these per round (3 rounds by default).
  o.rtt_warmup = 1000;
  o.rtt_iterations = 10000;
  o.msgs_warmup = 10000;
  o.msgs = 100000;
  o.target_bytes = uint64_t{1} << 30;
  o.min_batches = 32;
  o.max_batches = 10000;
  o.warmup_batches = 8;
  if (quick) {
    o.rtt_warmup = 50;
    o.rtt_iterations = 500;
    o.msgs_warmup = 500;
    o.msgs = 2000;
    o.target_bytes = uint64_t{32} << 20;
    o.min_batches = 2;
    o.max_batches = 100;
    o.warmup_batches = 1;
    o.idle_window = std::chrono::milliseconds{200};
    o.phase_timeout = std::chrono::milliseconds{20000};
  }
  return o;
}

int run_transport_bench(const transport_bench_options& opts) {
  transport_bench_results r;
  r.quick = opts.quick;
  r.window = opts.window;
  r.probe = transport_probe_defaults(opts.quick);
  r.probe.block_bytes = opts.block_bytes;
  r.probe.window = opts.window;
  r.probe.scatter_blocks = opts.scatter_blocks;
  r.probe.peer_acks = opts.peer_acks;
  r.probe.allocated_regions = opts.allocated_regions;
  r.probe.grants = opts.grants;
  r.probe.progress_spin_us = opts.progress_spin_us;
  r.selections = default_transport_selections();
  r.load_before = load_average();
  // The peer is this binary: exec'ing /proc/self/exe (resolved in the
  // child, still our image) works even if the file was rebuilt meanwhile.
  const std::string self = "/proc/self/exe";
  if (!opts.transports.empty()) {
    std::erase_if(r.selections, [&](const transport_selection& s) {
      return std::find(opts.transports.begin(), opts.transports.end(), s.key) == opts.transports.end();
    });
    if (r.selections.empty()) {
      std::fprintf(stderr, "bench transport: no transport selection matches --transports "
                           "(known: tcp, shm, shm_err_peer)\n");
      return 2;
    }
  }
  if (auto expanded = with_kv_paths(r.selections, opts.kv_paths)) {
    r.selections = std::move(*expanded);
  } else {
    std::fprintf(stderr, "%s\n", error_text(expanded.error()).c_str());
    return 2;
  }
  std::string perftest;
  if (!opts.perftest)
    r.perftest_note = "not run (--no-perftest)";
  else if ((perftest = find_ucx_perftest()).empty())
    r.perftest_note = "not found in PATH (Debian package ucx-utils); its columns are empty";
  std::fprintf(stderr, "bench transport: %s run, load average %.2f, ucx_perftest: %s\n",
               opts.quick ? "quick" : "full", r.load_before,
               perftest.empty() ? r.perftest_note.c_str() : perftest.c_str());
  const uint64_t frame_bytes = control_frame(0).size();
  const int rounds = opts.rounds > 0 ? opts.rounds : (opts.quick ? 1 : 3);
  for (int i = 0; i < rounds; ++i) {
    transport_round round;
    round.idle_before_pct = opts.wait_idle_pct > 0 ? wait_for_idle(opts.wait_idle_pct)
                                                   : cpu_idle_pct(std::chrono::milliseconds{500});
    round.load_before = load_average();
    progress("round " + std::to_string(i + 1) + " of " + std::to_string(rounds),
             std::to_string(static_cast<int>(round.idle_before_pct)) + "% idle, load average "
               + std::to_string(round.load_before));
    std::set<std::string> perftest_done;
    for (const auto& sel : r.selections) {
      auto res = probe_selection(self, sel, r.probe);
      if (res) {
        round.tessera[sel.key] = *res;
      } else {
        round.errors[sel.key] = error_text(res.error());
        progress(sel.label, "failed: " + round.errors[sel.key]);
      }
      // ucx_perftest right after our first run on the same UCX_TLS, so
      // both see the machine in the same state: as the bench always ran
      // it, then in a node's own set-up.
      if (!perftest.empty() && perftest_done.insert(sel.perftest_key).second) {
        const auto& key = sel.perftest_key;
        if (opts.perftest_setup != perftest_setups::node)
          round.perftest[key] = run_perftests(perftest, key, plain_perftest_setup(sel), r.probe,
                                              frame_bytes);
        if (opts.perftest_setup != perftest_setups::plain)
          round.perftest_node[key] = run_perftests(perftest, key + " (node set-up)",
                                                   node_perftest_setup(sel), r.probe, frame_bytes);
      }
    }
    r.rounds.push_back(std::move(round));
  }
  summarize_rounds(r);
  r.load_after = load_average();
  std::printf("%s", transport_table(r).c_str());
  std::printf("load average (1 min): %.2f before, %.2f after\n", r.load_before, r.load_after);
  bool ok = r.errors.empty();
  if (!opts.json_path.empty())
    ok = write_file(opts.json_path, transport_json(r)) && ok;
  if (!opts.svg_path.empty())
    ok = write_file(opts.svg_path, render_svg(transport_chart(r))) && ok;
  return ok ? 0 : 1;
}

} // namespace tessera::bench
