#include "bench/serve_bench.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>
#include <tessera/sdk.hpp>

#include "bench/engine_load.hpp"
#include "bench/http_client.hpp"
#include "bench/load_stats.hpp"
#include "bench/serve_rounds.hpp"
#include "bench/serve_sdk_level.hpp"
#include "bench/server_process.hpp"
#include "bench/completion_stream.hpp"
#include "bench/svg_chart.hpp"
#include "common/error.hpp"

namespace tessera::bench {

namespace {

using clock_type = std::chrono::steady_clock;
using json = nlohmann::json;

void say(const std::string& line) {
  std::fprintf(stderr, "bench serve: %s\n", line.c_str());
}

double seconds_between(clock_type::time_point a, clock_type::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// CPU seconds (user + system) this process has used.
double self_cpu_s() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

// CPU seconds (user + system) process `pid` has used, or -1 if unreadable.
double process_cpu_s(pid_t pid) {
  std::ifstream f{"/proc/" + std::to_string(pid) + "/stat"};
  std::string stat;
  if (!std::getline(f, stat))
    return -1;
  // Fields after the command name (which may hold spaces) in parentheses:
  // state is field 3; utime and stime are fields 14 and 15.
  const auto close = stat.rfind(')');
  if (close == std::string::npos)
    return -1;
  std::istringstream rest{stat.substr(close + 2)};
  std::string field;
  double utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14)
      utime = std::stod(field);
    if (i == 15)
      stime = std::stod(field);
  }
  return (utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// Context switches (voluntary + involuntary) of every thread of process
// `pid` so far, or -1 if unreadable. Many per second on a busy process mean
// threads that sleep and wake often, each wake-up taking a core from the
// compute threads for a moment.
double process_context_switches(pid_t pid) {
  std::error_code ec;
  const std::filesystem::path tasks{"/proc/" + std::to_string(pid) + "/task"};
  double total = 0;
  bool any = false;
  for (const auto& t : std::filesystem::directory_iterator{tasks, ec}) {
    std::ifstream f{t.path() / "status"};
    std::string line;
    while (std::getline(f, line))
      if (line.starts_with("voluntary_ctxt_switches:") || line.starts_with("nonvoluntary_ctxt_switches:")) {
        total += std::stod(line.substr(line.find(':') + 1));
        any = true;
      }
  }
  return any ? total : -1;
}

// Seconds all cores of the machine were busy so far (every process, ours
// included; /proc/stat), or -1.
double machine_busy_s() {
  std::ifstream f{"/proc/stat"};
  std::string cpu;
  double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  if (!(f >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal) || cpu != "cpu")
    return -1;
  return (user + nice + system + irq + softirq + steal) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// The 1-minute load average, or -1.
double load_average_1m() {
  std::ifstream f{"/proc/loadavg"};
  double v = -1;
  f >> v;
  return v;
}

std::string fixed2(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

/// The body of request `index` of a run.
std::string request_body(const std::string& model, uint64_t seed, uint64_t index, int prompt_tokens,
                         int output_tokens) {
  json j;
  j["model"] = model;
  j["prompt"] = load_prompt(seed, index, prompt_tokens);
  j["max_tokens"] = output_tokens;
  j["temperature"] = 0;
  j["ignore_eos"] = true;
  j["stream"] = true;
  j["stream_options"] = {{"include_usage", true}};
  return j.dump();
}

/// Drives one level over HTTP: hands out requests while the level lasts and
/// turns each connection's stream into a request_sample.
class http_level_driver final : public http_stream_observer {
public:
  http_level_driver(std::string label, std::string model, const load_level& level,
                    std::string authorization)
      : label_(std::move(label)), model_(std::move(model)), level_(level),
        authorization_(std::move(authorization)),
        t0_(clock_type::now()), last_progress_(t0_),
        deadline_(t0_ + std::chrono::duration_cast<clock_type::duration>(
                          std::chrono::duration<double>(level.duration_s))),
        active_(static_cast<size_t>(level.concurrency)) {}

  std::optional<http_post> next_request(int conn) override {
    if (level_.duration_s > 0 ? clock_type::now() >= deadline_ : issued_ >= level_.requests)
      return std::nullopt;
    if (samples_.size() >= 8 && ok_ == 0)
      return std::nullopt; // nothing succeeds: stop rather than pile up errors
    auto body = request_body(model_, level_.seed, level_.first_index + static_cast<uint64_t>(issued_),
                             level_.prompt_tokens, level_.output_tokens);
    ++issued_;
    auto& a = active_[static_cast<size_t>(conn)];
    a = {};
    a.sample.start_s = now_s();
    return http_post{"/v1/completions", std::move(body), authorization_};
  }

  void on_response(int conn, int status) override {
    active_[static_cast<size_t>(conn)].stream.on_response(status);
  }

  void on_body(int conn, std::string_view bytes) override {
    auto& a = active_[static_cast<size_t>(conn)];
    a.stream.on_body(bytes, now_s(), a.sample);
  }

  void on_complete(int conn, const std::string& error) override {
    auto& a = active_[static_cast<size_t>(conn)];
    auto& s = a.sample;
    a.stream.finish(error, now_s(), level_.output_tokens, s);
    if (s.error.empty()) {
      ++ok_;
      tokens_ += s.output_tokens;
    }
    samples_.push_back(std::move(s));
    const auto now = clock_type::now();
    if (now - last_progress_ >= std::chrono::seconds{2}) {
      last_progress_ = now;
      char line[200];
      const size_t errors = samples_.size() - ok_;
      std::snprintf(line, sizeof line, "%s, concurrency %d: %zu requests done, %zu errors, %.0f output tok/s",
                    label_.c_str(), level_.concurrency, samples_.size(), errors,
                    static_cast<double>(tokens_) / seconds_between(t0_, now));
      say(line);
    }
  }

  std::vector<request_sample> take_samples() { return std::move(samples_); }
  [[nodiscard]] int issued() const { return issued_; }

private:
  struct in_flight {
    request_sample sample;
    completion_stream stream;
  };

  double now_s() const { return seconds_between(t0_, clock_type::now()); }

  std::string label_;
  std::string model_;
  load_level level_;
  std::string authorization_; // "Bearer KEY", or empty
  clock_type::time_point t0_;
  clock_type::time_point last_progress_;
  clock_type::time_point deadline_;
  std::vector<in_flight> active_;
  std::vector<request_sample> samples_;
  int issued_ = 0;
  size_t ok_ = 0;
  int64_t tokens_ = 0;
};

json latency_json(const latency_percentiles& p) {
  return {{"count", p.count}, {"mean", p.mean_ms}, {"p50", p.p50_ms}, {"p90", p.p90_ms}, {"p99", p.p99_ms}};
}

json summary_json(const level_summary& s) {
  json j;
  j["concurrency"] = s.concurrency;
  j["requests"] = s.requests;
  j["errors"] = s.errors;
  if (!s.first_error.empty())
    j["first_error"] = s.first_error;
  j["wall_s"] = s.wall_s;
  j["output_tokens"] = s.output_tokens;
  j["requests_per_s"] = s.requests_per_s;
  j["output_tok_s"] = s.output_tok_s;
  j["ttft_ms"] = latency_json(s.ttft);
  j["itl_ms"] = latency_json(s.itl);
  j["tpot_ms"] = latency_json(s.tpot);
  return j;
}

/// One level's results: the server's, and the engine's if run.
struct level_result {
  load_level level;
  level_summary server;
  double load_avg_1m = -1;
  double client_cpu_s = 0;
  double server_cpu_s = -1;
  double server_context_switches = -1;
  double engine_cpu_s = -1;
  /// Cores other processes (other tenants) kept busy during the level.
  double other_cores = -1;
  double engine_other_cores = -1;
  std::optional<level_summary> engine;
  double engine_load_avg_1m = -1;
  /// The same level over the native SDK (--sdk): its first round.
  std::optional<level_summary> sdk;
  /// Every round of the level over each transport (--rounds), in order.
  std::vector<level_summary> http_rounds;
  std::vector<level_summary> sdk_rounds;
};

std::string triple(const latency_percentiles& p) {
  char buf[64];
  auto fmt = [](double v) {
    char b[16];
    std::snprintf(b, sizeof b, v >= 100 ? "%.0f" : "%.1f", v);
    return std::string{b};
  };
  std::snprintf(buf, sizeof buf, "%s/%s/%s", fmt(p.p50_ms).c_str(), fmt(p.p90_ms).c_str(),
                fmt(p.p99_ms).c_str());
  return buf;
}

void print_table(const std::vector<level_result>& results, bool engine) {
  std::printf("\n%5s %6s %5s %20s %17s %7s %9s", "conc", "reqs", "errs", "TTFT p50/90/99 ms",
              "ITL p50/90/99 ms", "req/s", "out tok/s");
  std::printf(" %11s", "cores s/c");
  if (engine)
    std::printf(" %9s %20s %17s %6s", "engine", "engine TTFT ms", "engine ITL ms", "ratio");
  std::printf("\n");
  for (const auto& r : results) {
    const auto& s = r.server;
    std::printf("%5d %6zu %5zu %20s %17s %7.2f %9.1f", s.concurrency, s.requests, s.errors,
                triple(s.ttft).c_str(), triple(s.itl).c_str(), s.requests_per_s, s.output_tok_s);
    // CPU the server (when spawned) and this client used, in cores over the level.
    char cores[32];
    if (s.wall_s > 0 && r.server_cpu_s >= 0)
      std::snprintf(cores, sizeof cores, "%.2f/%.2f", r.server_cpu_s / s.wall_s, r.client_cpu_s / s.wall_s);
    else if (s.wall_s > 0)
      std::snprintf(cores, sizeof cores, "-/%.2f", r.client_cpu_s / s.wall_s);
    else
      std::snprintf(cores, sizeof cores, "-");
    std::printf(" %11s", cores);
    if (engine && r.engine) {
      const auto& e = *r.engine;
      std::printf(" %9.1f %20s %17s %6.3f", e.output_tok_s, triple(e.ttft).c_str(), triple(e.itl).c_str(),
                  e.output_tok_s > 0 ? s.output_tok_s / e.output_tok_s : 0.0);
    }
    std::printf("\n");
  }
}

} // namespace

int run_serve_bench(const serve_bench_options& o) {
  if (o.concurrency.empty() || std::any_of(o.concurrency.begin(), o.concurrency.end(), [](int c) { return c < 1; })) {
    say("--concurrency needs levels of at least 1");
    return 2;
  }
  if (o.prompt_tokens < 1 || o.output_tokens < 1) {
    say("--prompt-tokens and --output-tokens must be at least 1");
    return 2;
  }
  if (!o.spawn_server && o.url.empty()) {
    say("give the server's --url, or --spawn-server");
    return 2;
  }
  const std::string bearer = o.api_key.empty() ? std::string{} : "Bearer " + o.api_key;
  if (o.rounds < 1 || (o.rounds > 1 && o.sdk_address.empty())) {
    say("--rounds must be at least 1, and more than 1 only with --sdk");
    return 2;
  }
  if (o.engine_baseline && o.model_dir.empty()) {
    say("--engine-baseline needs the model folder (--model-dir)");
    return 2;
  }

  auto level_for = [&](int c, uint64_t first_index) {
    load_level l;
    l.concurrency = c;
    l.requests = o.requests > 0 ? o.requests : std::max(8, 4 * c);
    l.duration_s = o.duration_s;
    l.prompt_tokens = o.prompt_tokens;
    l.output_tokens = o.output_tokens;
    l.seed = o.seed;
    l.first_index = first_index;
    return l;
  };
  // Warm-up requests use prompt indices far from the measured ones.
  auto warmup_level = [&] {
    auto w = level_for(1, uint64_t{1} << 40);
    w.requests = o.warmup_requests;
    w.duration_s = 0;
    return w;
  };
  stream_client_options copts;
  copts.io_timeout = o.io_timeout;

  // The server: spawned afresh for each level (so the engine-alone level
  // that follows has the cores to itself, and server and engine run minutes
  // apart at most: this host's memory bandwidth drifts), or the one at --url.
  std::optional<spawned_server> server;
  std::string url = o.url;
  std::string model = o.model_name;
  std::string server_description;
  http_endpoint ep;
  auto connect = [&]() -> bool {
    if (o.spawn_server) {
      server_spawn_options so;
      so.program = o.server_program;
      so.model_dir = o.model_dir;
      so.args = o.server_args;
      auto s = spawn_server(so, say);
      if (!s) {
        say(error_text(s.error()));
        return false;
      }
      server.emplace(std::move(*s));
      url = server->url;
      server_description = server->description;
    }
    auto parsed = parse_http_url(url);
    if (!parsed) {
      say(error_text(parsed.error()));
      return false;
    }
    ep = *parsed;
    if (auto err = await_health(ep, std::chrono::seconds{60}, o.spawn_server)) {
      say(error_text(err));
      return false;
    }
    if (model.empty()) {
      auto m = first_model(ep, bearer);
      if (!m) {
        say(error_text(m.error()));
        return false;
      }
      model = *m;
    }
    if (o.warmup_requests > 0) {
      auto w = warmup_level();
      say("warm-up: " + std::to_string(w.requests) + " request(s)");
      http_level_driver d{"warm-up", model, w, bearer};
      copts.connections = 1;
      if (auto err = run_stream_clients(ep, copts, d)) {
        say(error_text(err));
        return false;
      }
      auto sum = summarize_level(1, d.take_samples());
      if (sum.errors > 0) {
        say("warm-up failed: " + sum.first_error);
        return false;
      }
    }
    return true;
  };
  auto disconnect = [&] {
    if (server) {
      stop_server(*server, say);
      server.reset();
    }
  };

  std::unique_ptr<engine_load> eng;
  std::string engine_description;
  if (o.engine_baseline) {
    engine_load_options eo;
    eo.model = o.model_dir;
    eo.threads = o.engine_threads;
    eo.kv_cache_bytes = o.engine_kv_cache_bytes;
    eo.engine = o.engine_backend;
    auto opened = engine_load::open(eo);
    if (!opened) {
      say("engine baseline: " + error_text(opened.error()));
      return 1;
    }
    eng = std::move(*opened);
    engine_description = eng->description();
    say("engine alone: " + o.model_dir + ", " + engine_description);
    if (o.warmup_requests > 0)
      (void)eng->run(warmup_level(), say);
  }

  std::shared_ptr<sdk::client> sdk_client;
  const sdk_target sdk_at{o.sdk_address, o.sdk_secret_file, o.api_key, o.sdk_threads};
  if (!o.sdk_address.empty()) {
    if (o.spawn_server) {
      say("--sdk needs a tessera node cluster (--url and --sdk), not --spawn-server");
      return 2;
    }
    std::string why;
    sdk_client = connect_sdk(sdk_at, why);
    if (!sdk_client) {
      say("sdk: " + why);
      return 1;
    }
    if (o.warmup_requests > 0)
      (void)run_sdk_level(*sdk_client, sdk_at, warmup_level());
  }

  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  say(std::to_string(cores) + " cores, load average " + fixed2(load_average_1m()));
  if (!o.spawn_server && !connect())
    return 1;

  std::vector<level_result> results;
  uint64_t next_index = 0;
  bool failed = false;
  for (int c : o.concurrency) {
    if (o.spawn_server && !connect()) {
      disconnect();
      return 1;
    }
    level_result r;
    r.level = level_for(c, next_index);
    r.load_avg_1m = load_average_1m();
    say("server, concurrency " + std::to_string(c) + ": " +
        (o.duration_s > 0 ? fixed2(o.duration_s) + " s" : std::to_string(r.level.requests) + " requests") +
        " of " + std::to_string(o.prompt_tokens) + " prompt + " + std::to_string(o.output_tokens) +
        " output tokens (load average " + fixed2(r.load_avg_1m) + ")");
    // With --sdk, the level runs over both transports, --rounds times each,
    // in ABBA order; r.server and r.sdk keep each one's first round (with
    // the CPU figures), r.http_rounds and r.sdk_rounds every round.
    const auto order = sdk_client ? abba_order(o.rounds) : std::vector{serve_transport::http};
    int http_round = 0, sdk_round = 0;
    for (const auto transport : order) {
      char line[300];
      if (transport == serve_transport::sdk) {
        // Requests of the same shape over the native SDK, with prompts of
        // their own (the HTTP run's would hit the prefix cache).
        auto sdk_level = r.level;
        sdk_level.first_index = (uint64_t{1} << 32) + next_index;
        const double cpu0 = self_cpu_s();
        const auto sum = summarize_level(c, run_sdk_level(*sdk_client, sdk_at, sdk_level));
        const double client_cores = (self_cpu_s() - cpu0) / std::max(sum.wall_s, 1e-9);
        next_index += static_cast<uint64_t>(sum.requests);
        ++sdk_round;
        std::snprintf(line, sizeof line, "sdk, concurrency %d, round %d: %.1f output tok/s, TTFT p50 %.1f ms, "
                      "this client %.2f cores, %zu errors%s%s", c, sdk_round, sum.output_tok_s, sum.ttft.p50_ms,
                      client_cores, sum.errors, sum.errors ? "; first: " : "", sum.first_error.c_str());
        say(line);
        failed = failed || sum.errors > 0;
        if (!r.sdk)
          r.sdk = sum;
        r.sdk_rounds.push_back(sum);
        continue;
      }
      auto http_level = r.level;
      http_level.first_index = next_index;
      http_level_driver d{"server", model, http_level, bearer};
      copts.connections = c;
      const double cpu0 = self_cpu_s();
      const double server0 = server ? process_cpu_s(server->child.pid()) : -1;
      const double switches0 = server ? process_context_switches(server->child.pid()) : -1;
      const double busy0 = machine_busy_s();
      if (auto err = run_stream_clients(ep, copts, d)) {
        say(error_text(err));
        disconnect();
        return 1;
      }
      const double client_cpu_s = self_cpu_s() - cpu0;
      const double server_cpu_s = server && server0 >= 0 ? process_cpu_s(server->child.pid()) - server0 : -1;
      const double server_switches =
          server && switches0 >= 0 ? process_context_switches(server->child.pid()) - switches0 : -1;
      const double busy = machine_busy_s() - busy0;
      next_index += static_cast<uint64_t>(d.issued());
      const auto sum = summarize_level(c, d.take_samples());
      ++http_round;
      failed = failed || sum.errors > 0;
      std::snprintf(line, sizeof line, "server, concurrency %d%s: %.1f output tok/s, TTFT p50 %.1f ms, this client "
                    "%.2f cores, %zu errors%s%s", c,
                    order.size() > 2 ? (", round " + std::to_string(http_round)).c_str() : "", sum.output_tok_s,
                    sum.ttft.p50_ms, client_cpu_s / std::max(sum.wall_s, 1e-9), sum.errors,
                    sum.errors ? "; first: " : "", sum.first_error.c_str());
      say(line);
      r.http_rounds.push_back(sum);
      if (http_round > 1)
        continue;
      r.level.requests = d.issued();
      r.server = sum;
      r.client_cpu_s = client_cpu_s;
      r.server_cpu_s = server_cpu_s;
      r.server_context_switches = server_switches;
      if (busy0 >= 0 && r.server_cpu_s >= 0 && r.server.wall_s >= 1) // ticks are 10 ms
        r.other_cores = std::max(0.0, (busy - r.server_cpu_s - r.client_cpu_s) / r.server.wall_s);
      if (r.server_cpu_s >= 0 && r.server.wall_s > 0) {
        std::snprintf(line, sizeof line, "server, concurrency %d: the server used %.2f cores, %.0f context "
                      "switches/s; this client %.2f cores; other processes %s", c, r.server_cpu_s / r.server.wall_s,
                      r.server_context_switches / r.server.wall_s, r.client_cpu_s / r.server.wall_s,
                      r.other_cores >= 0 ? fixed2(r.other_cores).c_str() : "n/a (level under 1 s)");
        say(line);
      }
    }
    if (o.spawn_server)
      disconnect();

    if (eng) {
      char line[200];
      // The same requests (prompt indices) on the engine alone.
      r.engine_load_avg_1m = load_average_1m();
      say("engine alone, concurrency " + std::to_string(c) + " (load average " +
          fixed2(r.engine_load_avg_1m) + ")");
      const double ecpu0 = self_cpu_s();
      const double ebusy0 = machine_busy_s();
      r.engine = summarize_level(c, eng->run(r.level, say));
      r.engine_cpu_s = self_cpu_s() - ecpu0;
      if (ebusy0 >= 0 && r.engine->wall_s >= 1)
        r.engine_other_cores = std::max(0.0, (machine_busy_s() - ebusy0 - r.engine_cpu_s) / r.engine->wall_s);
      std::snprintf(line, sizeof line, "engine alone, concurrency %d: %.1f output tok/s; it used %.2f cores, "
                    "other processes %s", c, r.engine->output_tok_s,
                    r.engine_cpu_s / std::max(r.engine->wall_s, 1e-9),
                    r.engine_other_cores >= 0 ? fixed2(r.engine_other_cores).c_str() : "n/a (level under 1 s)");
      say(line);
      failed = failed || r.engine->errors > 0;
    }
    results.push_back(std::move(r));
  }
  disconnect();

  print_table(results, o.engine_baseline);
  std::printf("(%d prompt + %d output tokens per request; closed loop, each client sends its next request "
              "when the last ends; tok/s = output tokens / wall time%s)\n",
              o.prompt_tokens, o.output_tokens,
              o.engine_baseline ? "; ratio = server / engine alone, same requests" : "");
  if (sdk_client) {
    // One table of both transports: every round aggregated (one round:
    // its figures).
    std::vector<sdk_table_row> rows;
    for (const auto& r : results)
      if (!r.sdk_rounds.empty())
        rows.push_back({r.level.concurrency, aggregate_rounds(r.http_rounds), aggregate_rounds(r.sdk_rounds)});
    std::printf("\n%s", sdk_table(rows, o.rounds).c_str());
  }

  if (!o.svg_path.empty()) {
    chart ch;
    ch.title = "Output tokens/s, " + std::to_string(o.prompt_tokens) + " prompt + " +
               std::to_string(o.output_tokens) + " output tokens per request";
    ch.x_label = "concurrent requests";
    ch.y_label = "output tokens/s";
    chart_series srv{"tessera serve", {}};
    chart_series eng{"engine alone", {}};
    for (const auto& r : results) {
      srv.points.emplace_back(r.level.concurrency, r.server.output_tok_s);
      if (r.engine)
        eng.points.emplace_back(r.level.concurrency, r.engine->output_tok_s);
    }
    ch.series.push_back(std::move(srv));
    if (!eng.points.empty())
      ch.series.push_back(std::move(eng));
    std::ofstream f{o.svg_path};
    f << render_svg(ch);
    if (!f) {
      say("cannot write " + o.svg_path);
      return 1;
    }
  }
  if (!o.json_path.empty()) {
    json j;
    j["url"] = o.spawn_server ? "(spawned) " + url : url;
    j["model"] = model;
    j["model_dir"] = o.model_dir;
    j["server"] = {{"spawned", o.spawn_server}, {"args", o.server_args}, {"description", server_description}};
    j["prompt_tokens"] = o.prompt_tokens;
    j["output_tokens"] = o.output_tokens;
    j["requests_per_level"] = o.duration_s > 0 ? 0 : o.requests;
    j["duration_s"] = o.duration_s;
    j["warmup_requests"] = o.warmup_requests;
    j["seed"] = o.seed;
    j["rounds"] = o.rounds;
    j["cores"] = cores;
    if (o.engine_baseline)
      j["engine"] = {{"description", engine_description},
                     {"threads", o.engine_threads},
                     {"kv_cache_bytes", o.engine_kv_cache_bytes}};
    json levels = json::array();
    for (const auto& r : results) {
      json l = summary_json(r.server);
      l["load_avg_1m"] = r.load_avg_1m;
      l["client_cpu_s"] = r.client_cpu_s;
      if (r.other_cores >= 0)
        l["other_processes_cores"] = r.other_cores;
      if (r.server_cpu_s >= 0)
        l["server_cpu_s"] = r.server_cpu_s;
      if (r.server_context_switches >= 0 && r.server.wall_s > 0)
        l["server_context_switches_per_s"] = r.server_context_switches / r.server.wall_s;
      if (r.sdk) {
        l["sdk"] = summary_json(*r.sdk);
        l["sdk_vs_http"] = r.server.output_tok_s > 0 ? r.sdk->output_tok_s / r.server.output_tok_s : 0.0;
        const auto h = aggregate_rounds(r.http_rounds);
        const auto k = aggregate_rounds(r.sdk_rounds);
        auto spread = [](const round_spread& v) { return json{{"median", v.median}, {"min", v.min}, {"max", v.max}}; };
        auto rounds = [&](const std::vector<level_summary>& all, const transport_rounds& t) {
          json a = json::array();
          for (const auto& one : all)
            a.push_back(summary_json(one));
          return json{{"rounds", std::move(a)}, {"output_tok_s", spread(t.output_tok_s)},
                      {"ttft_p50_ms", spread(t.ttft_p50_ms)}, {"ttft_p90_ms", spread(t.ttft_p90_ms)},
                      {"errors", t.errors}};
        };
        l["rounds"] = {{"order", "abba"}, {"http", rounds(r.http_rounds, h)}, {"sdk", rounds(r.sdk_rounds, k)},
                       {"sdk_vs_http_median", median_ratio(h, k)}};
      }
      if (r.engine) {
        l["engine"] = summary_json(*r.engine);
        l["engine"]["load_avg_1m"] = r.engine_load_avg_1m;
        l["engine"]["cpu_s"] = r.engine_cpu_s;
        if (r.engine_other_cores >= 0)
          l["engine"]["other_processes_cores"] = r.engine_other_cores;
        l["server_vs_engine"] = r.engine->output_tok_s > 0 ? r.server.output_tok_s / r.engine->output_tok_s : 0.0;
      }
      levels.push_back(std::move(l));
    }
    j["levels"] = std::move(levels);
    std::ofstream f{o.json_path};
    f << j.dump(2) << "\n";
    if (!f) {
      say("cannot write " + o.json_path);
      return 1;
    }
  }
  return failed ? 1 : 0;
}

} // namespace tessera::bench
