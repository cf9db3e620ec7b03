#include "bench/hash_bench.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/bench_request.hpp"
#include "common/error.hpp"
#include "engine/block_hash.hpp"
#include "engine/factory/backend_factory.hpp"

namespace tessera::bench {

namespace {

using clock_type = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// Keeps a result alive so the compiler cannot drop the loop computing it.
volatile uint64_t sink = 0;

} // namespace

hash_cost measure_hash_cost(int32_t block_tokens, int32_t blocks, int reps) {
  hash_cost c;
  c.block_tokens = block_tokens;
  const auto tokens = random_tokens(block_tokens * blocks, 1 << 17, 7);
  const auto key = engine::process_kv_hash_key();
  const auto root = engine::kv_hash_root(key, 1, "");
  std::vector<engine::kv_block_hash> out;
  std::vector<double> sip, xxh;
  std::vector<unsigned char> buf(8 + 4 * static_cast<size_t>(block_tokens));
  for (int r = 0; r < reps; ++r) {
    out.clear();
    auto t0 = clock_type::now();
    engine::kv_hash_blocks(key, root, tokens, block_tokens, static_cast<size_t>(blocks), out);
    auto t1 = clock_type::now();
    sink = sink + out.back().lo;
    sip.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / blocks);

    // The link it replaced: XXH3_64(le64(parent) || le32 tokens, seed).
    uint64_t parent = 0x5eed;
    t0 = clock_type::now();
    for (int32_t b = 0; b < blocks; ++b) {
      std::memcpy(buf.data(), &parent, 8);
      std::memcpy(buf.data() + 8, tokens.data() + static_cast<size_t>(b) * block_tokens, 4 * block_tokens);
      parent = engine::hash_bytes(buf.data(), buf.size(), 0x5eed);
    }
    t1 = clock_type::now();
    sink = sink + parent;
    xxh.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / blocks);
  }
  c.siphash128_ns_per_block = median(sip);
  c.xxh3_64_ns_per_block = median(xxh);
  return c;
}

int run_hash_bench(const hash_bench_options& o) {
  int32_t block_tokens = 16;
  double step_ms = 0;
  std::string backend_desc;
  if (!o.model.empty()) {
    auto loaded = engine::load_model_files(o.model, engine::backend_kind::cpu);
    if (!loaded) {
      std::fprintf(stderr, "bench hash: %s\n", error_text(loaded.error()).c_str());
      return 1;
    }
    engine::backend_options bopts;
    bopts.threads = o.threads;
    block_tokens = bopts.block_tokens;
    const int32_t nb = (o.prompt_tokens + block_tokens - 1) / block_tokens;
    const engine::kv_layout l{block_tokens, loaded->config.num_hidden_layers, loaded->config.num_key_value_heads,
                              loaded->config.head_dim, bopts.kv_dtype};
    bopts.kv_cache_bytes = (static_cast<size_t>(nb) + 1) * l.block_bytes();
    auto be = engine::make_backend(*loaded, bopts);
    if (!be) {
      std::fprintf(stderr, "bench hash: %s\n", error_text(be.error()).c_str());
      return 1;
    }
    backend_desc = (*be)->description();
    std::vector<engine::kv_block_id> table(static_cast<size_t>(nb));
    for (int32_t i = 0; i < nb; ++i)
      table[static_cast<size_t>(i)] = i;
    const auto prompt = random_tokens(o.prompt_tokens, (*be)->config().vocab_size, 1);
    std::vector<float> logits(static_cast<size_t>((*be)->logits_vocab()));
    std::vector<double> steps;
    for (int s = 0; s <= o.steps; ++s) { // the first is a warm-up
      engine::forward_seq seq{prompt, 0, table, 1}; // logits of the last token, as a prefill step
      const auto t0 = clock_type::now();
      (*be)->forward({&seq, 1}, logits.data());
      const auto t1 = clock_type::now();
      if (s > 0)
        steps.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
    step_ms = median(steps);
  }
  const auto c = measure_hash_cost(block_tokens);
  const int32_t step_blocks = o.prompt_tokens / block_tokens;
  const double hash_us = c.siphash128_ns_per_block * step_blocks / 1000.0;
  const double share = step_ms > 0 ? hash_us / (step_ms * 1000.0) : 0.0;

  std::printf("block hash, %d tokens per block (median of 31 passes over 4096 chained blocks)\n", block_tokens);
  std::printf("  %-34s %10s\n", "link", "ns/block");
  std::printf("  %-34s %10.1f\n", "SipHash-2-4-128, keyed (now)", c.siphash128_ns_per_block);
  std::printf("  %-34s %10.1f\n", "XXH3-64, public seed (before)", c.xxh3_64_ns_per_block);
  if (step_ms > 0) {
    std::printf("prefill step: %d tokens (%d full blocks) on %s\n", o.prompt_tokens, step_blocks, o.model.c_str());
    std::printf("  %s\n", backend_desc.c_str());
    std::printf("  step %.2f ms (median of %d), its blocks' keyed hashes %.2f us = %.4f%% of the step "
                "(target < 2%%)\n",
                step_ms, o.steps, hash_us, 100.0 * share);
  }
  if (!o.json_path.empty()) {
    nlohmann::json j;
    j["block_tokens"] = block_tokens;
    j["siphash128_ns_per_block"] = c.siphash128_ns_per_block;
    j["xxh3_64_ns_per_block"] = c.xxh3_64_ns_per_block;
    if (step_ms > 0) {
      j["model"] = o.model;
      j["backend"] = backend_desc;
      j["prompt_tokens"] = o.prompt_tokens;
      j["prefill_step_ms"] = step_ms;
      j["step_hash_us"] = hash_us;
      j["step_hash_fraction"] = share;
    }
    std::ofstream f{o.json_path};
    f << j.dump(2) << "\n";
    if (!f) {
      std::fprintf(stderr, "bench hash: cannot write %s\n", o.json_path.c_str());
      return 1;
    }
  }
  return 0;
}

} // namespace tessera::bench
