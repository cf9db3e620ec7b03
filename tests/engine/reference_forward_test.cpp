// The engine's forward pass against a naive double-precision reference
// (tests/support/reference_model.cpp) on random models of every kind.
#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "common/error.hpp"
#include "tests/support/reference_model.hpp"
#include "tests/support/test_model.hpp"

namespace {

using namespace tessera;
using namespace tessera::engine;

struct ref_case {
  const char* shape;
  dtype weights;
  dtype kv;
};

std::string case_name(const testing::TestParamInfo<ref_case>& info) {
  std::string s = info.param.shape;
  for (auto& c : s)
    if (c == '-')
      c = '_';
  return s + "_w" + std::string{to_safetensors_name(info.param.weights)} + "_kv" +
         std::string{to_safetensors_name(info.param.kv)};
}

std::vector<int32_t> random_prompt(int n, int32_t vocab, uint64_t seed) {
  std::mt19937_64 rng{seed};
  std::vector<int32_t> p(n);
  for (auto& t : p)
    t = static_cast<int32_t>(8 + rng() % static_cast<uint64_t>(vocab - 8));
  return p;
}

class ReferenceForwardTest : public testing::TestWithParam<ref_case> {};

// Logits of a prefill and of the decode steps after it, within tolerance of
// the reference at every step, and the same greedy tokens.
TEST_P(ReferenceForwardTest, LogitsAndGreedyTokensMatchTheReference) {
  const auto& p = GetParam();
  auto weights = test::test_model_weights(p.shape, p.weights);
  test::test_engine_options opts;
  opts.weights = p.weights;
  opts.backend.kv_dtype = p.kv;
  opts.backend.num_blocks = 64;
  auto eng = test::make_test_engine(p.shape, opts);
  const auto& cfg = weights->config;
  auto prompt = random_prompt(21, cfg.vocab_size, 7);
  const int n_gen = 8;

  request r;
  r.id = 1;
  r.prompt = prompt;
  r.params.temperature = 0;
  r.params.max_tokens = n_gen;
  r.params.ignore_eos = true;
  r.params.logprobs = 0;
  ASSERT_FALSE(eng->add_request(r));
  std::vector<int32_t> got;
  std::vector<float> got_logprob;
  while (eng->has_unfinished())
    for (auto& o : eng->step())
      for (size_t i = 0; i < o.tokens.size(); ++i) {
        got.push_back(o.tokens[i]);
        got_logprob.push_back(o.logprobs[i].logprob);
      }
  ASSERT_EQ(got.size(), static_cast<size_t>(n_gen));

  test::reference_options ro;
  ro.round_kv_to_bf16 = p.kv == dtype::bf16;
  // The reference over the engine's own tokens: per-step logprobs compare
  // even where a near-tie would let greedy choices diverge.
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), got.begin(), got.end());
  auto ref = test::reference_logits(*weights, all, ro);
  const double tol = p.kv == dtype::bf16 ? 2e-3 : 2e-4;
  for (int i = 0; i < n_gen; ++i) {
    const auto& row = ref[prompt.size() - 1 + i];
    double m = *std::max_element(row.begin(), row.end());
    double sum = 0;
    for (double x : row)
      sum += std::exp(x - m);
    const double ref_lp = row[got[i]] - m - std::log(sum);
    EXPECT_NEAR(got_logprob[i], ref_lp, tol) << "step " << i;
    // The engine's token is the reference's argmax, or within tolerance of it.
    EXPECT_LE(m - row[got[i]], tol) << "step " << i;
  }

  // Greedy from the reference itself agrees wherever its choice is clear.
  std::vector<double> margins;
  auto ref_tokens = test::reference_greedy(*weights, prompt, n_gen, &margins, ro);
  int compared = 0;
  for (int i = 0; i < n_gen; ++i) {
    if (margins[i] < 3 * tol)
      break; // a near-tie: later tokens may legitimately differ
    ASSERT_EQ(got[i], ref_tokens[i]) << "step " << i;
    ++compared;
  }
  EXPECT_GE(compared, 3) << "too many near-ties to check greedy agreement";
}

INSTANTIATE_TEST_SUITE_P(
  Shapes, ReferenceForwardTest,
  testing::Values(ref_case{"nano", dtype::f32, dtype::f32},
                  ref_case{"nano", dtype::bf16, dtype::f32},
                  ref_case{"nano", dtype::bf16, dtype::bf16},
                  ref_case{"nano-tied", dtype::bf16, dtype::f32},
                  ref_case{"nano-mha", dtype::f32, dtype::f32},
                  ref_case{"nano-qwen2", dtype::bf16, dtype::f32},
                  ref_case{"nano-llama3", dtype::bf16, dtype::f32},
                  ref_case{"micro", dtype::bf16, dtype::bf16}),
  case_name);

} // namespace
