// Speculative decoding: the n-gram proposer, the rejection rule's
// distribution (chi-square on a tiny vocabulary), the backends' multi-row
// logits, and the engine invariants: output with speculation equals output
// without, token for token and logprob for logprob, under batching,
// chunked prefill, preemption and prefix caching; rejected drafts leave no
// block behind.
#include <cmath>
#include <map>
#include <random>

#include <gtest/gtest.h>

#include "common/error.hpp"
#include "engine/cpu/cpu_backend.hpp"
#include "engine/engine_errc.hpp"
#include "engine/sampler.hpp"
#include "engine/sim/sim_backend.hpp"
#include "engine/speculative.hpp"
#include "tests/support/engine_runs.hpp"
#include "tests/support/test_model.hpp"

namespace {

using namespace tessera;
using namespace tessera::engine;

using test::make_request;
using test::random_prompt;
using test::run_all;
using test::run_one;

// ---- the n-gram proposer ----------------------------------------------------

std::vector<int32_t> propose(std::vector<int32_t> tokens, int32_t k) {
  std::vector<int32_t> out;
  const int32_t n = ngram_propose(tokens, k, out);
  EXPECT_EQ(n, static_cast<int32_t>(out.size()));
  return out;
}

TEST(SpecDecodeTest, NgramProposesWhatFollowedTheLastNgram) {
  // The trigram 1 2 3 occurred before, followed by 4 5 6.
  EXPECT_EQ(propose({1, 2, 3, 4, 5, 6, 9, 1, 2, 3}, 3), (std::vector<int32_t>{4, 5, 6}));
  // Fewer than k tokens follow the match: what there is.
  EXPECT_EQ(propose({7, 8, 9, 7, 8}, 5), (std::vector<int32_t>{9, 7, 8}));
  // k caps the proposal; k 0 proposes nothing.
  EXPECT_EQ(propose({1, 2, 3, 4, 5, 6, 1, 2, 3}, 2), (std::vector<int32_t>{4, 5}));
  EXPECT_TRUE(propose({1, 2, 3, 4, 1, 2, 3}, 0).empty());
  // No earlier occurrence of any suffix n-gram: nothing.
  EXPECT_TRUE(propose({1, 2, 3, 4, 5}, 4).empty());
  EXPECT_TRUE(propose({5}, 4).empty());
  EXPECT_TRUE(propose({}, 4).empty());
}

TEST(SpecDecodeTest, NgramPrefersTheLongestMatchThenTheMostRecent) {
  // Suffix 3 1 2: the unigram 2 is followed by 7 most recently, the bigram
  // 1 2 by 8, the trigram 3 1 2 by 9; the trigram wins.
  EXPECT_EQ(propose({3, 1, 2, 9, 0, 1, 2, 8, 0, 2, 7, 3, 1, 2}, 1), (std::vector<int32_t>{9}));
  // Without a trigram match, the bigram.
  EXPECT_EQ(propose({1, 2, 8, 0, 2, 7, 3, 1, 2}, 1), (std::vector<int32_t>{8}));
  // Two occurrences of the same trigram: the later one.
  EXPECT_EQ(propose({1, 2, 3, 4, 1, 2, 3, 5, 1, 2, 3}, 1), (std::vector<int32_t>{5}));
  // A match may run into the suffix itself (a repeated token).
  EXPECT_EQ(propose({6, 6, 6, 6}, 4), (std::vector<int32_t>{6}));
}

// ---- the rejection rule -------------------------------------------------------

// Pearson's chi-square of `counts` against probabilities `p` (cells with
// p == 0 must be empty).
double chi_square(const std::vector<int64_t>& counts, const std::vector<double>& p) {
  int64_t n = 0;
  for (auto c : counts)
    n += c;
  double x2 = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == 0) {
      EXPECT_EQ(counts[i], 0) << "token " << i << " has no probability";
      continue;
    }
    const double e = p[i] * static_cast<double>(n);
    x2 += (static_cast<double>(counts[i]) - e) * (static_cast<double>(counts[i]) - e) / e;
  }
  return x2;
}

