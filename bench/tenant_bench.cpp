#include "bench/tenant_bench.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>

#include <caf/sec.hpp>
#include <nlohmann/json.hpp>

#include "bench/completion_stream.hpp"
#include "bench/http_client.hpp"
#include "bench/load_stats.hpp"
#include "bench/server_process.hpp"
#include "common/error.hpp"
#include "engine/model_units.hpp"

namespace tessera::bench {

namespace {

using clock_type = std::chrono::steady_clock;
using json = nlohmann::json;

void say(const std::string& line) {
  std::fprintf(stderr, "bench tenants: %s\n", line.c_str());
}

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

/// The two tenants: 0 = A (flood), 1 = B (steady).
struct tenant_keys {
  std::string key[2];
  [[nodiscard]] std::string bearer(int t) const { return "Bearer " + key[t]; }
};

const char* const tenant_name[2] = {"flood", "steady"};

std::string random_key(std::mt19937_64& rng) {
  static const char hex[] = "0123456789abcdef";
  std::string k = "sk-bench-";
  for (int i = 0; i < 32; ++i)
    k += hex[rng() % 16];
  return k;
}

/// Writes the key file (mode 600: it holds plaintext keys): A limited to
/// `a_units_per_minute` when set.
caf::error write_keys(const std::filesystem::path& path, const tenant_keys& keys,
                      const tenant_bench_options& o, std::optional<double> a_units_per_minute) {
  std::ofstream f{path, std::ios::trunc};
  f << "[[key]]\nkey = \"" << keys.key[0] << "\"\ntenant = \"" << tenant_name[0]
    << "\"\npriority = " << o.a_priority << "\n";
  if (a_units_per_minute) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3f", *a_units_per_minute);
    f << "units_per_minute = " << buf << "\n";
  }
  f << "\n[[key]]\nkey = \"" << keys.key[1] << "\"\ntenant = \"" << tenant_name[1]
    << "\"\npriority = " << o.b_priority << "\n";
  f.close();
  if (!f || ::chmod(path.c_str(), 0600) != 0)
    return caf::make_error(caf::sec::runtime_error, "cannot write the key file " + path.string());
  return {};
}

std::string request_body(const std::string& model, uint64_t seed, uint64_t index, const tenant_bench_options& o) {
  json j;
  j["model"] = model;
  j["prompt"] = load_prompt(seed, index, o.prompt_tokens);
  j["max_tokens"] = o.output_tokens;
  j["temperature"] = 0;
  j["ignore_eos"] = true;
  j["stream"] = true;
  j["stream_options"] = {{"include_usage", true}};
  return j.dump();
}

/// One request of a run and what came of it.
struct tenant_request {
  int tenant = 0;
  uint64_t prompt_index = 0;
  int status = 0;
  request_sample sample;
  completion_stream stream;
};

/// Closed loop: `concurrency` clients of tenant B for `seconds`.
class closed_loop final : public http_stream_observer {
public:
  closed_loop(const tenant_bench_options& o, std::string model, const tenant_keys& keys, int concurrency,
              double seconds, uint64_t first_index)
      : o_(o), model_(std::move(model)), keys_(keys), seconds_(seconds), next_index_(first_index),
        active_(static_cast<size_t>(concurrency)), t0_(clock_type::now()) {}

  std::optional<http_post> next_request(int conn) override {
    if (seconds_since(t0_) >= seconds_ || (done_ >= 8 && ok_ == 0))
      return std::nullopt;
    auto& a = active_[static_cast<size_t>(conn)];
    a = {};
    a.tenant = 1;
    a.sample.start_s = seconds_since(t0_);
    return http_post{"/v1/completions", request_body(model_, o_.seed, next_index_++, o_), keys_.bearer(1)};
  }
  void on_response(int conn, int status) override { active_[static_cast<size_t>(conn)].stream.on_response(status); }
  void on_body(int conn, std::string_view bytes) override {
    auto& a = active_[static_cast<size_t>(conn)];
    a.stream.on_body(bytes, seconds_since(t0_), a.sample);
  }
  void on_complete(int conn, const std::string& error) override {
    auto& a = active_[static_cast<size_t>(conn)];
    a.stream.finish(error, seconds_since(t0_), o_.output_tokens, a.sample);
    ++done_;
    if (a.sample.error.empty()) {
      ++ok_;
      last_end_s_ = std::max(last_end_s_, a.sample.end_s);
    } else if (first_error_.empty()) {
      first_error_ = a.sample.error;
    }
  }

