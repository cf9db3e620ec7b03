#include "bench/engine_bench.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <thread>

#include <nlohmann/json.hpp>
#include <sys/resource.h>

#include "bench/bench_request.hpp"
#include "bench/engine_bench_sim.hpp"
#include "bench/stream.hpp"
#include "bench/svg_chart.hpp"
#include "common/error.hpp"
#include "engine/cpu/kernels.hpp"
#include "engine/cpu/thread_pool.hpp"
#include "engine/engine.hpp"
#include "engine/weights.hpp"

namespace tessera::bench {

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Peak resident set size (VmHWM), in MB.
double peak_rss_mb() {
  std::ifstream f{"/proc/self/status"};
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0)
      return std::stod(line.substr(6)) / 1024.0; // kB
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;
}

// Resets the peak RSS to the current RSS (Linux >= 4.0), so the triad's
// arrays, freed by then, do not count as the engine's memory. Returns false
// where /proc/self/clear_refs cannot be written.
bool reset_peak_rss() {
  std::ofstream f{"/proc/self/clear_refs"};
  f << "5";
  f.flush();
  return static_cast<bool>(f);
}

// Prefill throughput: one prompt of n tokens computed in one step.
double measure_prefill(engine::engine& eng, int n, uint64_t id) {
  const int32_t vocab = eng.get_backend().config().vocab_size;
  auto err = eng.add_request(bench_request(id, random_tokens(n, vocab, id), 1));
  if (err) {
    std::fprintf(stderr, "bench: %s\n", error_text(err).c_str());
    return 0;
  }
  const auto t0 = clock_type::now();
  while (eng.has_unfinished())
    (void)eng.step();
  return n / seconds_since(t0);
}

// Aggregate decode throughput of `c` concurrent sequences: tokens generated
// after every sequence has its first token, over the time that took.
double measure_decode(engine::engine& eng, int c, int prompt, int gen, uint64_t first_id) {
  const int32_t vocab = eng.get_backend().config().vocab_size;
  for (int i = 0; i < c; ++i) {
    auto err = eng.add_request(bench_request(first_id + i, random_tokens(prompt, vocab, first_id + i), gen));
    if (err) {
      std::fprintf(stderr, "bench: %s\n", error_text(err).c_str());
      return 0;
    }
  }
  std::map<uint64_t, int> produced;
  while (static_cast<int>(produced.size()) < c)
    for (const auto& o : eng.step())
      produced[o.id] += static_cast<int>(o.tokens.size());
  const auto t0 = clock_type::now();
  int64_t tokens = 0;
  while (eng.has_unfinished())
    for (const auto& o : eng.step())
      tokens += static_cast<int64_t>(o.tokens.size());
  return static_cast<double>(tokens) / seconds_since(t0);
}

} // namespace