// 99.9% quantiles of chi-square with 3 and 4 degrees of freedom.
constexpr double chi2_999_df3 = 16.27;
constexpr double chi2_999_df4 = 18.47;

TEST(SpecDecodeTest, RejectionSamplingKeepsTheTargetDistribution) {
  const std::vector<float> p{0.5f, 0.2f, 0.15f, 0.1f, 0.05f};
  // A draft that disagrees with the target everywhere, one that puts mass
  // where p has little, and q == p.
  const std::vector<std::vector<float>> qs{{0.05f, 0.1f, 0.15f, 0.2f, 0.5f},
                                           {0.2f, 0.2f, 0.2f, 0.2f, 0.2f},
                                           p};
  std::mt19937_64 rng{42};
  std::uniform_real_distribution<double> uni{0.0, 1.0};
  constexpr int n = 200000;
  for (const auto& q : qs) {
    std::discrete_distribution<int32_t> draw_q(q.begin(), q.end());
    std::vector<int64_t> counts(p.size(), 0);
    int64_t accepted = 0;
    for (int i = 0; i < n; ++i) {
      const int32_t d = draw_q(rng);
      auto r = rejection_sample(p, q, d, uni(rng), uni(rng));
      ++counts[static_cast<size_t>(r.token)];
      accepted += r.accepted ? 1 : 0;
      if (r.accepted)
        EXPECT_EQ(r.token, d);
    }
    const std::vector<double> pd(p.begin(), p.end());
    EXPECT_LT(chi_square(counts, pd), chi2_999_df4);
    // Acceptance rate sum_x min(p(x), q(x)).
    double expect_accept = 0;
    for (size_t x = 0; x < p.size(); ++x)
      expect_accept += std::min(p[x], q[x]);
    EXPECT_NEAR(static_cast<double>(accepted) / n, expect_accept, 0.01);
  }
}

TEST(SpecDecodeTest, RejectionOfAPointMassDrawsFromTheRestOfP) {
  const std::vector<float> p{0.4f, 0.3f, 0.2f, 0.1f};
  const std::vector<float> q{0.0f, 1.0f, 0.0f, 0.0f}; // the draft is token 1
  EXPECT_TRUE(rejection_sample(p, q, 1, 0.29, 0.5).accepted);
  auto r = rejection_sample(p, q, 1, 0.31, 0.0);
  EXPECT_FALSE(r.accepted);
  EXPECT_EQ(r.token, 0);
  // Resampling never gives the rejected draft back.
  for (double u : {0.0, 0.3, 0.57, 0.58, 0.9, 0.999999})
    EXPECT_NE(rejection_sample(p, q, 1, 0.99, u).token, 1) << u;
}

