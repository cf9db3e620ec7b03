// gemm_bench: Tessera's matmul on the `small` model's shapes (bf16 and f32
// weights) against OpenBLAS cblas_sgemm on the same f32 weights, with the
// machine's STREAM-triad bandwidth and FMA throughput as yardsticks.
//
//   gemm_bench [--threads N] [--reps N] [--json FILE] [--isa avx512|avx2|generic]
//              [--batch M]... [--shape NAME] [--impl NAME] [--no-sweep]
// (--batch, --shape, --impl and --no-sweep narrow a run while tuning.)
//
// M = 1 is decode (memory-bound): each timed sweep cycles through enough
// distinct copies of the weights (>= 128 MB, 4x the L3) that caches do not
// help, as in a real decode step. M = 16/32 (batched decode) sweep copies
// too; M = 512 (prefill) reuses each weight 512 times and uses one copy.
#include <cblas.h>
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/stream.hpp"
#include "engine/cpu/kernels.hpp"
#include "engine/cpu/thread_pool.hpp"

namespace {

using tessera::engine::dtype;
using tessera::engine::cpu::thread_pool;
namespace cpu = tessera::engine::cpu;

struct options {
  int threads = 2;
  int reps = 7;
  std::string json_path;
  std::string isa;
  std::vector<int64_t> batch_sizes; // empty: 1, 16, 32, 512
  std::string shape;                // empty: all
  std::string impl;                 // empty: all
  bool sweep = true;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "gemm_bench: %s\nusage: gemm_bench [--threads N] [--reps N] [--json FILE] "
               "[--isa avx512|avx2|generic]\n",
               why);
  std::exit(2);
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        usage(("missing value for " + a).c_str());
      return argv[++i];
    };
    if (a == "--threads")
      o.threads = std::atoi(value().c_str());
    else if (a == "--reps")
      o.reps = std::atoi(value().c_str());
    else if (a == "--json")
      o.json_path = value();
    else if (a == "--isa")
      o.isa = value();
    else if (a == "--batch")
      o.batch_sizes.push_back(std::atoll(value().c_str()));
    else if (a == "--shape")
      o.shape = value();
    else if (a == "--impl")
      o.impl = value();
    else if (a == "--no-sweep")
      o.sweep = false;
    else
      usage(("unknown argument " + a).c_str());
  }
  if (o.threads < 1 || o.reps < 1)
    usage("--threads and --reps must be >= 1");
  return o;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// FMA throughput: 12 independent accumulator chains per thread (more than
// latency x pipes on current cores), so the loop runs at the FMA issue rate.
constexpr int fma_chains = 12;

__attribute__((target("avx512f"))) float fma_loop_avx512(int64_t iters) {
  __m512 acc[fma_chains];
  for (int j = 0; j < fma_chains; ++j)
    acc[j] = _mm512_set1_ps(static_cast<float>(j));
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-6f);
  for (int64_t i = 0; i < iters; ++i)
#pragma GCC unroll 16
    for (int j = 0; j < fma_chains; ++j)
      acc[j] = _mm512_fmadd_ps(acc[j], a, b);
  alignas(64) float out[16];
  float s = 0.0f;
  for (int j = 0; j < fma_chains; ++j) {
    _mm512_store_ps(out, acc[j]);
    for (float v : out)
      s += v;
  }
  return s;
}

__attribute__((target("avx2,fma"))) float fma_loop_avx2(int64_t iters) {
  __m256 acc[fma_chains];
  for (int j = 0; j < fma_chains; ++j)
    acc[j] = _mm256_set1_ps(static_cast<float>(j));
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-6f);
  for (int64_t i = 0; i < iters; ++i)
#pragma GCC unroll 16
    for (int j = 0; j < fma_chains; ++j)
      acc[j] = _mm256_fmadd_ps(acc[j], a, b);
  alignas(32) float out[8];
  float s = 0.0f;
  for (int j = 0; j < fma_chains; ++j) {
    _mm256_store_ps(out, acc[j]);
    for (float v : out)
      s += v;
  }
  return s;
}

// Peak f32 FMA GFLOP/s of the active ISA on all pool threads (best of 3).
double measure_fma_peak_gflop_s(thread_pool& pool) {
  const bool wide = cpu::kernel_isa() == "avx512";
  const int lanes = wide ? 16 : 8;
  const int64_t iters = 20'000'000 / fma_chains;
  double best = 0.0;
  std::vector<float> sink(static_cast<size_t>(pool.size()));
  for (int r = 0; r < 3; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.run([&](int t) {
      sink[static_cast<size_t>(t)] = wide ? fma_loop_avx512(iters) : fma_loop_avx2(iters);
    });
    const double s = seconds_since(t0);
    best = std::max(best, pool.size() * static_cast<double>(iters) * fma_chains * lanes * 2 / s * 1e-9);
  }
  return best;
}

