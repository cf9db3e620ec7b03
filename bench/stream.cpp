#include "bench/stream.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>

#include "engine/cpu/thread_pool.hpp"

namespace tessera::bench {

namespace {

struct free_deleter {
  void operator()(float* p) const { std::free(p); }
};
using buffer = std::unique_ptr<float, free_deleter>;

buffer allocate(size_t n) {
  // Page-aligned and left untouched here, so the first write (by the thread
  // that will stream the slice) decides where the pages live.
  const size_t bytes = (n * sizeof(float) + 4095) / 4096 * 4096;
  return buffer{static_cast<float*>(std::aligned_alloc(4096, bytes))};
}

} // namespace

std::vector<double> measure_triad_samples_gb_s(engine::cpu::thread_pool& pool, size_t array_bytes,
                                               int repetitions) {
  const size_t n = array_bytes / sizeof(float);
  buffer a = allocate(n), b = allocate(n), c = allocate(n);
  const size_t threads = static_cast<size_t>(pool.size());
  auto slice = [&](int t, auto&& body) {
    const size_t begin = n * static_cast<size_t>(t) / threads;
    const size_t end = n * (static_cast<size_t>(t) + 1) / threads;
    body(begin, end);
  };
  float* pa = a.get();
  float* pb = b.get();
  float* pc = c.get();
  pool.run([&](int t) {
    slice(t, [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) {
        pa[i] = 0.0f;
        pb[i] = 1.0f;
        pc[i] = 2.0f;
      }
    });
  });
  const float s = 3.0f;
  std::vector<double> rates;
  for (int r = 0; r < repetitions; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.run([&](int t) {
      slice(t, [&](size_t begin, size_t end) {
        for (size_t i = begin; i < end; ++i)
          pa[i] = pb[i] + s * pc[i];
      });
    });
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rates.push_back(3.0 * static_cast<double>(n * sizeof(float)) / seconds * 1e-9);
  }
  // Read a result back so the stores are observable and cannot be dropped.
  [[maybe_unused]] volatile float sink = pa[n / 2];
  return rates;
}

double measure_triad_bandwidth_gb_s(engine::cpu::thread_pool& pool, size_t array_bytes,
                                    int repetitions) {
  const auto rates = measure_triad_samples_gb_s(pool, array_bytes, repetitions);
  return rates.empty() ? 0.0 : *std::max_element(rates.begin(), rates.end());
}

} // namespace tessera::bench