// The engine's rule for n-gram drafts: draw the target's own token with the
// sampler at (seed, step) and keep the draft when they agree. Over many
// seeds, the emitted token follows the target (top-p filtered, temperature
// scaled) distribution, accepted with probability p(draft).
TEST(SpecDecodeTest, SamplerCoupledAcceptanceOfAPointMassDraftMatchesTheTarget) {
  const std::vector<float> logits{2.0f, 1.0f, 0.5f, -1.0f, 0.0f};
  sampling_params sp;
  sp.temperature = 0.9f;
  sp.top_p = 0.95f;
  // The target distribution as the sampler defines it: softmax(l / T), then
  // the smallest top set reaching top_p, renormalised.
  std::vector<double> p(logits.size());
  double z = 0;
  for (size_t i = 0; i < logits.size(); ++i)
    z += p[i] = std::exp(logits[i] / sp.temperature);
  for (auto& v : p)
    v /= z;
  std::vector<size_t> order{0, 1, 2, 4, 3};
  double cum = 0;
  std::vector<double> target(p.size(), 0.0);
  for (size_t i : order) {
    target[i] = p[i];
    cum += p[i];
    if (cum >= sp.top_p)
      break;
  }
  for (auto& v : target)
    v /= cum;
  constexpr int32_t draft = 1;
  sampler_scratch scratch;
  std::vector<int64_t> counts(logits.size(), 0);
  int64_t accepted = 0;
  constexpr int n = 100000;
  for (int s = 0; s < n; ++s) {
    auto t = sample(logits, sp, static_cast<uint64_t>(s) * 7919 + 3, 5, {}, {}, scratch);
    ASSERT_TRUE(t);
    ++counts[static_cast<size_t>(t->token)];
    accepted += t->token == draft ? 1 : 0;
  }
  // token 3 is outside top_p: 4 degrees of freedom minus one empty cell.
  EXPECT_LT(chi_square(counts, target), chi2_999_df3);
  EXPECT_NEAR(static_cast<double>(accepted) / n, target[draft], 0.01);
}

// ---- backends: several logits rows == the rows one by one ----------------------

// Computes `tokens` in one forward with a logits row each, and again one
// token per forward into other blocks; the rows must be equal bit for bit.
void expect_rows_equal_one_by_one(backend& be, const std::vector<int32_t>& tokens) {
  const int32_t bt = be.layout().block_tokens;
  const auto n = static_cast<int32_t>(tokens.size());
  const int32_t nb = (n + bt - 1) / bt;
  ASSERT_LE(2 * nb, be.num_blocks());
  std::vector<kv_block_id> table_a, table_b;
  for (int32_t i = 0; i < nb; ++i) {
    table_a.push_back(i);
    table_b.push_back(nb + i);
  }
  const auto vocab = static_cast<size_t>(be.logits_vocab());
  // One prefix token without logits, then the rest with a row each.
  std::vector<float> all(static_cast<size_t>(n - 1) * vocab);
  forward_seq f{tokens, 0, table_a, n - 1};
  be.forward(std::span{&f, 1}, all.data());
  std::vector<float> one(vocab);
  for (int32_t i = 0; i < n; ++i) {
    forward_seq g{std::span{tokens}.subspan(static_cast<size_t>(i), 1), i, table_b, i == 0 ? 0 : 1};
    be.forward(std::span{&g, 1}, one.data());
    if (i == 0)
      continue;
    std::vector<float> row(all.begin() + static_cast<ptrdiff_t>((i - 1) * vocab),
                           all.begin() + static_cast<ptrdiff_t>(i * vocab));
    EXPECT_EQ(row, one) << "row of token " << i;
  }
}

TEST(SpecDecodeTest, CpuMultiRowLogitsEqualTheRowsOneByOne) {
  cpu::cpu_backend_options o;
  o.num_blocks = 16;
  o.threads = 2;
  auto be = cpu::make_cpu_backend(test::test_model_weights("nano"), o);
  ASSERT_TRUE(be) << error_text(be.error());
  expect_rows_equal_one_by_one(**be, random_prompt(37, 5));
}

TEST(SpecDecodeTest, SimMultiRowLogitsEqualTheRowsOneByOne) {
  auto cfg = model_shape("nano");
  ASSERT_TRUE(cfg.has_value());
  sim::sim_backend_options o;
  o.settings.time_scale = 0;
  o.num_blocks = 16;
  auto be = sim::make_sim_backend(*cfg, o);
  ASSERT_TRUE(be) << error_text(be.error());
  expect_rows_equal_one_by_one(**be, random_prompt(37, 6));
}

// ---- the engine -------------------------------------------------------------------

