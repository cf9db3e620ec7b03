#include "bench/trace_bench.hpp"

#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>

#include "bench/cpu_usage.hpp"
#include "bench/host_guard.hpp"
#include "bench/http_client.hpp"
#include "bench/mooncake_trace.hpp"
#include "bench/server_metrics.hpp"
#include "bench/server_process.hpp"
#include "bench/svg_chart.hpp"
#include "bench/trace_cache_optimum.hpp"
#include "bench/trace_replay.hpp"
#include "bench/trace_report.hpp"
#include "common/error.hpp"

namespace tessera::bench {

namespace {

using json = nlohmann::json;

void say(const std::string& line) { std::fprintf(stderr, "bench trace: %s\n", line.c_str()); }

std::string format(const char* fmt, double a, double b = 0, double c = 0) {
  char buf[256];
  std::snprintf(buf, sizeof buf, fmt, a, b, c);
  return buf;
}

std::string join(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words)
    out += (out.empty() ? "" : " ") + w;
  return out;
}

// Open loop means one socket per request in flight: allow as many as the
// hard limit does.
void raise_open_file_limit() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    (void)::setrlimit(RLIMIT_NOFILE, &rl);
  }
}

size_t open_file_limit() {
  rlimit rl{};
  return ::getrlimit(RLIMIT_NOFILE, &rl) == 0 ? static_cast<size_t>(rl.rlim_cur) : 0;
}

int print_comparison(const std::vector<std::string>& files) {
  std::vector<json> rows;
  for (const auto& f : files) {
    std::ifstream in{f};
    json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!in.is_open() || j.is_discarded() || !j.is_object() || !j.contains("hit_rate")) {
      say(f + ": not a `tessera bench trace --json` result");
      return 2;
    }
    rows.push_back(std::move(j));
  }
  std::printf("%s", trace_table(rows).c_str());
  return 0;
}

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream f{path};
  f << text;
  f.close();
  if (!f) {
    say("cannot write " + path);
    return false;
  }
  return true;
}

} // namespace

