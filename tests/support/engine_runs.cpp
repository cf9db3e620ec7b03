#include "tests/support/engine_runs.hpp"

#include <cstring>
#include <random>

#include <gtest/gtest.h>

#include "common/error.hpp"

namespace tessera::test {

std::vector<int32_t> random_prompt(int n, uint64_t seed, int32_t vocab) {
  std::mt19937_64 rng{seed};
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (auto& t : p)
    t = static_cast<int32_t>(8 + rng() % static_cast<uint64_t>(vocab - 8));
  return p;
}

engine::request make_request(uint64_t id, std::vector<int32_t> prompt, int max_tokens, float temperature) {
  engine::request r;
  r.id = id;
  r.prompt = std::move(prompt);
  r.params.temperature = temperature;
  r.params.max_tokens = max_tokens;
  r.params.ignore_eos = true;
  r.params.logprobs = 0;
  r.params.seed = 1000 + id;
  return r;
}

void collect(std::map<uint64_t, run_result>& out, const std::vector<engine::request_output>& step) {
  for (const auto& o : step) {
    auto& r = out[o.id];
    r.tokens.insert(r.tokens.end(), o.tokens.begin(), o.tokens.end());
    for (const auto& lp : o.logprobs)
      r.logprobs.push_back(lp.logprob);
    r.text += o.text;
    r.cached_prompt_tokens = o.cached_prompt_tokens;
    if (o.finish != engine::finish_reason::none) {
      r.finish = o.finish;
      r.stop_reason = o.stop_reason;
      r.stop_token = o.stop_token;
    }
  }
}

std::map<uint64_t, run_result> drain(engine::engine& eng) {
  std::map<uint64_t, run_result> out;
  for (int guard = 0; eng.has_unfinished() && guard < 100000; ++guard)
    collect(out, eng.step());
  EXPECT_FALSE(eng.has_unfinished());
  return out;
}

std::map<uint64_t, run_result> run_all(engine::engine& eng, const std::vector<engine::request>& reqs) {
  for (const auto& r : reqs) {
    auto err = eng.add_request(r);
    EXPECT_FALSE(err) << error_text(err);
  }
  return drain(eng);
}

run_result run_one(engine::engine& eng, const engine::request& r) {
  return run_all(eng, {r})[r.id];
}

size_t put_blocks(const engine::engine& from, const engine::kv_export_blocks& src, engine::engine& to,
                  const engine::kv_import_plan& plan) {
  auto from_pool = from.get_backend().kv_pool_memory();
  auto to_pool = to.get_backend().kv_pool_memory();
  EXPECT_FALSE(from_pool.empty());
  EXPECT_FALSE(to_pool.empty());
  EXPECT_EQ(plan.blocks.size(), src.blocks.size());
  EXPECT_EQ(plan.needs_data.size(), src.blocks.size());
  const size_t bb = src.meta.layout.block_bytes();
  size_t moved = 0;
  for (size_t i = 0; i < plan.blocks.size(); ++i) {
    if (plan.needs_data[i] == 0)
      continue;
    std::memcpy(to_pool.data() + static_cast<size_t>(plan.blocks[i]) * bb,
                from_pool.data() + static_cast<size_t>(src.blocks[i]) * bb, bb);
    ++moved;
  }
  return moved;
}

} // namespace tessera::test