  [[nodiscard]] double requests_per_s() const { return last_end_s_ > 0 ? static_cast<double>(ok_) / last_end_s_ : 0; }
  [[nodiscard]] size_t ok() const { return ok_; }
  [[nodiscard]] const std::string& first_error() const { return first_error_; }

private:
  const tenant_bench_options& o_;
  std::string model_;
  const tenant_keys& keys_;
  double seconds_;
  uint64_t next_index_;
  std::vector<tenant_request> active_;
  clock_type::time_point t0_;
  size_t done_ = 0, ok_ = 0;
  double last_end_s_ = 0;
  std::string first_error_;
};

/// Open loop: each request of `requests` at its own time.
class open_loop final : public http_open_loop_observer {
public:
  open_loop(const tenant_bench_options& o, std::string model, const tenant_keys& keys,
            std::vector<tenant_request>& requests)
      : o_(o), model_(std::move(model)), keys_(keys), requests_(requests), t0_(clock_type::now()) {}

  std::optional<http_post> make_request(size_t index) override {
    auto& r = requests_[index];
    r.sample.start_s = seconds_since(t0_);
    return http_post{"/v1/completions", request_body(model_, o_.seed, r.prompt_index, o_), keys_.bearer(r.tenant)};
  }
  void on_response(size_t index, int status) override {
    requests_[index].status = status;
    requests_[index].stream.on_response(status);
  }
  void on_body(size_t index, std::string_view bytes) override {
    auto& r = requests_[index];
    r.stream.on_body(bytes, seconds_since(t0_), r.sample);
  }
  void on_complete(size_t index, const std::string& error) override {
    auto& r = requests_[index];
    r.stream.finish(error, seconds_since(t0_), o_.output_tokens, r.sample);
    ++done_;
  }
  void on_tick() override {
    char line[160];
    std::snprintf(line, sizeof line, "%.0f s: %zu of %zu requests ended", seconds_since(t0_), done_,
                  requests_.size());
    say(line);
  }

private:
  const tenant_bench_options& o_;
  std::string model_;
  const tenant_keys& keys_;
  std::vector<tenant_request>& requests_;
  clock_type::time_point t0_;
  size_t done_ = 0;
};

/// Poisson arrivals of `tenant` at `rate_per_s` for `seconds`.
void add_arrivals(std::vector<std::pair<double, tenant_request>>& out, int tenant, double rate_per_s, double seconds,
                  std::mt19937_64& rng, uint64_t& next_index) {
  if (rate_per_s <= 0)
    return;
  std::exponential_distribution<double> gap{rate_per_s};
  for (double t = gap(rng); t < seconds; t += gap(rng)) {
    tenant_request r;
    r.tenant = tenant;
    r.prompt_index = next_index++;
    out.emplace_back(t, std::move(r));
  }
}

/// What one tenant got in one phase.
struct tenant_outcome {
  size_t sent = 0, ok = 0, rate_limited = 0, timeouts = 0, errors = 0, lost = 0;
  latency_percentiles ttft;
  std::string first_error;
};

tenant_outcome outcome_of(const std::vector<tenant_request>& rs, int tenant) {
  tenant_outcome o;
  std::vector<double> ttft;
  for (const auto& r : rs) {
    if (r.tenant != tenant)
      continue;
    ++o.sent;
    const auto& e = r.sample.error;
    if (e.empty()) {
      ++o.ok;
      ttft.push_back(r.sample.first_token_s - r.sample.start_s);
      continue;
    }
    if (r.status == 429) {
      ++o.rate_limited;
      continue;
    }
    if (o.first_error.empty())
      o.first_error = e;
    // An answer that says it failed (an error status, an error event, a
    // wrong token count) is an error; no answer in time, or a stream or
    // connection that broke, is a lost request.
    // The client's own failures read "connect: ...", "write: ...",
    // "read: ..." (a timeout among them).
    const bool client = e.starts_with("connect: ") || e.starts_with("write: ") || e.starts_with("read: ");
    if (client && e.find("timeout") != std::string::npos) {
      ++o.timeouts;
      ++o.lost;
    } else if (client || r.status == 0 || e == "the stream ended without [DONE]") {
      ++o.lost;
    } else {
      ++o.errors;
    }
  }
  o.ttft = latency_percentiles_ms(ttft);
  return o;
}

json to_json(const tenant_outcome& o) {
  return {{"sent", o.sent},          {"ok", o.ok},
          {"rate_limited", o.rate_limited}, {"timeouts", o.timeouts},
          {"errors", o.errors},      {"lost", o.lost},
          {"ttft_ms", {{"count", o.ttft.count}, {"p50", o.ttft.p50_ms}, {"p90", o.ttft.p90_ms}, {"p99", o.ttft.p99_ms}}},
          {"first_error", o.first_error}};
}

/// The value after `flag` in `args`, or `fallback`.
std::string arg_after(const std::vector<std::string>& args, const std::string& flag, const std::string& fallback) {
  for (size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == flag)
      return args[i + 1];
  return fallback;
}

/// A running server of the benchmark: spawned, healthy, warmed up.
struct bench_server {
  spawned_server server;
  http_endpoint ep;
  std::string model;
};

caf::expected<bench_server> start_server(const tenant_bench_options& o, const std::filesystem::path& key_file,
                                         const tenant_keys& keys) {
  server_spawn_options so;
  so.program = o.server_program;
  so.model_dir = o.model_dir;
  so.args = o.server_args;
  so.args.insert(so.args.end(), {"--api-keys", key_file.string()});
  auto s = spawn_server(so, say);
  if (!s)
    return s.error();
  auto ep = parse_http_url(s->url);
  if (!ep)
    return ep.error();
  if (auto err = await_health(*ep, std::chrono::seconds{300}, true))
    return err;
  std::string model = o.model_name;
  if (model.empty()) {
    auto m = first_model(*ep, keys.bearer(1));
    if (!m)
      return m.error();
    model = *m;
  }
  // One unmeasured request: pages the weights in.
  auto warm = http_fetch(*ep, "POST", "/v1/completions", request_body(model, o.seed ^ 0x5eed, 0, o), o.io_timeout,
                         keys.bearer(1));
  if (!warm || warm->status != 200)
    return caf::make_error(caf::sec::runtime_error,
                           "the warm-up request failed: " + (warm ? "HTTP " + std::to_string(warm->status) + " " +
                                                                      warm->body.substr(0, 300)
                                                                  : error_text(warm.error())));
  return bench_server{std::move(*s), *ep, std::move(model)};
}

std::string ms(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

} // namespace

int run_tenant_bench(const tenant_bench_options& o) {
  if (o.server_program.empty() || o.model_dir.empty() || o.phase_s <= 0 || o.calibrate_s <= 0 ||
      o.calibrate_concurrency < 1 || o.flood_factor < 0 || o.b_share <= 0 || o.a_limit_share <= 0) {
    say("needs a server program, a model folder, positive phase and capacity-run lengths, at least one "
        "capacity client, b_share > 0, a_limit_share > 0 and flood_factor >= 0");
    return 1;
  }
  const auto units_key = engine::units_engine_key(arg_after(o.server_args, "--engine", "cpu"),
                                                  arg_after(o.server_args, "--sim-gpu", "h100"));
  auto units = engine::serving_units(o.model_dir, units_key);
  if (!units) {
    say(error_text(units.error()));
    return 1;
  }
  const double cost = units->cost(o.prompt_tokens, o.output_tokens);
  std::mt19937_64 rng{o.seed * 0x9e3779b97f4a7c15ULL + 1};
  tenant_keys keys{{random_key(rng), random_key(rng)}};
  char tmpl[] = "/tmp/tessera-bench-tenants-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) {
    say("cannot make a temporary folder");
    return 1;
  }
  const std::filesystem::path dir{tmpl};
  struct cleanup {
    std::filesystem::path dir;
    ~cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } cleanup_dir{dir};
  const auto key_file = dir / "keys.toml";