int run_trace_bench(const trace_bench_options& o) {
  if (!o.compare.empty())
    return print_comparison(o.compare);
  if (o.trace_path.empty()) {
    say("give the trace file (--trace)");
    return 2;
  }
  if (!(o.speedup > 0) || o.block_tokens < 1 || !(o.window_s > 0) || o.minutes < 0) {
    say("--speedup and --window must be above 0, --block-tokens at least 1, --minutes not negative");
    return 2;
  }
  if (!o.optimum_only && !o.spawn_server && o.url.empty()) {
    say("give the server's --url, or --spawn-server");
    return 2;
  }

  trace_parse_options po;
  po.block_tokens = o.block_tokens;
  auto trace = load_mooncake_trace(o.trace_path, po);
  if (!trace) {
    say(error_message(trace.error()));
    return 2;
  }
  if (trace->out_of_order_lines > 0)
    say(std::to_string(trace->out_of_order_lines) + " line(s) of " + o.trace_path +
        " arrive before the line above them; replaying in timestamp order");
  trace_selection sel;
  sel.minutes = o.minutes;
  sel.max_input_tokens = o.max_input_tokens;
  sel.max_requests = o.max_requests;
  size_t skipped_long = 0;
  const auto requests = select_requests(*trace, sel, &skipped_long);
  if (requests.empty()) {
    say("no request of " + o.trace_path + " is selected (--minutes, --max-input-tokens, --max-requests)");
    return 2;
  }
  const auto optimal_hits = optimal_prefix_hits(requests, o.block_tokens);
  const auto everything = optimal_prefix_reuse(trace->requests, o.block_tokens);
  prefix_reuse best;
  for (size_t i = 0; i < requests.size(); ++i) {
    best.input_tokens += requests[i].input_length;
    best.hit_tokens += optimal_hits[i];
  }
  const double span_s =
    static_cast<double>(requests.back().timestamp_ms - requests.front().timestamp_ms) / 1e3;
  auto optimum_text = [](const prefix_reuse& r) {
    return format("%.1f%% (", 100 * r.rate()) + token_count(r.hit_tokens) + " of " + token_count(r.input_tokens) +
           " input tokens)";
  };
  say(o.trace_path + ": " + std::to_string(trace->requests.size()) + " requests; unbounded-cache optimum " +
      optimum_text(everything));
  say("replaying " + std::to_string(requests.size()) + " request(s) over " +
      format("%.1f s of trace time (%.1f s at speed-up %g)", span_s, span_s / o.speedup, o.speedup) +
      (skipped_long ? ", " + std::to_string(skipped_long) + " skipped as longer than --max-input-tokens" : "") +
      "; their optimum " + optimum_text(best));

  json config;
  config["trace"] = o.trace_path;
  config["trace_requests"] = trace->requests.size();
  config["trace_out_of_order_lines"] = trace->out_of_order_lines;
  config["minutes"] = o.minutes;
  config["max_requests"] = o.max_requests;
  config["max_input_tokens"] = o.max_input_tokens;
  config["skipped_long_requests"] = skipped_long;
  config["speedup"] = o.speedup;
  config["max_output"] = o.max_output;
  config["block_tokens"] = o.block_tokens;
  config["token_range"] = {o.tokens.lo, o.tokens.hi};
  config["seed"] = o.seed;
  config["window_s"] = o.window_s;
  config["trace_optimal_hit_rate"] = everything.rate();

  if (o.optimum_only) {
    std::printf("%s: %zu requests, unbounded-cache optimum %s\n", o.trace_path.c_str(), requests.size(),
                optimum_text(best).c_str());
    if (!o.json_path.empty()) {
      json j;
      j["config"] = config;
      j["requests"] = requests.size();
      j["optimal_hit_rate"] = best.rate();
      j["optimal_hit_tokens"] = best.hit_tokens;
      j["optimal_input_tokens"] = best.input_tokens;
      if (!write_file(o.json_path, j.dump(2) + "\n"))
        return 1;
    }
    return 0;
  }

  raise_open_file_limit();
  std::optional<spawned_server> server;
  std::string url = o.url;
  std::string description;
  if (o.spawn_server) {
    server_spawn_options so;
    so.program = o.server_program;
    so.model_dir = o.model_dir;
    so.args = o.server_args;
    auto s = spawn_server(so, say);
    if (!s) {
      say(error_text(s.error()));
      return 1;
    }
    server.emplace(std::move(*s));
    url = server->url;
    description = server->description;
  }
  std::optional<server_stop> stopped;
  auto stop = [&] {
    if (server) {
      stopped = stop_server(*server, say);
      server.reset();
    }
  };
  auto ep = parse_http_url(url);
  if (!ep) {
    say(error_text(ep.error()));
    stop();
    return 2;
  }
  if (auto err = await_health(*ep, std::chrono::seconds{60}, o.spawn_server)) {
    say(error_text(err));
    stop();
    return 1;
  }
  metrics_endpoints metrics{*ep, {}};
  for (const auto& u : o.metrics_urls) {
    auto node = parse_http_url(u);
    if (!node) {
      say("--metrics: " + error_text(node.error()));
      stop();
      return 2;
    }
    // A node that does not answer now would leave its workers out of the
    // guard without a word: fail before the replay instead.
    if (auto m = scrape_by_label(*node, "tessera_engine_busy_seconds_total", "worker"); !m) {
      say("--metrics " + u + ": GET /metrics failed: " + error_text(m.error()));
      stop();
      return 1;
    }
    metrics.nodes.push_back(*node);
  }
  std::string model = o.model_name;
  if (model.empty()) {
    auto m = first_model(*ep);
    if (!m) {
      say(error_text(m.error()));
      stop();
      return 1;
    }
    model = *m;
  }

  trace_replay_options ro;
  ro.model = model;
  ro.speedup = o.speedup;
  ro.max_output = o.max_output;
  ro.block_tokens = o.block_tokens;
  ro.tokens = o.tokens;
  ro.seed = o.seed;
  ro.io_timeout = o.io_timeout;
  const size_t total = requests.size();
  auto progress = [&](const trace_progress& p) {
    say(format("%.0f s: ", p.elapsed_s) + std::to_string(p.sent) + " of " + std::to_string(total) + " sent, " +
        std::to_string(p.done) + " done, " + std::to_string(p.sent - p.done) + " in flight, " +
        std::to_string(p.errors) + " errors; hit rate " + format("%.1f%%", 100 * p.hit_rate) +
        format("; send lag max %.0f ms", 1e3 * p.max_lag_s));
  };
  // Each worker's busy share over the replay (the server's
  // tessera_engine_busy_seconds_total; a server without it reports none),
  // and what the host-saturation guard reads (host_guard.hpp).
  const auto busy_metric = "tessera_engine_busy_seconds_total";
  const auto delay_metric = "tessera_engine_step_delay_seconds_total";
  const auto asked_metric = "tessera_sim_step_wall_seconds_total";
  // The workers' prefix fetches from kv stores by outcome (hit, partial,
  // miss, skipped, late, rejected, failed), summed over the workers.
  const auto fetch_metric = "tessera_kvstore_fetch_total";
  // Each worker's preemptions and tokens computed over the replay: what
  // memory pressure cost (a preempted request is computed again).
  const auto preempt_metric = "tessera_engine_preemptions_total";
  const auto computed_metric = "tessera_engine_tokens_computed_total";
  auto scrape = [&](const char* metric) {
    auto m = scrape_cluster(metrics, metric, "worker", true);
    return m ? std::move(*m) : std::map<std::string, double>{};
  };
  // The router's KV admission over the replay (actors/router/kv_admission.hpp):
  // requests held for room, and those routed without it after max_wait.
  const std::map<std::string, const char*> admission_metrics = {
    {"waits", "tessera_router_kv_admission_waits_total"}, {"timeouts", "tessera_router_kv_admission_timeouts_total"}};
  auto scrape_admission = [&] {
    std::map<std::string, double> out;
    for (const auto& [what, metric] : admission_metrics)
      if (auto m = scrape_cluster(metrics, metric, "", false); m && m->count(""))
        out[what] = m->at("");
    return out;
  };
  const auto admission_before = scrape_admission();
  const auto preempt_before = scrape(preempt_metric);
  const auto computed_before = scrape(computed_metric);
  host_guard_input guard;
  guard.busy_s.before = scrape(busy_metric);
  guard.delay_s.before = scrape(delay_metric);
  guard.asked_s.before = scrape(asked_metric);
  if (guard.busy_s.before.empty())
    say("warning: no worker series on " + url + "/metrics" + (o.metrics_urls.empty() ? "" : " or --metrics") +
        ": the host guard cannot judge this run (a cluster whose workers are on other nodes: give "
        "their metrics endpoints with --metrics)");
  const auto fetches_before = scrape_cluster(metrics, fetch_metric, "outcome", false);
  const auto cpu_before = cpu_sample_now();
  const auto replay_started = std::chrono::steady_clock::now();
  // The server's autoscaling signal every 2 s of the replay (a server
  // without it gives no samples), at trace time = wall time x speedup.
  std::vector<autoscale_sample> scale_samples;
  std::mutex scale_mu;
  std::condition_variable scale_cv;
  bool replay_done = false;
  std::thread scaler{[&] {
    std::unique_lock lock{scale_mu};
    while (!scale_cv.wait_for(lock, std::chrono::seconds{2}, [&] { return replay_done; })) {
      lock.unlock();
      const double trace_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - replay_started).count() * o.speedup;
      auto rec = scrape_by_label(*ep, "tessera_autoscale_recommended_workers", "role", std::chrono::seconds{2});
      auto dem = scrape_by_label(*ep, "tessera_units_demanded_per_second", "role", std::chrono::seconds{2});
      lock.lock();
      if (rec && dem && !rec->empty()) {
        autoscale_sample s{trace_s, 0, 0};
        for (const auto& [role, v] : *rec)
          s.recommended_workers += v;
        for (const auto& [role, v] : *dem)
          s.units_demanded_per_s += v;
        scale_samples.push_back(s);
      }
    }
  }};
  auto replay = replay_trace(*ep, requests, ro, progress);
  {
    std::lock_guard lock{scale_mu};
    replay_done = true;
  }
  scale_cv.notify_all();
  scaler.join();
  const double interval = std::chrono::duration<double>(std::chrono::steady_clock::now() - replay_started).count();
  guard.host_cpu_busy = cpu_busy_share(cpu_before, cpu_sample_now());
  json busy = json::object();
  json fetches = json::object();
  json preemptions = json::object();
  json admission = json::object();
  json computed = json::object();
  // after - before per label value (a series absent before counts from 0),
  // into `out`.
  auto grew = [](const std::map<std::string, double>& before, const std::map<std::string, double>& after,
                 json& out) {
    for (const auto& [label, n] : after) {
      const auto b = before.find(label);
      out[label] = n - (b == before.end() ? 0.0 : b->second);
    }
  };
  if (replay) {
    grew(preempt_before, scrape(preempt_metric), preemptions);
    grew(admission_before, scrape_admission(), admission);
    grew(computed_before, scrape(computed_metric), computed);
    if (auto after = scrape_cluster(metrics, fetch_metric, "outcome", false); after && fetches_before)
      grew(*fetches_before, *after, fetches);
    guard.busy_s.after = scrape(busy_metric);
    guard.delay_s.after = scrape(delay_metric);
    guard.asked_s.after = scrape(asked_metric);
    if (interval > 0)
      for (const auto& [worker, seconds] : guard.busy_s.after)
        if (auto b = guard.busy_s.before.find(worker); b != guard.busy_s.before.end())
          busy[worker] = (seconds - b->second) / interval;
  }
  stop();
  if (!replay) {
    say(error_text(replay.error()));
    return 1;
  }
  if (replay->peak_in_flight + 64 > open_file_limit())
    say("warning: " + std::to_string(replay->peak_in_flight) + " requests were in flight at once, near the " +
        "open-file limit of " + std::to_string(open_file_limit()));

  const auto summary = summarize_trace(replay->samples, optimal_hits);
  guard.send_lag_p99_ms = summary.send_lag.p99_ms;
  const auto verdict = judge_host(guard);
  auto windows = trace_windows(replay->samples, optimal_hits, o.window_s);
  attach_autoscale(windows, scale_samples);
  const std::string label =
    !o.label.empty() ? o.label : o.spawn_server ? (o.server_args.empty() ? "serve" : join(o.server_args)) : url;
  json j = trace_summary_json(summary);
  j["label"] = label;
  config["url"] = o.spawn_server ? "(spawned) " + url : url;
  config["metrics_urls"] = o.metrics_urls;
  config["model"] = model;
  config["server"] = {{"spawned", o.spawn_server},
                      {"args", o.server_args},
                      {"model_dir", o.model_dir},
                      {"description", description}};
  j["config"] = config;
  j["worker_busy"] = busy;
  j["kv_fetch_outcomes"] = fetches;
  j["worker_preemptions"] = preemptions;
  j["router_kv_admission"] = admission;
  j["worker_tokens_computed"] = computed;
  j["host"] = host_guard_json(verdict, guard);
  j["host_bound"] = verdict.host_bound;
  j["host_bound_allowed"] = o.allow_host_bound;
  if (stopped)
    j["server_stop"] = {{"seconds", stopped->seconds},
                        {"exit_code", stopped->exit_code ? json(*stopped->exit_code) : json(nullptr)}};
  j["client"] = {{"connections_opened", replay->connections_opened}, {"peak_in_flight", replay->peak_in_flight}};
  json ws = json::array();
  for (const auto& w : windows)
    ws.push_back(trace_window_json(w));
  j["windows"] = std::move(ws);
  if (o.per_request_json) {
    json per = json::array();
    for (size_t i = 0; i < replay->samples.size(); ++i) {
      const auto& x = replay->samples[i];
      json r{{"line", requests[i].line},
             {"trace_s", x.trace_s},
             {"due_s", x.due_s},
             {"sent", x.sent},
             {"prompt_tokens", x.prompt_tokens},
             {"max_tokens", x.max_tokens},
             {"cached_tokens", x.cached_tokens},
             {"optimal_hit_tokens", optimal_hits[i]},
             {"output_tokens", x.timing.output_tokens}};
      if (x.sent) {
        r["sent_s"] = x.timing.start_s;
        r["end_s"] = x.timing.end_s;
        if (x.timing.first_token_s >= 0)
          r["ttft_ms"] = 1e3 * (x.timing.first_token_s - x.timing.start_s);
      }
      if (!x.timing.error.empty())
        r["error"] = x.timing.error;
      per.push_back(std::move(r));
    }
    j["per_request"] = std::move(per);
  }

  std::printf("\n%s", trace_table({j}).c_str());
  if (!scale_samples.empty())
    std::printf("\nper window of %.0f s of trace time, with the server's autoscaling signal (units "
                "demanded per second, workers recommended; tessera serve --slo-ttft-ms):\n%s",
                o.window_s, trace_timeline(windows).c_str());
  std::printf("(hit %% = cached / prompt tokens of the successful requests; opt %% = an unbounded cache on "
              "the same requests; prefill tok = prompt tokens computed; open loop at %gx the "
              "trace's arrival times; send lag p99 %.1f ms; %zu in flight at most)\n",
              o.speedup, summary.send_lag.p99_ms, replay->peak_in_flight);
  if (!busy.empty()) {
    std::string line = "engine busy over the replay:";
    for (const auto& [worker, share] : busy.items())
      line += " " + worker + format(" %.0f%%", 100 * share.get<double>());
    say(line);
  }
  if (!fetches.empty()) {
    std::string line = "kv store fetches over the replay (tessera_kvstore_fetch_total):";
    for (const auto& [outcome, n] : fetches.items())
      line += " " + outcome + format(" %.0f", n.get<double>());
    say(line);
  }
  say(format("host: CPUs %.0f%% busy over the replay; sim steps took %.2fx the modelled wall time",
             100 * guard.host_cpu_busy, verdict.stretch) +
      format(" and waited %.1f%% of it to start", 100 * verdict.delay_share) +
      (verdict.host_bound ? "; HOST-BOUND: " + verdict.reason +
                              (o.allow_host_bound ? "" : " (TTFT and ITL left out of the table; "
                                                         "--allow-host-bound shows them)")
                          : ""));
  if (summary.errors > 0)
    say(std::to_string(summary.errors) + " request(s) failed; first: " + summary.first_error);
  if (summary.missing_cached_tokens > 0)
    say(std::to_string(summary.missing_cached_tokens) +
        " successful response(s) had no usage.prompt_tokens_details.cached_tokens (counted as 0)");
  if (summary.prompt_token_mismatches > 0)
    say(std::to_string(summary.prompt_token_mismatches) +
        " response(s) counted other prompt tokens than were sent (the hit rate uses the server's count)");

  bool ok = summary.errors == 0;
  if (!o.svg_path.empty())
    ok = write_file(o.svg_path, render_svg(trace_charts(label, summary, windows))) && ok;
  if (!o.json_path.empty())
    ok = write_file(o.json_path, j.dump(2) + "\n") && ok;
  return ok ? 0 : 1;
}

} // namespace tessera::bench