struct shape {
  const char* name;
  int64_t K, N;
  int per_layer; // how many matrices of this shape one layer has
};

// The `small` model (hidden 768, 12 layers, GQA 12/4 heads of 64, FFN 2048,
// vocab 32000).
const shape shapes[] = {
    {"q/o", 768, 768, 2}, {"k/v", 768, 256, 2}, {"gate/up", 768, 2048, 2},
    {"down", 2048, 768, 1}, {"lm_head", 768, 32000, 0},
};
constexpr int layers = 12;

struct row {
  std::string impl, name;
  int64_t M, K, N;
  double ms, gflop_s, weight_gb_s, pct_triad, pct_fma_peak, max_rel_diff;
};

std::vector<float> random_floats(std::mt19937& rng, size_t n) {
  std::uniform_real_distribution<float> d{-1.0f, 1.0f};
  std::vector<float> v(n);
  for (auto& x : v)
    x = d(rng);
  return v;
}

// One timing: calls `run_one(copy)` for every copy, up to `reps` times, and
// returns the median time per call in seconds.
double time_sweeps(int reps, int copies, const std::function<void(int)>& run_one) {
  for (int c = 0; c < copies; ++c) // warm-up: page in, wake threads
    run_one(c);
  std::vector<double> samples;
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int c = 0; c < copies; ++c)
      run_one(c);
    samples.push_back(seconds_since(t0) / copies);
    // At least 3 samples within ~1.5 s; a single one where a sweep takes
    // seconds (the portable kernels at M = 512), to keep runs short.
    if ((r >= 2 && seconds_since(start) > 1.5) || seconds_since(start) > 3.0)
      break;
  }
  return median(samples);
}

double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0.0, scale = 0.0;
  for (size_t i = 0; i < a.size(); ++i)
    scale = std::max(scale, std::fabs(double{b[i]}));
  for (size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::fabs(double{a[i]} - b[i]) / (scale > 0 ? scale : 1.0));
  return worst;
}

} // namespace