test::test_engine_options opts_with(int32_t blocks = 256, int32_t budget = 512, int32_t chunk = 0,
                                    int32_t spec_k = 0) {
  test::test_engine_options o;
  o.backend.num_blocks = blocks;
  o.backend.threads = 2;
  o.engine.scheduling.max_batched_tokens = budget;
  o.engine.scheduling.max_prefill_chunk = chunk;
  if (spec_k > 0)
    o.engine.speculative = {speculative_params::method_kind::ngram, spec_k};
  return o;
}

request with_spec(request r, int32_t k) {
  r.params.speculative = speculative_params{speculative_params::method_kind::ngram, k};
  return r;
}

// A prompt the n-grams can predict: the model's own greedy output after a
// random prefix, fed back after that prefix again, so drafts copied from the
// first pass are often right.
std::vector<int32_t> repetitive_prompt(int prefix, uint64_t seed, int out_len = 48) {
  auto p = random_prompt(prefix, seed);
  auto first = run_one(*test::make_test_engine("nano", opts_with()), make_request(900, p, out_len));
  std::vector<int32_t> prompt = p;
  prompt.insert(prompt.end(), first.tokens.begin(), first.tokens.end());
  prompt.insert(prompt.end(), p.begin(), p.end());
  return prompt;
}

TEST(SpecDecodeTest, GreedyAndSeededOutputEqualsPlainDecodingUnderBatching) {
  // Mixed: speculating and plain requests, greedy and seeded sampling,
  // repetitive and random prompts, in one batch.
  std::vector<request> plain, mixed;
  for (uint64_t i = 0; i < 6; ++i) {
    auto prompt = i % 3 == 2 ? random_prompt(9 + static_cast<int>(i), 20 + i)
                             : repetitive_prompt(8 + static_cast<int>(i), 30 + i);
    auto r = make_request(i, prompt, 40, i % 2 ? 0.8f : 0.0f);
    plain.push_back(r);
    mixed.push_back(i == 4 ? r : with_spec(r, 1 + static_cast<int32_t>(i % 4) * 2));
  }
  auto eng = test::make_test_engine("nano", opts_with(256, 96));
  const int32_t free0 = eng->stats().free_blocks;
  auto got = run_all(*eng, mixed);
  const auto st = eng->stats();
  EXPECT_GT(st.draft_tokens, 0u);
  EXPECT_GT(st.accepted_draft_tokens, 0u) << "the repetitive prompts' drafts are right at times";
  EXPECT_LT(st.accepted_draft_tokens, st.draft_tokens);
  EXPECT_EQ(st.free_blocks, free0) << "rejected drafts leave no block behind";
  for (const auto& r : plain) {
    auto alone = run_one(*test::make_test_engine("nano", opts_with()), r);
    EXPECT_EQ(got[r.id], alone) << "request " << r.id;
    EXPECT_EQ(got[r.id].tokens.size(), 40u);
  }
}

TEST(SpecDecodeTest, EngineDefaultSpeculatesAndChunkedPrefillStillMatches) {
  auto r = make_request(1, repetitive_prompt(12, 3), 32);
  auto plain = run_one(*test::make_test_engine("nano", opts_with()), r);
  for (int32_t chunk : {0, 5}) {
    for (int32_t k : {1, 4, 8}) {
      auto eng = test::make_test_engine("nano", opts_with(256, 512, chunk, k));
      EXPECT_EQ(run_one(*eng, r), plain) << "chunk " << chunk << " k " << k;
      EXPECT_GT(eng->stats().draft_tokens, 0u);
    }
  }
  // A request saying method none does not speculate under a default.
  auto eng = test::make_test_engine("nano", opts_with(256, 512, 0, 4));
  auto off = r;
  off.params.speculative = speculative_params{};
  EXPECT_EQ(run_one(*eng, off), plain);
  EXPECT_EQ(eng->stats().draft_tokens, 0u);
}

