#include "bench/bench_request.hpp"

#include <random>

namespace tessera::bench {

std::vector<int32_t> random_tokens(int n, int32_t vocab, uint64_t seed) {
  std::mt19937_64 rng{seed};
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t)
    x = static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab));
  return t;
}

engine::request bench_request(uint64_t id, std::vector<int32_t> prompt, int max_tokens) {
  engine::request r;
  r.id = id;
  r.prompt = std::move(prompt);
  r.params.temperature = 0;
  r.params.max_tokens = max_tokens;
  r.params.ignore_eos = true;
  return r;
}

} // namespace tessera::bench