int main(int argc, char** argv) {
  const options opt = parse(argc, argv);
  if (!opt.isa.empty() && !cpu::set_kernel_isa(opt.isa))
    usage(("this CPU cannot run --isa " + opt.isa).c_str());
  thread_pool pool{opt.threads};
  openblas_set_num_threads(opt.threads);

  const auto triad = tessera::bench::measure_triad_samples_gb_s(pool);
  const double triad_best = *std::max_element(triad.begin(), triad.end());
  const double triad_median = median(triad);
  const double fma_peak = cpu::kernel_isa() == "generic" ? 0.0 : measure_fma_peak_gflop_s(pool);
  std::printf("isa %s, %d threads, OpenBLAS %s (%s)\n", std::string{cpu::kernel_isa()}.c_str(),
              opt.threads, openblas_get_config(), openblas_get_corename());
  std::printf("STREAM triad: best %.1f GB/s, median %.1f GB/s; FMA peak %.0f GFLOP/s\n\n",
              triad_best, triad_median, fma_peak);

  std::mt19937 rng{42};
  std::vector<row> rows;
  constexpr size_t cold_bytes = size_t{128} << 20;
  const std::vector<int64_t> batch_sizes =
      opt.batch_sizes.empty() ? std::vector<int64_t>{1, 16, 32, 512} : opt.batch_sizes;
  std::printf("%-14s %-8s %4s %5s %6s %9s %9s %9s %7s %7s\n", "impl", "shape", "M", "K", "N", "ms",
              "GFLOP/s", "wGB/s", "%triad", "%peak");
  for (const shape& s : shapes) {
    if (!opt.shape.empty() && opt.shape != s.name)
      continue;
    const size_t elems = static_cast<size_t>(s.K * s.N);
    const auto w_values = random_floats(rng, elems);
    // bf16 weights, and their exact f32 widening for the f32 paths.
    std::vector<uint16_t> bf16(elems);
    cpu::from_f32(w_values.data(), static_cast<int64_t>(elems), dtype::bf16, bf16.data());
    std::vector<float> f32(elems);
    cpu::to_f32(bf16.data(), dtype::bf16, static_cast<int64_t>(elems), f32.data());
    const int bf16_copies = static_cast<int>((cold_bytes + elems * 2 - 1) / (elems * 2));
    const int f32_copies = static_cast<int>((cold_bytes + elems * 4 - 1) / (elems * 4));
    std::vector<std::vector<uint16_t>> wb(static_cast<size_t>(bf16_copies), bf16);
    std::vector<std::vector<float>> wf(static_cast<size_t>(f32_copies), f32);

    for (int64_t M : batch_sizes) {
      const auto x = random_floats(rng, static_cast<size_t>(M * s.K));
      std::vector<float> y(static_cast<size_t>(M * s.N)), y_ref(y.size());
      const bool cold = M <= 32;
      const double flop = 2.0 * M * s.K * s.N;
      auto record = [&](const char* impl, double sec, size_t wbytes) {
        row r{impl, s.name, M, s.K, s.N, sec * 1e3, flop / sec * 1e-9,
              static_cast<double>(wbytes) / sec * 1e-9, 0, 0, 0};
        r.pct_triad = 100.0 * r.weight_gb_s / triad_best;
        r.pct_fma_peak = fma_peak > 0 ? 100.0 * r.gflop_s / fma_peak : 0.0;
        std::printf("%-14s %-8s %4lld %5lld %6lld %9.3f %9.1f %9.1f %7.1f %7.1f\n", impl, s.name,
                    static_cast<long long>(M), static_cast<long long>(s.K),
                    static_cast<long long>(s.N), r.ms, r.gflop_s, r.weight_gb_s, r.pct_triad,
                    r.pct_fma_peak);
        std::fflush(stdout);
        rows.push_back(r);
      };
      auto wanted = [&](const char* impl) { return opt.impl.empty() || opt.impl == impl; };
      if (wanted("tessera-bf16")) {
        const double sec = time_sweeps(opt.reps, cold ? bf16_copies : 1, [&](int c) {
          cpu::matmul(pool, x.data(), M, s.K, s.K, wb[static_cast<size_t>(c)].data(), dtype::bf16,
                      s.N, nullptr, y.data(), s.N);
        });
        record("tessera-bf16", sec, elems * 2);
      }
      if (wanted("tessera-f32")) {
        const double sec = time_sweeps(opt.reps, cold ? f32_copies : 1, [&](int c) {
          cpu::matmul(pool, x.data(), M, s.K, s.K, wf[static_cast<size_t>(c)].data(), dtype::f32,
                      s.N, nullptr, y.data(), s.N);
        });
        record("tessera-f32", sec, elems * 4);
      }
      auto blas = [&](const float* w, float* out) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(M),
                    static_cast<int>(s.N), static_cast<int>(s.K), 1.0f, x.data(),
                    static_cast<int>(s.K), w, static_cast<int>(s.K), 0.0f, out,
                    static_cast<int>(s.N));
      };
      if (wanted("openblas-f32")) {
        const double sec = time_sweeps(opt.reps, cold ? f32_copies : 1, [&](int c) {
          blas(wf[static_cast<size_t>(c)].data(), y_ref.data());
        });
        record("openblas-f32", sec, elems * 4);
      }
      // Sanity: both libraries compute the same product, and bf16 weights give
      // exactly the bits of their f32 widening (the widening is exact).
      blas(wf[0].data(), y_ref.data());
      std::vector<float> y_bf16(y.size());
      cpu::matmul(pool, x.data(), M, s.K, s.K, wb[0].data(), dtype::bf16, s.N, nullptr,
                  y_bf16.data(), s.N);
      cpu::matmul(pool, x.data(), M, s.K, s.K, wf[0].data(), dtype::f32, s.N, nullptr, y.data(),
                  s.N);
      if (std::memcmp(y_bf16.data(), y.data(), y.size() * sizeof(float)) != 0)
        std::printf("WARNING: bf16 and f32 weights gave different bits\n");
      for (auto it = rows.rbegin(); it != rows.rend() && it->M == M && it->name == s.name; ++it)
        it->max_rel_diff = max_rel_diff(it->impl == "tessera-bf16" ? y_bf16 : y, y_ref);
    }
    std::printf("\n");
  }

  // A whole decode step's weights (~200 MB bf16): 12 layers of q, k, v, o,
  // gate, up, down, then lm_head, each in its own memory, M = 1.
  nlohmann::json sweeps = nlohmann::json::array();
  if (opt.sweep) {
    std::printf("decode sweep over the full model's weights, M = 1:\n");
    struct mat {
      const shape* s;
      std::vector<uint16_t> bf16;
      std::vector<float> f32;
    };
    std::vector<mat> model;
    for (int l = 0; l < layers; ++l)
      for (const shape& s : shapes)
        for (int i = 0; i < s.per_layer; ++i)
          model.push_back({&s, {}, {}});
    model.push_back({&shapes[4], {}, {}});
    size_t total_elems = 0;
    for (auto& m : model) {
      const size_t elems = static_cast<size_t>(m.s->K * m.s->N);
      const auto v = random_floats(rng, elems);
      m.bf16.resize(elems);
      cpu::from_f32(v.data(), static_cast<int64_t>(elems), dtype::bf16, m.bf16.data());
      m.f32.resize(elems);
      cpu::to_f32(m.bf16.data(), dtype::bf16, static_cast<int64_t>(elems), m.f32.data());
      total_elems += elems;
    }
    const auto x = random_floats(rng, 2048);
    std::vector<float> y(32000);
    auto sweep = [&](const char* impl, size_t elem_bytes, const std::function<void(const mat&)>& f) {
      const double sec = time_sweeps(opt.reps, 1, [&](int) {
        for (const auto& m : model)
          f(m);
      });
      const double gb_s = static_cast<double>(total_elems * elem_bytes) / sec * 1e-9;
      std::printf("%-14s %7.2f ms/step  %6.1f GB/s  %5.1f %% of triad  (%.0f MB)\n", impl, sec * 1e3,
                  gb_s, 100.0 * gb_s / triad_best, static_cast<double>(total_elems * elem_bytes) / 1e6);
      sweeps.push_back({{"impl", impl}, {"ms", sec * 1e3}, {"weight_gb_s", gb_s},
                        {"pct_triad", 100.0 * gb_s / triad_best},
                        {"weight_bytes", total_elems * elem_bytes}});
    };
    if (opt.impl.empty() || opt.impl == "tessera-bf16")
    sweep("tessera-bf16", 2, [&](const mat& m) {
      cpu::matmul(pool, x.data(), 1, m.s->K, m.s->K, m.bf16.data(), dtype::bf16, m.s->N, nullptr,
                  y.data(), m.s->N);
    });
    if (opt.impl.empty() || opt.impl == "tessera-f32")
    sweep("tessera-f32", 4, [&](const mat& m) {
      cpu::matmul(pool, x.data(), 1, m.s->K, m.s->K, m.f32.data(), dtype::f32, m.s->N, nullptr,
                  y.data(), m.s->N);
    });
    if (opt.impl.empty() || opt.impl == "openblas-f32")
    sweep("openblas-f32", 4, [&](const mat& m) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, 1, static_cast<int>(m.s->N),
                  static_cast<int>(m.s->K), 1.0f, x.data(), static_cast<int>(m.s->K),
                  m.f32.data(), static_cast<int>(m.s->K), 0.0f, y.data(), static_cast<int>(m.s->N));
    });
  }

  // Prefill estimate: the model's GEMM time per token at M = 512.
  std::printf("\nprefill GEMMs (M = 512), whole model:\n");
  nlohmann::json prefill = nlohmann::json::object();
  for (const char* impl : {"tessera-bf16", "tessera-f32", "openblas-f32"}) {
    double sec = 0.0, flop = 0.0;
    int found = 0;
    for (const auto& r : rows)
      if (r.impl == impl && r.M == 512)
        for (const shape& s : shapes)
          if (r.name == s.name) {
            const int count = s.per_layer ? layers * s.per_layer : 1;
            sec += count * r.ms * 1e-3;
            ++found;
            flop += count * 2.0 * r.M * r.K * r.N;
          }
    if (found != static_cast<int>(std::size(shapes)))
      continue; // not every shape was run at M = 512
    std::printf("%-14s %7.1f ms per 512 tokens = %6.0f tok/s, %6.1f GFLOP/s\n", impl, sec * 1e3,
                512 / sec, flop / sec * 1e-9);
    prefill[impl] = {{"ms_per_512_tokens", sec * 1e3}, {"tok_s", 512 / sec},
                     {"gflop_s", flop / sec * 1e-9}};
  }

  if (!opt.json_path.empty()) {
    nlohmann::json j;
    j["isa"] = std::string{cpu::kernel_isa()};
    j["threads"] = opt.threads;
    j["reps"] = opt.reps;
    j["openblas"] = {{"config", openblas_get_config()}, {"core", openblas_get_corename()}};
    j["triad_gb_s"] = {{"best", triad_best}, {"median", triad_median}, {"samples", triad}};
    j["fma_peak_gflop_s"] = fma_peak;
    j["rows"] = nlohmann::json::array();
    for (const auto& r : rows)
      j["rows"].push_back({{"impl", r.impl}, {"shape", r.name}, {"M", r.M}, {"K", r.K},
                           {"N", r.N}, {"ms", r.ms}, {"gflop_s", r.gflop_s},
                           {"weight_gb_s", r.weight_gb_s}, {"pct_triad", r.pct_triad},
                           {"pct_fma_peak", r.pct_fma_peak},
                           {"max_rel_diff_vs_openblas", r.max_rel_diff}});
    j["decode_model_sweep"] = sweeps;
    j["prefill_model_gemms"] = prefill;
    std::ofstream out{opt.json_path};
    out << j.dump(2) << "\n";
    if (!out)
      std::fprintf(stderr, "gemm_bench: cannot write %s\n", opt.json_path.c_str());
  }
  return 0;
}
