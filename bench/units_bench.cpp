#include "bench/units_bench.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "bench/bench_request.hpp"
#include "common/error.hpp"
#include "engine/engine.hpp"
#include "engine/model_units.hpp"
#include "engine/sim/sim_backend.hpp"

namespace tessera::bench {

namespace {

using clock_type = std::chrono::steady_clock;

std::string utc_now() {
  const auto t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

/// Engine milliseconds per request of `n` requests of `in` prompt tokens
/// generating `out` each, run together; negative with `error` set on
/// failure.
double measure_point(const engine::model_files& files, const units_bench_options& o, int in, int out,
                     uint64_t seed, std::string& error) {
  engine::backend_options bopts;
  bopts.choice = o.engine;
  bopts.threads = o.threads;
  if (bopts.choice.kind == engine::backend_kind::sim)
    bopts.choice.sim.time_scale = 0; // modelled time is counted, not waited for
  auto be = engine::make_backend(files, bopts);
  if (!be) {
    error = error_text(be.error());
    return -1;
  }
  const engine::sim::sim_backend* sim = engine::sim::as_sim_backend(**be);
  engine::engine_config ecfg;
  ecfg.enable_prefix_caching = false; // measure compute, not cache hits
  ecfg.scheduling.max_num_seqs = std::max(o.concurrency, 1);
  engine::engine eng{std::move(*be), ecfg};
  const int32_t vocab = files.config.vocab_size;
  for (int i = 0; i < o.concurrency; ++i) {
    const uint64_t id = seed * 1000 + static_cast<uint64_t>(i) + 1;
    if (auto err = eng.add_request(bench_request(id, random_tokens(in, vocab, id), out))) {
      error = error_text(err);
      return -1;
    }
  }
  const double sim_before = sim ? sim->totals().modelled_s : 0;
  const auto t0 = clock_type::now();
  while (eng.has_unfinished())
    for (const auto& r : eng.step())
      if (r.error) {
        error = error_text(r.error);
        return -1;
      }
  const double seconds = sim ? sim->totals().modelled_s - sim_before
                             : std::chrono::duration<double>(clock_type::now() - t0).count();
  return seconds * 1e3 / o.concurrency;
}

} // namespace

int run_units_bench(const units_bench_options& o) {
  const std::set<int> ins(o.inputs.begin(), o.inputs.end());
  const std::set<int> outs(o.outputs.begin(), o.outputs.end());
  if (ins.size() < 2 || outs.size() < 2 || *ins.begin() < 1 || *outs.begin() < 1) {
    std::fprintf(stderr, "bench units: --inputs and --outputs each need >= 2 distinct lengths >= 1\n");
    return 2;
  }
  if (o.concurrency < 1) {
    std::fprintf(stderr, "bench units: --concurrency must be >= 1\n");
    return 2;
  }
  auto files = engine::load_model_files(o.model, o.engine.kind);
  if (!files) {
    std::fprintf(stderr, "bench units: %s\n", error_text(files.error()).c_str());
    return 1;
  }
  const std::string key = engine::units_engine_key(engine::to_string(o.engine.kind), o.engine.sim.gpu);
  std::fprintf(stderr, "bench units: %s, engine %s, %zu x %zu grid, %d requests per point\n",
               o.model.c_str(), key.c_str(), ins.size(), outs.size(), o.concurrency);
  std::vector<engine::units_sample> samples;
  uint64_t seed = 1;
  for (int in : ins)
    for (int out : outs) {
      std::string error;
      const double ms = measure_point(*files, o, in, out, seed++, error);
      if (ms < 0) {
        std::fprintf(stderr, "bench units: %d in, %d out: %s\n", in, out, error.c_str());
        return 1;
      }
      std::fprintf(stderr, "bench units: %d in, %d out: %.4f ms per request\n", in, out, ms);
      samples.push_back({in, out, ms});
    }
  auto fit = engine::fit_model_units(samples);
  // The same samples without the context term (d = 0), for comparison.
  auto linear = engine::fit_model_units(samples, false);
  if (!fit || !linear) {
    std::fprintf(stderr, "bench units: %s\n", error_text(fit ? linear.error() : fit.error()).c_str());
    return 1;
  }
  const auto& u = fit->units;
  std::printf("\nmodel units for %s on %s (1 unit = 1 ms of one worker, %d requests at once)\n",
              o.model.c_str(), key.c_str(), o.concurrency);
  std::printf("  a = %.6g per input token, b = %.6g per output token, c = %.6g per request,\n"
              "  d = %.6g per output token per token of context\n",
              u.per_input_token, u.per_output_token, u.per_request, u.per_context_token);
  const auto& l = linear->units;
  std::printf("  without d: a = %.6g, b = %.6g, c = %.6g\n", l.per_input_token, l.per_output_token,
              l.per_request);
  std::printf("\n%8s %8s %14s %14s %9s %14s %9s\n", "input", "output", "measured ms", "predicted ms", "error",
              "without d ms", "error");
  size_t worst = 0, worst_linear = 0;
  auto rel = [&](const engine::units_fit& f, size_t i) { return (f.predicted[i] - samples[i].cost) / samples[i].cost; };
  for (size_t i = 0; i < samples.size(); ++i) {
    std::printf("%8lld %8lld %14.4f %14.4f %8.1f%% %14.4f %8.1f%%\n",
                static_cast<long long>(samples[i].input_tokens), static_cast<long long>(samples[i].output_tokens),
                samples[i].cost, fit->predicted[i], 100.0 * rel(*fit, i), linear->predicted[i],
                100.0 * rel(*linear, i));
    if (std::abs(rel(*fit, i)) > std::abs(rel(*fit, worst)))
      worst = i;
    if (std::abs(rel(*linear, i)) > std::abs(rel(*linear, worst_linear)))
      worst_linear = i;
  }
  std::printf("relative RMS error: %.2f%% (without d: %.2f%%)\n", 100.0 * fit->rms_relative_error,
              100.0 * linear->rms_relative_error);
  std::printf("worst point: %+.1f%% at (%lld, %lld) (without d: %+.1f%% at (%lld, %lld))\n",
              100.0 * rel(*fit, worst), static_cast<long long>(samples[worst].input_tokens),
              static_cast<long long>(samples[worst].output_tokens), 100.0 * rel(*linear, worst_linear),
              static_cast<long long>(samples[worst_linear].input_tokens),
              static_cast<long long>(samples[worst_linear].output_tokens));

  const engine::fitted_units fitted{u, utc_now(), fit->rms_relative_error};
  if (!o.json_path.empty()) {
    nlohmann::json j;
    j["model"] = o.model;
    j["engine"] = key;
    j["concurrency"] = o.concurrency;
    j["a"] = u.per_input_token;
    j["b"] = u.per_output_token;
    j["c"] = u.per_request;
    j["d"] = u.per_context_token;
    j["rms_error"] = fit->rms_relative_error;
    j["without_d"] = {{"a", l.per_input_token}, {"b", l.per_output_token}, {"c", l.per_request},
                      {"rms_error", linear->rms_relative_error}};
    j["fitted_at"] = fitted.fitted_at;
    auto& pts = j["points"] = nlohmann::json::array();
    for (size_t i = 0; i < samples.size(); ++i)
      pts.push_back({{"input", samples[i].input_tokens}, {"output", samples[i].output_tokens},
                     {"measured_ms", samples[i].cost}, {"predicted_ms", fit->predicted[i]},
                     {"predicted_without_d_ms", linear->predicted[i]}});
    std::ofstream f{o.json_path};
    f << j.dump(2) << "\n";
    if (!f) {
      std::fprintf(stderr, "bench units: cannot write %s\n", o.json_path.c_str());
      return 1;
    }
  }
  if (o.write) {
    if (auto err = engine::write_model_units(o.model, key, fitted)) {
      std::fprintf(stderr, "bench units: %s\n", error_text(err).c_str());
      return 1;
    }
    std::printf("written to %s/%s under \"%s\"\n", o.model.c_str(), engine::serving_config_file, key.c_str());
  }
  return 0;
}

} // namespace tessera::bench
