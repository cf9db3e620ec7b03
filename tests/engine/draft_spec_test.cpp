// Speculative decoding with a draft model (engine/draft_model.hpp): greedy
// output equals plain decoding token for token under batching, preemption,
// prefix caching, chunked prefill and a draft pool under pressure; a draft
// that IS the target has every draft accepted; sampled output follows the
// target's distribution (two-sample chi-square on a top-k-4 vocabulary);
// neither pool leaks a block; a draft with another vocabulary or tokenizer
// is refused by name.
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "common/error.hpp"
#include "engine/cpu/cpu_backend.hpp"
#include "engine/draft_model.hpp"
#include "engine/engine_errc.hpp"
#include "engine/speculative.hpp"
#include "tests/support/engine_runs.hpp"
#include "tests/support/test_model.hpp"

namespace {

using namespace tessera;
using namespace tessera::engine;

using test::make_request;
using test::run_result;
using test::random_prompt;
using test::run_all;
using test::run_one;

using method = speculative_params::method_kind;

/// A CPU backend over test model `shape` (weights seeded `seed`) with
/// `blocks` KV blocks, to serve as a draft.
std::unique_ptr<backend> draft_backend(std::string_view shape, uint64_t seed, int32_t blocks = 256,
                                       dtype kv = dtype::bf16) {
  cpu::cpu_backend_options o;
  o.num_blocks = blocks;
  o.kv_dtype = kv;
  o.threads = 2;
  auto be = cpu::make_cpu_backend(test::test_model_weights(shape, dtype::bf16, seed), o);
  EXPECT_TRUE(be) << error_text(be.error());
  return std::move(*be);
}

test::test_engine_options opts_with(int32_t blocks = 256, int32_t budget = 512, int32_t chunk = 0) {
  test::test_engine_options o;
  o.backend.num_blocks = blocks;
  o.backend.threads = 2;
  o.engine.scheduling.max_batched_tokens = budget;
  o.engine.scheduling.max_prefill_chunk = chunk;
  return o;
}

/// A nano engine with a draft model: `draft_shape` seeded `draft_seed`
/// (seed 1 on nano is the target itself).
std::unique_ptr<engine::engine> engine_with_draft(const test::test_engine_options& o,
                                                  std::string_view draft_shape = "nano",
                                                  uint64_t draft_seed = 1, int32_t draft_blocks = 256) {
  auto eng = test::make_test_engine("nano", o);
  auto err = eng->attach_draft_model(draft_backend(draft_shape, draft_seed, draft_blocks));
  EXPECT_FALSE(err) << error_message(err);
  return eng;
}

request with_draft(request r, int32_t k) {
  r.params.speculative = speculative_params{method::draft, k};
  return r;
}

run_result plain_run(request r) {
  r.params.speculative.reset();
  return run_one(*test::make_test_engine("nano", opts_with()), r);
}

void expect_no_leak(const engine::engine& eng) {
  const auto st = eng.stats();
  EXPECT_EQ(st.free_blocks, st.num_blocks) << "target pool";
  ASSERT_NE(eng.get_draft_model(), nullptr);
  const auto ds = eng.get_draft_model()->stats();
  EXPECT_EQ(ds.free_blocks, ds.num_blocks) << "draft pool";
}

TEST(DraftSpecTest, DraftThatIsTheTargetHasEveryDraftAccepted) {
  // Same weights: the draft's logits are the target's bit for bit (the
  // kernels are batch-invariant), so every greedy draft is what the target
  // picks, and every sampled draft has q == p (accepted with probability 1).
  for (float temperature : {0.0f, 0.8f}) {
    auto eng = engine_with_draft(opts_with());
    std::vector<request> reqs;
    for (uint64_t i = 0; i < 3; ++i)
      reqs.push_back(with_draft(make_request(i, random_prompt(7 + static_cast<int>(i), 50 + i), 40, temperature),
                                2 + static_cast<int32_t>(i)));
    auto got = run_all(*eng, reqs);
    const auto st = eng->stats();
    EXPECT_GT(st.draft_tokens, 30u) << temperature;
    EXPECT_EQ(st.accepted_draft_tokens, st.draft_tokens) << temperature;
    if (temperature == 0.0f) {
      for (const auto& r : reqs)
        EXPECT_EQ(got[r.id], plain_run(r)) << r.id;
    }
    for (const auto& r : reqs)
      EXPECT_EQ(got[r.id].tokens.size(), 40u);
    expect_no_leak(*eng);
  }
}

TEST(DraftSpecTest, GreedyOutputEqualsPlainUnderBatching) {
  // A different draft (another shape and other weights: its KV layout
  // differs from the target's), several K, mixed with n-gram and plain
  // requests in one batch.
  for (auto [shape, seed] : {std::pair{"nano-mha", uint64_t{5}}, std::pair{"nano", uint64_t{1}}}) {
    std::vector<request> reqs;
    for (uint64_t i = 0; i < 6; ++i) {
      auto r = make_request(i, random_prompt(9 + static_cast<int>(i), 20 + i), 32);
      if (i == 4)
        r.params.speculative = speculative_params{method::ngram, 3};
      else if (i != 5)
        r = with_draft(r, 1 + static_cast<int32_t>(i) * 2);
      reqs.push_back(r);
    }
    auto eng = engine_with_draft(opts_with(256, 96), shape, seed);
    auto got = run_all(*eng, reqs);
    EXPECT_GT(eng->stats().draft_tokens, 0u) << shape;
    EXPECT_GT(eng->get_draft_model()->stats().forwards, 0u);
    for (const auto& r : reqs)
      EXPECT_EQ(got[r.id], plain_run(r)) << shape << " request " << r.id;
    expect_no_leak(*eng);
  }
}

TEST(DraftSpecTest, PreemptionAndChunkedPrefillAndSampledRequestsLeakNoBlock) {
  // 12 target blocks of 16 tokens for four ~60-token requests: preemption
  // by recompute; the draft keeps its KV across it (the tokens do not
  // change) or recomputes what differs. Sampled requests run beside the
  // greedy ones (their output follows the target's distribution, not plain
  // decoding's draws: the chi-square test checks them).
  for (int32_t chunk : {0, 5}) {
    std::vector<request> reqs;
    for (uint64_t i = 0; i < 4; ++i)
      reqs.push_back(with_draft(make_request(i, random_prompt(32, 40 + i), 28, i % 2 ? 0.7f : 0.0f), 4));
    auto eng = engine_with_draft(opts_with(12, 64, chunk), "nano", 1);
    auto got = run_all(*eng, reqs);
    const auto st = eng->stats();
    EXPECT_GT(st.preemptions, 0u) << chunk;
    EXPECT_GT(st.draft_tokens, 0u);
    for (const auto& r : reqs) {
      EXPECT_EQ(got[r.id].tokens.size(), 28u);
      if (r.params.temperature == 0.0f) {
        EXPECT_EQ(got[r.id], plain_run(r)) << "chunk " << chunk << " request " << r.id;
      }
    }
    expect_no_leak(*eng);
  }
}

TEST(DraftSpecTest, SmallDraftPoolEvictsAndStillMatches) {
  // 33 draft blocks (one longest sequence plus drafts) for three
  // sequences of ~330 tokens: the least recently used caches lose their
  // blocks and catch up by recompute when they draft again.
  std::vector<request> reqs;
  for (uint64_t i = 0; i < 3; ++i)
    reqs.push_back(with_draft(make_request(i, random_prompt(300, 70 + i), 24), 2));
  auto eng = engine_with_draft(opts_with(256, 512), "nano", 1, 33);
  auto got = run_all(*eng, reqs);
  EXPECT_GT(eng->get_draft_model()->stats().evictions, 0u);
  EXPECT_GT(eng->stats().accepted_draft_tokens, 0u);
  for (const auto& r : reqs)
    EXPECT_EQ(got[r.id], plain_run(r)) << r.id;
  expect_no_leak(*eng);
}

TEST(DraftSpecTest, PrefixCacheHoldsOnlyAcceptedTokens) {
  auto eng = engine_with_draft(opts_with(256, 512), "nano-mha", 5);
  const auto prompt = random_prompt(21, 9);
  auto a = run_one(*eng, with_draft(make_request(1, prompt, 40), 5));
  EXPECT_GT(eng->stats().draft_tokens, 0u);
  EXPECT_LT(eng->stats().accepted_draft_tokens, eng->stats().draft_tokens) << "a different draft errs";
  EXPECT_EQ(a, plain_run(make_request(1, prompt, 40)));
  auto cont = prompt;
  cont.insert(cont.end(), a.tokens.begin(), a.tokens.end());
  auto b = run_one(*eng, with_draft(make_request(2, cont, 16), 5));
  EXPECT_GE(b.cached_prompt_tokens, static_cast<int32_t>(prompt.size()) / 16 * 16);
  EXPECT_EQ(b, plain_run(make_request(2, cont, 16)));
  expect_no_leak(*eng);
}

// Pearson's chi-square for homogeneity of two samples over the same cells.
double two_sample_chi_square(const std::map<int64_t, int64_t>& a, const std::map<int64_t, int64_t>& b,
                             int& cells) {
  std::set<int64_t> keys;
  int64_t na = 0, nb = 0;
  for (auto [k, v] : a) {
    keys.insert(k);
    na += v;
  }
  for (auto [k, v] : b) {
    keys.insert(k);
    nb += v;
  }
  double x2 = 0;
  cells = static_cast<int>(keys.size());
  for (auto k : keys) {
    const double ca = a.contains(k) ? static_cast<double>(a.at(k)) : 0.0;
    const double cb = b.contains(k) ? static_cast<double>(b.at(k)) : 0.0;
    const double tot = ca + cb;
    const double ea = tot * static_cast<double>(na) / static_cast<double>(na + nb);
    const double eb = tot * static_cast<double>(nb) / static_cast<double>(na + nb);
    x2 += (ca - ea) * (ca - ea) / ea + (cb - eb) * (cb - eb) / eb;
  }
  return x2;
}

TEST(DraftSpecTest, SampledOutputFollowsTheTargetDistribution) {
  // top_k 4 makes the vocabulary tiny: the joint distribution of the first
  // two tokens has at most 16 cells. The second token is the one the
  // rejection rule decides (max_tokens 3, K 1: the first comes from the
  // prefill, the second is verified, the third is the bonus row). Two
  // drafts: one with other weights (another top 4: nearly every draft is
  // rejected and the token resampled from max(0, p - q)), and the target
  // itself with int8 KV (q close to p: nearly every draft accepted, a few
  // rejected). Plain decoding and speculation over 3000 seeds each must
  // agree (99.9% quantile of chi-square, fixed seeds).
  const auto prompt = random_prompt(6, 77);
  constexpr int n = 3000;
  auto joint = [&](bool speculate, engine::engine& eng) {
    std::vector<request> reqs;
    for (uint64_t i = 0; i < n; ++i) {
      auto r = make_request(i, prompt, 3, 1.0f);
      r.params.top_k = 4;
      r.params.seed = 12345 + i * 7919 + (speculate ? 1 : 0) * 1000003;
      if (speculate)
        r = with_draft(r, 1);
      reqs.push_back(r);
    }
    std::map<int64_t, int64_t> counts;
    for (auto& [id, res] : run_all(eng, reqs)) {
      EXPECT_EQ(res.tokens.size(), 3u);
      ++counts[int64_t{res.tokens[0]} * 1000 + res.tokens[1]];
    }
    return counts;
  };
  // At most 4 sequences at once: drafts are proposed only while a step's
  // decoding tokens stay within 8.
  auto o = opts_with(1024, 4096);
  o.engine.scheduling.max_num_seqs = 4;
  auto plain_eng = test::make_test_engine("nano", o);
  const auto plain = joint(false, *plain_eng);
  for (bool near : {false, true}) {
    auto spec_eng = test::make_test_engine("nano", o);
    ASSERT_FALSE(spec_eng->attach_draft_model(near ? draft_backend("nano", 1, 256, dtype::i8)
                                                   : draft_backend("nano-mha", 5)));
    const auto spec = joint(true, *spec_eng);
    const auto st = spec_eng->stats();
    EXPECT_EQ(st.draft_tokens, static_cast<uint64_t>(n));
    EXPECT_LT(st.accepted_draft_tokens, st.draft_tokens) << near;
    if (near) {
      EXPECT_GT(st.accepted_draft_tokens, st.draft_tokens * 9 / 10);
    }
    int cells = 0;
    const double x2 = two_sample_chi_square(plain, spec, cells);
    ASSERT_GE(cells, 4);
    ASSERT_LE(cells, 16);
    // 99.9% quantiles of chi-square with 1..15 degrees of freedom.
    constexpr double q999[] = {0,     10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32, 26.12,
                               27.88, 29.59, 31.26, 32.91, 34.53, 36.12, 37.70};
    EXPECT_LT(x2, q999[cells - 1]) << cells << " cells, near " << near << ", accepted "
                                   << st.accepted_draft_tokens << " of " << st.draft_tokens;
    expect_no_leak(*spec_eng);
  }
}

TEST(DraftSpecTest, RefusesADraftWithAnotherVocabularyOrTokenizer) {
  auto eng = test::make_test_engine("nano", opts_with());
  // micro: 2048 tokens against nano's 512.
  auto err = eng->attach_draft_model(draft_backend("micro", 1));
  ASSERT_TRUE(err);
  EXPECT_NE(error_message(err).find("vocabulary"), std::string::npos) << error_message(err);
  EXPECT_NE(error_message(err).find("2048"), std::string::npos) << error_message(err);
  EXPECT_EQ(eng->get_draft_model(), nullptr);
  // Too small a draft pool for one sequence of the longest context.
  err = eng->attach_draft_model(draft_backend("nano", 1, 8));
  ASSERT_TRUE(err);
  EXPECT_NE(error_message(err).find("KV pool"), std::string::npos) << error_message(err);
  // Without a draft model, method draft is refused naming the fix.
  auto r = with_draft(make_request(1, random_prompt(5, 1)), 4);
  err = eng->add_request(r);
  ASSERT_TRUE(err);
  EXPECT_NE(error_message(err).find("draft model"), std::string::npos) << error_message(err);
  // Attached once; a second is refused; K out of range still is.
  ASSERT_FALSE(eng->attach_draft_model(draft_backend("nano", 2)));
  EXPECT_TRUE(eng->attach_draft_model(draft_backend("nano", 3)));
  for (int32_t k : {0, 17}) {
    err = eng->add_request(with_draft(r, k));
    ASSERT_TRUE(err) << k;
    EXPECT_NE(error_message(err).find("speculative num_tokens"), std::string::npos) << error_message(err);
  }
  EXPECT_FALSE(eng->add_request(r));
  // Tokenizers: the same one passes; another vocabulary is named.
  EXPECT_FALSE(check_draft_tokenizer(*test::test_tokenizer("nano"), *test::test_tokenizer("nano-mha")));
  auto terr = check_draft_tokenizer(*test::test_tokenizer("nano"), *test::test_tokenizer("micro"));
  ASSERT_TRUE(terr);
  EXPECT_NE(error_message(terr).find("tokenizer"), std::string::npos) << error_message(terr);
}

TEST(DraftSpecTest, DraftUniformStreamsAreIndependentOfTheSampler) {
  for (uint64_t step : {0u, 1u, 99u}) {
    EXPECT_NE(draft_uniform(7, 0, step), sampler_uniform(7, step));
    EXPECT_NE(draft_uniform(7, 0, step), draft_uniform(7, 1, step));
    EXPECT_NE(draft_uniform(7, 1, step), draft_uniform(7, 2, step));
    EXPECT_EQ(draft_uniform(7, 2, step), draft_uniform(7, 2, step));
    EXPECT_GE(draft_uniform(7, 2, step), 0.0);
    EXPECT_LT(draft_uniform(7, 2, step), 1.0);
  }
}

} // namespace
