#include "bench/engine_bench_sim.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "bench/bench_request.hpp"

#include "common/error.hpp"
#include "engine/engine.hpp"
#include "engine/sim/sim_backend.hpp"

namespace tessera::bench {

namespace {

using clock_type = std::chrono::steady_clock;

/// One measured phase: tokens, modelled seconds, steps (and how many were
/// compute-bound), host wall seconds.
struct phase {
  int64_t tokens = 0;
  double modelled_s = 0;
  double compute_bound_s = 0;
  uint64_t steps = 0;
  double host_s = 0;
  std::string error;

  [[nodiscard]] double tok_s() const { return modelled_s > 0 ? tokens / modelled_s : 0; }
  [[nodiscard]] double step_ms() const { return steps ? modelled_s / steps * 1e3 : 0; }
  [[nodiscard]] double host_ms() const { return steps ? host_s / steps * 1e3 : 0; }
  [[nodiscard]] const char* bound() const {
    return compute_bound_s * 2 > modelled_s ? "compute" : "memory";
  }
};

/// Runs `eng` until `done()` says stop, counting tokens and sim time.
template <class Done>
phase measure(engine::engine& eng, const engine::sim::sim_backend& sim, Done done) {
  phase p;
  const auto before = sim.totals();
  const auto t0 = clock_type::now();
  while (eng.has_unfinished() && !done())
    for (const auto& o : eng.step())
      p.tokens += static_cast<int64_t>(o.tokens.size());
  p.host_s = std::chrono::duration<double>(clock_type::now() - t0).count();
  const auto after = sim.totals();
  p.modelled_s = after.modelled_s - before.modelled_s;
  p.compute_bound_s = after.compute_bound_s - before.compute_bound_s;
  p.steps = after.steps - before.steps;
  return p;
}

// One prompt of n tokens computed in one step; the "tokens" are prompt tokens.
phase measure_prefill(engine::engine& eng, const engine::sim::sim_backend& sim, int n,
                      uint64_t id) {
  const int32_t vocab = eng.get_backend().config().vocab_size;
  if (auto err = eng.add_request(bench_request(id, random_tokens(n, vocab, id), 1)))
    return {.error = error_text(err)};
  auto p = measure(eng, sim, [] { return false; });
  p.tokens = n;
  return p;
}

// Decode of c sequences: tokens generated after every sequence has its first.
phase measure_decode(engine::engine& eng, const engine::sim::sim_backend& sim, int c, int prompt,
                     int gen, uint64_t first_id) {
  const int32_t vocab = eng.get_backend().config().vocab_size;
  for (int i = 0; i < c; ++i) {
    const uint64_t id = first_id + static_cast<uint64_t>(i);
    if (auto err = eng.add_request(bench_request(id, random_tokens(prompt, vocab, id), gen)))
      return {.error = error_text(err)};
  }
  std::map<uint64_t, int> produced;
  while (static_cast<int>(produced.size()) < c && eng.has_unfinished())
    for (const auto& o : eng.step())
      produced[o.id] += static_cast<int>(o.tokens.size());
  return measure(eng, sim, [] { return false; });
}

} // namespace

int run_sim_engine_bench(const engine_bench_options& o) {
  if (o.concurrency.empty()) {
    std::fprintf(stderr, "bench: need at least one concurrency\n");
    return 2;
  }
  auto files = engine::load_model_files(o.model, engine::backend_kind::sim);
  if (!files) {
    std::fprintf(stderr, "bench: %s\n", error_text(files.error()).c_str());
    return 1;
  }
  engine::backend_options bopts;
  bopts.choice = o.engine;
  bopts.choice.sim.time_scale = 0; // modelled time is counted, not waited for
  auto be = engine::make_backend(*files, bopts);
  if (!be) {
    std::fprintf(stderr, "bench: %s\n", error_text(be.error()).c_str());
    return 1;
  }
  const auto& sim = *engine::sim::as_sim_backend(**be);
  const std::string desc = sim.description();
  const auto& costs = sim.costs();
  const int32_t num_blocks = sim.num_blocks();
  const int32_t block_tokens = sim.layout().block_tokens;
  const int max_c = *std::max_element(o.concurrency.begin(), o.concurrency.end());
  engine::engine_config ecfg;
  ecfg.enable_prefix_caching = false; // measure compute, not cache hits
  ecfg.scheduling.max_batched_tokens = std::max(o.prefill_tokens, 2048);
  ecfg.scheduling.max_num_seqs = std::max(max_c, 1);
  engine::engine eng{std::move(*be), ecfg};
  const auto& cfg = files->config;

  std::fprintf(stderr, "bench: %s, %.1fM parameters, %s\n", o.model.c_str(),
               static_cast<double>(cfg.parameter_count()) / 1e6, desc.c_str());
  std::fprintf(stderr,
               "bench: %.2f GB of weights per step, %.0f KiB of KV per token, KV pool %d blocks "
               "x %d tokens (%.1f GB modelled)\n",
               costs.weight_bytes() / 1e9, costs.kv_bytes_per_token() / 1024, num_blocks,
               block_tokens, static_cast<double>(sim.modelled_block_bytes()) * num_blocks / 1e9);

  uint64_t id = 1;
  const auto prefill = measure_prefill(eng, sim, o.prefill_tokens, id++);
  std::map<int, phase> decode;
  for (int c : o.concurrency) {
    std::fprintf(stderr, "bench: decode %d tokens x %d sequences (prompt %d)\n", o.decode_tokens,
                 c, o.decode_prompt_tokens);
    decode[c] = measure_decode(eng, sim, c, o.decode_prompt_tokens, o.decode_tokens, id);
    id += static_cast<uint64_t>(c);
  }

  std::printf("\n%-30s %14s %12s %8s %12s\n", "measure (modelled GPU)", "tok/s", "step ms",
              "bound", "host ms/step");
  std::printf("%-30s %14s %12s %8s %12s\n", "------------------------------", "--------------",
              "------------", "--------", "------------");
  auto row = [](const std::string& name, const phase& p) {
    if (!p.error.empty()) {
      std::printf("%-30s %s\n", name.c_str(), p.error.c_str());
      return;
    }
    std::printf("%-30s %14.1f %12.3f %8s %12.3f\n", name.c_str(), p.tok_s(), p.step_ms(),
                p.bound(), p.host_ms());
  };
  row("prefill " + std::to_string(o.prefill_tokens) + " tokens", prefill);
  for (const auto& [c, p] : decode)
    row("decode, " + std::to_string(c) + " seq", p);
  std::printf("(%s; decode context %d + %d tokens; host ms/step is this machine's CPU time per "
              "step, sampling included)\n",
              desc.c_str(), o.decode_prompt_tokens, o.decode_tokens);

  if (!o.json_path.empty()) {
    nlohmann::json j;
    auto to_json = [](const phase& p) {
      return nlohmann::json{{"tok_s", p.tok_s()},     {"step_ms", p.step_ms()},
                            {"bound", p.bound()},     {"steps", p.steps},
                            {"tokens", p.tokens},     {"modelled_s", p.modelled_s},
                            {"host_ms_per_step", p.host_ms()}, {"error", p.error}};
    };
    j["model"] = o.model;
    j["parameters"] = cfg.parameter_count();
    j["backend"] = desc;
    j["gpu"] = costs.gpu().name;
    j["memory_bandwidth_bytes_s"] = costs.gpu().memory_bandwidth_bytes_s;
    j["peak_bf16_flops"] = costs.gpu().peak_bf16_flops;
    j["memory_efficiency"] = costs.calibration().memory_efficiency;
    j["compute_efficiency"] = costs.calibration().compute_efficiency;
    j["calibration_source"] = costs.calibration().source;
    j["weight_bytes"] = costs.weight_bytes();
    j["kv_bytes_per_token"] = costs.kv_bytes_per_token();
    j["prefill_tokens"] = o.prefill_tokens;
    j["prefill"] = to_json(prefill);
    nlohmann::json d = nlohmann::json::object();
    for (const auto& [c, p] : decode)
      d[std::to_string(c)] = to_json(p);
    j["decode"] = d;
    j["decode_tokens"] = o.decode_tokens;
    j["decode_prompt_tokens"] = o.decode_prompt_tokens;
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