TEST(SpecDecodeTest, PreemptionWithDraftsMatchesAndLeaksNoBlock) {
  // 12 blocks of 16 tokens for requests of ~60 tokens each: they cannot
  // all hold their blocks at once, and drafts need more.
  std::vector<request> reqs;
  for (uint64_t i = 0; i < 4; ++i)
    reqs.push_back(with_spec(make_request(i, repetitive_prompt(6, 40 + i, 20), 24,
                                          i % 2 ? 0.7f : 0.0f), 6));
  auto eng = test::make_test_engine("nano", opts_with(12, 64));
  auto got = run_all(*eng, reqs);
  const auto st = eng->stats();
  EXPECT_GT(st.preemptions, 0u);
  EXPECT_GT(st.draft_tokens, 0u);
  EXPECT_EQ(st.free_blocks, st.num_blocks);
  for (auto r : reqs) {
    r.params.speculative.reset();
    EXPECT_EQ(got[r.id], run_one(*test::make_test_engine("nano", opts_with()), r)) << r.id;
  }
}

TEST(SpecDecodeTest, PrefixCacheHoldsOnlyAcceptedTokens) {
  const auto prompt = repetitive_prompt(10, 7);
  auto eng = test::make_test_engine("nano", opts_with(256, 512, 0, 5));
  auto a = run_one(*eng, make_request(1, prompt, 40));
  EXPECT_GT(eng->stats().accepted_draft_tokens, 0u);
  // A second request continuing from a's whole text hits the blocks a
  // cached, drafts included only where accepted: its output matches an
  // engine that never speculated.
  auto cont = prompt;
  cont.insert(cont.end(), a.tokens.begin(), a.tokens.end());
  auto b = run_one(*eng, make_request(2, cont, 16));
  EXPECT_GE(b.cached_prompt_tokens, static_cast<int32_t>(prompt.size()) / 16 * 16);
  auto fresh = run_one(*test::make_test_engine("nano", opts_with()), make_request(2, cont, 16));
  EXPECT_EQ(b, fresh);
  EXPECT_EQ(eng->stats().free_blocks, eng->stats().num_blocks);
}

TEST(SpecDecodeTest, StopConditionsApplyToEveryAcceptedToken) {
  auto base = make_request(1, repetitive_prompt(8, 11), 40);
  auto plain_full = run_one(*test::make_test_engine("nano", opts_with()), base);
  ASSERT_EQ(plain_full.tokens.size(), 40u);
  // Stop on a token from the middle of the output, min_tokens past its
  // first occurrence, and a max_tokens that ends mid-draft.
  auto stop = base;
  stop.params.stop_token_ids = {plain_full.tokens[17]};
  auto min_tok = stop;
  min_tok.params.min_tokens = 20;
  auto short_max = base;
  short_max.params.max_tokens = 13;
  for (const auto& r : {stop, min_tok, short_max}) {
    auto plain = run_one(*test::make_test_engine("nano", opts_with()), r);
    auto spec = run_one(*test::make_test_engine("nano", opts_with(256, 512, 0, 8)), r);
    EXPECT_EQ(spec, plain);
    EXPECT_EQ(spec.stop_token, plain.stop_token);
  }
}

TEST(SpecDecodeTest, RejectsBadSpeculativeParams) {
  auto eng = test::make_test_engine("nano", opts_with());
  auto r = make_request(1, random_prompt(5, 1));
  for (int32_t k : {0, -1, 17}) {
    auto bad = with_spec(r, k);
    auto err = eng->add_request(bad);
    ASSERT_TRUE(err) << k;
    EXPECT_NE(error_message(err).find("speculative num_tokens"), std::string::npos) << error_message(err);
  }
  auto draft = r;
  draft.params.speculative = speculative_params{speculative_params::method_kind::draft, 4};
  auto err = eng->add_request(draft);
  ASSERT_TRUE(err);
  EXPECT_NE(error_message(err).find("draft model"), std::string::npos) << error_message(err);
  EXPECT_FALSE(eng->has_unfinished());
}

} // namespace