  // Capacity: both tenants unlimited, closed loop.
  if (auto err = write_keys(key_file, keys, o, std::nullopt)) {
    say(error_text(err));
    return 1;
  }
  double capacity_rps = 0;
  std::string model;
  {
    auto s = start_server(o, key_file, keys);
    if (!s) {
      say(error_text(s.error()));
      return 1;
    }
    model = s->model;
    say("capacity run: " + std::to_string(o.calibrate_concurrency) + " clients for " + ms(o.calibrate_s) + " s");
    closed_loop cal{o, model, keys, o.calibrate_concurrency, o.calibrate_s, 1u << 20};
    stream_client_options sco;
    sco.connections = o.calibrate_concurrency;
    sco.io_timeout = o.io_timeout;
    auto err = run_stream_clients(s->ep, sco, cal);
    stop_server(s->server, say);
    if (err || cal.ok() == 0) {
      say("the capacity run failed: " + (err ? error_text(err) : cal.first_error()));
      return 1;
    }
    capacity_rps = cal.requests_per_s();
  }
  const double capacity_upm = capacity_rps * 60.0 * cost;
  const double a_upm = std::max(o.a_limit_share * capacity_upm, 2.0 * units->admission(o.prompt_tokens));
  char line[400];
  std::snprintf(line, sizeof line,
                "capacity %.2f requests/s = %.0f units/min (%.1f units per request: a=%g b=%g c=%g, '%s'); "
                "A's units_per_minute %.0f",
                capacity_rps, capacity_upm, cost, units->per_input_token, units->per_output_token,
                units->per_request, units_key.c_str(), a_upm);
  say(line);