int run_engine_bench(const engine_bench_options& o) {
  if (o.engine.kind == engine::backend_kind::sim)
    return run_sim_engine_bench(o);
  auto loaded = engine::load_model_files(o.model, engine::backend_kind::cpu);
  if (!loaded) {
    std::fprintf(stderr, "bench: %s\n", error_text(loaded.error()).c_str());
    return 1;
  }
  std::shared_ptr<const engine::model_weights> weights = loaded->weights;
  const auto& cfg = weights->config;
  if (o.concurrency.empty() || o.runs < 1) {
    std::fprintf(stderr, "bench: need at least one concurrency and one run\n");
    return 2;
  }
  const int max_c = *std::max_element(o.concurrency.begin(), o.concurrency.end());
  engine::backend_options bopts;
  bopts.choice = o.engine;
  bopts.threads = o.threads;
  bopts.kv_cache_bytes = size_t{1} << 30;
  auto be = engine::make_backend(*loaded, bopts);
  if (!be) {
    std::fprintf(stderr, "bench: %s\n", error_text(be.error()).c_str());
    return 1;
  }
  const std::string desc = (*be)->description();
  engine::engine_config ecfg;
  ecfg.enable_prefix_caching = false; // measure compute, not cache hits
  ecfg.scheduling.max_batched_tokens = std::max(o.prefill_tokens, 2048);
  ecfg.scheduling.max_num_seqs = std::max(max_c, 1);
  engine::engine eng{std::move(*be), ecfg};
  const int threads = o.threads > 0 ? o.threads : static_cast<int>(std::thread::hardware_concurrency());

  std::fprintf(stderr, "bench: %s, %.1fM parameters, %s, %.0f MB of weights read per token\n",
               o.model.c_str(), static_cast<double>(cfg.parameter_count()) / 1e6, desc.c_str(),
               static_cast<double>(weights->bytes_read_per_token()) / 1e6);

  uint64_t id = 1;
  std::fprintf(stderr, "bench: warm-up ...\n");
  measure_prefill(eng, std::min(o.prefill_tokens, 64), id++);

  // Decode at batch 1 against the roofline: each run measures the triad
  // right before decoding, on a pool of the same size, so both see the same
  // state of the shared host; the fraction is taken per run, then the median.
  const double bytes_per_token = static_cast<double>(weights->bytes_read_per_token());
  std::vector<double> bw_runs, fraction_runs, decode1_runs;
  for (int r = 0; r < o.runs; ++r) {
    std::fprintf(stderr, "bench: memory bandwidth (triad) + decode at batch 1, run %d/%d\n", r + 1, o.runs);
    double bw_r = 0;
    {
      engine::cpu::thread_pool pool{threads};
      bw_r = median(measure_triad_samples_gb_s(pool));
    }
    const double d1 = measure_decode(eng, 1, o.decode_prompt_tokens, o.decode_tokens, id++);
    bw_runs.push_back(bw_r);
    decode1_runs.push_back(d1);
    fraction_runs.push_back(d1 / (bw_r * 1e9 / bytes_per_token));
  }
  const bool rss_reset = reset_peak_rss();

  std::vector<double> prefill_runs;
  for (int r = 0; r < o.runs; ++r) {
    std::fprintf(stderr, "bench: prefill %d tokens, run %d/%d\n", o.prefill_tokens, r + 1, o.runs);
    prefill_runs.push_back(measure_prefill(eng, o.prefill_tokens, id++));
  }
  std::map<int, double> decode;
  std::map<int, std::vector<double>> decode_runs;
  for (int c : o.concurrency) {
    if (c == 1) {
      decode_runs[c] = decode1_runs;
    } else {
      for (int r = 0; r < o.runs; ++r) {
        std::fprintf(stderr, "bench: decode %d tokens x %d sequences, run %d/%d\n", o.decode_tokens, c,
                     r + 1, o.runs);
        decode_runs[c].push_back(measure_decode(eng, c, o.decode_prompt_tokens, o.decode_tokens, id));
        id += static_cast<uint64_t>(c);
      }
    }
    decode[c] = median(decode_runs[c]);
  }
  const double prefill = median(prefill_runs);
  const double bw = median(bw_runs);
  const double roofline = bw * 1e9 / bytes_per_token;
  const double fraction = median(fraction_runs);
  const double rss = peak_rss_mb();

  std::printf("\n%-34s %12s\n", "measure", "value");
  std::printf("%-34s %12s\n", "----------------------------------", "------------");
  std::printf("%-34s %12.1f\n", "memory bandwidth (triad), GB/s", bw);
  std::printf("%-34s %12.1f\n", "decode roofline, tok/s", roofline);
  std::printf("%-34s %12.1f\n", ("prefill " + std::to_string(o.prefill_tokens) + " tokens, tok/s").c_str(), prefill);
  for (auto& [c, v] : decode)
    std::printf("%-34s %12.1f\n", ("decode, " + std::to_string(c) + " seq, tok/s").c_str(), v);
  std::printf("%-34s %12.2f\n", "decode batch 1 / roofline", fraction);
  std::printf("%-34s %12.0f\n", "peak RSS, MB", rss);
  std::printf("(%s; medians of %d runs; bandwidth is the median triad, measured before each batch-1 run%s)\n",
              desc.c_str(), o.runs, rss_reset ? "" : "; peak RSS includes the triad arrays");

  if (!o.svg_path.empty()) {
    chart c;
    c.title = "Aggregate decode throughput, " + desc;
    c.x_label = "concurrent sequences";
    c.y_label = "tokens/s";
    chart_series ser{"Tessera decode", {}};
    for (auto& [n, v] : decode)
      ser.points.emplace_back(n, v);
    c.series.push_back(std::move(ser));
    c.hlines.emplace_back("batch-1 roofline", roofline);
    std::ofstream f{o.svg_path};
    f << render_svg(c);
    if (!f) {
      std::fprintf(stderr, "bench: cannot write %s\n", o.svg_path.c_str());
      return 1;
    }
  }
  if (!o.json_path.empty()) {
    nlohmann::json j;
    j["model"] = o.model;
    j["parameters"] = cfg.parameter_count();
    j["backend"] = desc;
    j["threads"] = threads;
    j["runs"] = o.runs;
    j["weight_bytes_per_token"] = weights->bytes_read_per_token();
    j["bandwidth_gb_s"] = bw;
    j["bandwidth_gb_s_runs"] = bw_runs;
    j["roofline_fraction_runs"] = fraction_runs;
    j["roofline_tok_s"] = roofline;
    j["prefill_tokens"] = o.prefill_tokens;
    j["prefill_tok_s"] = prefill;
    j["prefill_tok_s_runs"] = prefill_runs;
    nlohmann::json d = nlohmann::json::object(), dr = nlohmann::json::object();
    for (auto& [c, v] : decode) {
      d[std::to_string(c)] = v;
      dr[std::to_string(c)] = decode_runs[c];
    }
    j["decode_tok_s"] = d;
    j["decode_tok_s_runs"] = dr;
    j["decode_tokens"] = o.decode_tokens;
    j["decode_prompt_tokens"] = o.decode_prompt_tokens;
    j["roofline_fraction"] = fraction;
    j["peak_rss_mb"] = rss;
    std::ofstream f{o.json_path};
    f << j.dump(2) << "\n";
    if (!f) {
      std::fprintf(stderr, "bench: cannot write %s\n", o.json_path.c_str());
      return 1;
    }
  }
  return 0;
}

} // namespace tessera::bench