  if (auto err = write_keys(key_file, keys, o, a_upm)) {
    say(error_text(err));
    return 1;
  }
  auto s = start_server(o, key_file, keys);
  if (!s) {
    say(error_text(s.error()));
    return 1;
  }
  uint64_t next_index = 0;
  auto run_phase = [&](bool flood) {
    std::vector<std::pair<double, tenant_request>> timed;
    add_arrivals(timed, 1, o.b_share * capacity_rps, o.phase_s, rng, next_index);
    if (flood)
      add_arrivals(timed, 0, o.flood_factor * capacity_rps, o.phase_s, rng, next_index);
    std::stable_sort(timed.begin(), timed.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    std::vector<tenant_request> rs;
    std::vector<std::chrono::nanoseconds> at;
    for (auto& [t, r] : timed) {
      at.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(t)));
      rs.push_back(std::move(r));
    }
    say(std::string{flood ? "phase 2: B beside A's flood, " : "phase 1: B alone, "} + std::to_string(rs.size()) +
        " requests over " + ms(o.phase_s) + " s");
    open_loop obs{o, s->model, keys, rs};
    open_loop_options olo;
    olo.io_timeout = o.io_timeout;
    olo.tick = std::chrono::seconds{5};
    auto r = run_open_loop(s->ep, olo, at, obs);
    if (!r)
      say("phase failed: " + error_text(r.error()));
    return rs;
  };
  auto alone = run_phase(false);
  auto mixed = run_phase(true);
  stop_server(s->server, say);

  const auto b1 = outcome_of(alone, 1);
  const auto b2 = outcome_of(mixed, 1);
  const auto a2 = outcome_of(mixed, 0);
  const double ratio = b1.ttft.p50_ms > 0 ? b2.ttft.p50_ms / b1.ttft.p50_ms : 0;
  const size_t lost = b1.lost + b2.lost + a2.lost;

  std::printf("two tenants on one server: %d prompt + %d output tokens per request, capacity %.2f requests/s\n",
              o.prompt_tokens, o.output_tokens, capacity_rps);
  std::printf("A (flood): priority %d, units_per_minute %.0f (%.2fx capacity), offered %.1fx capacity\n",
              o.a_priority, a_upm, a_upm / capacity_upm, o.flood_factor);
  std::printf("B (steady): priority %d, offered %.2fx capacity\n\n", o.b_priority, o.b_share);
  std::printf("%-22s %6s %6s %6s %9s %6s %10s %10s\n", "", "sent", "200", "429", "timeouts", "errors",
              "TTFT p50", "TTFT p90");
  auto row = [](const char* name, const tenant_outcome& t) {
    std::printf("%-22s %6zu %6zu %6zu %9zu %6zu %8s ms %8s ms\n", name, t.sent, t.ok, t.rate_limited, t.timeouts,
                t.errors, ms(t.ttft.p50_ms).c_str(), ms(t.ttft.p90_ms).c_str());
  };
  row("B alone", b1);
  row("B beside the flood", b2);
  row("A (flood)", a2);
  std::printf("\nB's TTFT p50 beside the flood / alone: %.2fx (target <= 1.5x: %s)\n", ratio,
              ratio > 0 && ratio <= 1.5 ? "met" : "NOT met");
  std::printf("A: %zu answered 429, %zu timed out (target: 429s, no timeouts: %s)\n", a2.rate_limited, a2.timeouts,
              a2.rate_limited > 0 && a2.timeouts == 0 ? "met" : "NOT met");
  std::printf("lost requests: %zu (target 0: %s)\n", lost, lost == 0 ? "met" : "NOT met");
  for (const auto* t : {&b1, &b2, &a2})
    if (!t->first_error.empty()) {
      std::printf("first error: %s\n", t->first_error.substr(0, 300).c_str());
      break;
    }

  if (!o.json_path.empty()) {
    json j{{"benchmark", "tenants"},
           {"server", s->server.command},
           {"prompt_tokens", o.prompt_tokens},
           {"output_tokens", o.output_tokens},
           {"units", {{"key", units_key}, {"a", units->per_input_token}, {"b", units->per_output_token},
                      {"c", units->per_request}}},
           {"capacity_requests_per_s", capacity_rps},
           {"capacity_units_per_minute", capacity_upm},
           {"a_units_per_minute", a_upm},
           {"flood_factor", o.flood_factor},
           {"b_share", o.b_share},
           {"priorities", {{"a", o.a_priority}, {"b", o.b_priority}}},
           {"phase_s", o.phase_s},
           {"b_alone", to_json(b1)},
           {"b_with_flood", to_json(b2)},
           {"a_flood", to_json(a2)},
           {"b_ttft_p50_ratio", ratio},
           {"lost", lost}};
    std::ofstream f{o.json_path};
    f << j.dump(2) << "\n";
    if (!f) {
      say("cannot write " + o.json_path);
      return 1;
    }
  }
  return 0;
}

} // namespace tessera::bench
