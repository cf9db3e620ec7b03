#include "engine/sampler.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "engine/engine_errc.hpp"
#include "engine/sampling_params.hpp"

namespace {

using tessera::engine::engine_errc;
using tessera::engine::sample;
using tessera::engine::sampled_token;
using tessera::engine::sampler_scratch;
using tessera::engine::sampler_uniform;
using tessera::engine::sampling_params;

// sample() on logits that are fine: the token drawn (an error fails the test).
sampled_token draw(std::span<const float> logits, const sampling_params& params, uint64_t seed,
                   uint64_t step, std::span<const int32_t> prompt,
                   std::span<const int32_t> output, sampler_scratch& scratch) {
  auto t = sample(logits, params, seed, step, prompt, output, scratch);
  if (!t) {
    ADD_FAILURE() << tessera::error_text(t.error());
    return {};
  }
  return std::move(*t);
}

sampling_params greedy_params() {
  sampling_params p;
  p.temperature = 0.0f;
  return p;
}

int32_t pick(const std::vector<float>& logits, const sampling_params& params,
             uint64_t step = 0, std::vector<int32_t> prompt = {},
             std::vector<int32_t> output = {}, uint64_t seed = 42) {
  sampler_scratch scratch;
  return draw(logits, params, seed, step, prompt, output, scratch).token;
}

// Token counts over `draws` consecutive steps with one scratch, as the engine
// calls it.
std::vector<int> histogram(const std::vector<float>& logits, const sampling_params& params,
                           int draws, uint64_t seed = 7) {
  std::vector<int> counts(logits.size(), 0);
  sampler_scratch scratch;
  for (int step = 0; step < draws; ++step)
    ++counts[draw(logits, params, seed, static_cast<uint64_t>(step), {}, {}, scratch).token];
  return counts;
}

std::vector<double> softmax(const std::vector<float>& logits, double temperature = 1.0) {
  double max = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  double sum = 0.0;
  for (size_t i = 0; i < logits.size(); ++i)
    sum += p[i] = std::exp((logits[i] - max) / temperature);
  for (double& x : p)
    x /= sum;
  return p;
}

// Pearson's statistic of observed counts against expected probabilities.
double chi_square(const std::vector<int>& counts, const std::vector<double>& p) {
  const double n = std::accumulate(counts.begin(), counts.end(), 0.0);
  double chi = 0.0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (p[i] == 0.0) {
      EXPECT_EQ(counts[i], 0) << "token " << i << " has probability 0";
      continue;
    }
    const double expected = n * p[i];
    chi += (counts[i] - expected) * (counts[i] - expected) / expected;
  }
  return chi;
}

std::vector<float> random_logits(size_t vocab, uint32_t seed, float scale = 4.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> logits(vocab);
  for (float& x : logits)
    x = dist(gen);
  return logits;
}

std::vector<float> log_of(const std::vector<double>& probs) {
  std::vector<float> out;
  for (double p : probs)
    out.push_back(static_cast<float>(std::log(p)));
  return out;
}

// --- greedy -----------------------------------------------------------------

TEST(SamplerTest, GreedyPicksTheArgmax) {
  EXPECT_EQ(pick({0.1f, 2.5f, -1.0f, 2.4f}, greedy_params()), 1);
  EXPECT_EQ(pick({-3.0f, -2.0f, -5.0f}, greedy_params()), 1);
}

TEST(SamplerTest, GreedyPicksTheLowestIdAmongTies) {
  EXPECT_EQ(pick({0.0f, 3.0f, 1.0f, 3.0f, 3.0f}, greedy_params()), 1);
  auto p = greedy_params();
  p.repetition_penalty = 1.5f; // the penalised path has its own argmax pass
  EXPECT_EQ(pick({0.0f, 3.0f, 1.0f, 3.0f, 3.0f}, p, 0, {0}), 1);
}

TEST(SamplerTest, GreedyIgnoresSeedAndStep) {
  const auto logits = random_logits(100, 3);
  const int32_t first = pick(logits, greedy_params(), 0, {}, {}, 1);
  for (uint64_t step = 0; step < 50; ++step)
    EXPECT_EQ(pick(logits, greedy_params(), step, {}, {}, step * 977), first);
}

TEST(SamplerTest, TopKOneEqualsGreedy) {
  for (uint32_t seed = 0; seed < 20; ++seed) {
    const auto logits = random_logits(500, seed, 1.0f);
    sampling_params p;
    p.temperature = 1.5f;
    p.top_k = 1;
    EXPECT_EQ(pick(logits, p, seed), pick(logits, greedy_params()));
  }
}

TEST(SamplerTest, TinyTemperatureIsGreedy) {
  // Below vLLM's epsilon the request is greedy: ties go to the lowest id
  // every time instead of splitting between them.
  sampling_params p;
  p.temperature = 1e-6f;
  EXPECT_EQ(histogram({2.0f, 2.0f, 1.0f}, p, 200), (std::vector<int>{200, 0, 0}));
}

TEST(SamplerTest, SmallTemperatureApproachesGreedy) {
  const std::vector<float> logits{1.0f, 0.9f, 0.5f, 0.95f};
  sampling_params p;
  p.temperature = 1.0f;
  EXPECT_GT(histogram(logits, p, 2000)[1], 100); // plenty of non-argmax at T=1
  p.temperature = 0.005f; // gap 0.05 / 0.005 = 10 nats
  const auto counts = histogram(logits, p, 2000);
  EXPECT_GE(counts[0], 1995);
}

// --- log-probabilities --------------------------------------------------------

TEST(SamplerTest, LogprobEqualsDoublePrecisionLogSoftmax) {
  for (uint32_t seed = 0; seed < 5; ++seed) {
    const auto logits = random_logits(32000, seed, 6.0f);
    const auto p = softmax(logits);
    sampling_params params;
    params.logprobs = 20;
    sampler_scratch scratch;
    for (uint64_t step = 0; step < 5; ++step) {
      const sampled_token t = draw(logits, params, 9, step, {}, {}, scratch);
      EXPECT_NEAR(t.logprob, std::log(p[t.token]), 1e-4);
      for (const auto& top : t.top_logprobs)
        EXPECT_NEAR(top.logprob, std::log(p[top.token]), 1e-4) << "token " << top.token;
    }
  }
}

TEST(SamplerTest, LogprobComesFromTheRawDistributionEvenWhenPenalised) {
  const std::vector<float> logits{2.0f, 1.5f, 0.0f};
  auto params = greedy_params();
  params.repetition_penalty = 2.0f;
  params.logprobs = 0;
  sampler_scratch scratch;
  const std::vector<int32_t> output{0};
  const sampled_token t = draw(logits, params, 1, 0, {}, output, scratch);
  ASSERT_EQ(t.token, 1);
  EXPECT_NEAR(t.logprob, std::log(softmax(logits)[1]), 1e-6);
}

TEST(SamplerTest, LogprobIsOnlyComputedWhenAskedFor) {
  const std::vector<float> logits{2.0f, 1.5f, 0.0f};
  sampler_scratch scratch;
  const sampled_token t = draw(logits, greedy_params(), 1, 0, {}, {}, scratch);
  EXPECT_EQ(t.token, 0);
  EXPECT_EQ(t.logprob, 0.0f);
  EXPECT_TRUE(t.top_logprobs.empty());
}

TEST(SamplerTest, TopLogprobsAreTheMostLikelyFirstWithTiesByLowerId) {
  const std::vector<float> logits{0.0f, 5.0f, 3.0f, 5.0f, -1.0f, 3.0f, 4.0f, 3.0f};
  sampling_params params = greedy_params();
  params.logprobs = 5;
  sampler_scratch scratch;
  const sampled_token t = draw(logits, params, 1, 0, {}, {}, scratch);
  std::vector<int32_t> ids;
  for (const auto& top : t.top_logprobs)
    ids.push_back(top.token);
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 3, 6, 2, 5}));
  for (size_t i = 1; i < t.top_logprobs.size(); ++i)
    EXPECT_GE(t.top_logprobs[i - 1].logprob, t.top_logprobs[i].logprob);
}

TEST(SamplerTest, TopLogprobsCountFollowsTheRequest) {
  const auto logits = random_logits(1000, 11);
  sampler_scratch scratch;
  sampling_params params;
  EXPECT_TRUE(draw(logits, params, 1, 0, {}, {}, scratch).top_logprobs.empty());
  params.logprobs = 0;
  EXPECT_TRUE(draw(logits, params, 1, 0, {}, {}, scratch).top_logprobs.empty());
  params.logprobs = 20;
  const auto t = draw(logits, params, 1, 0, {}, {}, scratch);
  ASSERT_EQ(t.top_logprobs.size(), 20u);
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  for (size_t i = 0; i < 20; ++i)
    EXPECT_EQ(t.top_logprobs[i].token, order[i]) << "rank " << i;
  // A vocabulary smaller than the request gives every token.
  EXPECT_EQ(draw(std::vector<float>{1.0f, 2.0f, 3.0f}, params, 1, 0, {}, {}, scratch)
              .top_logprobs.size(),
            3u);
}

// --- the seeded draw ----------------------------------------------------------

TEST(SamplerTest, SameSeedAndStepGiveTheSameToken) {
  const auto logits = random_logits(32000, 5, 2.0f);
  sampling_params params;
  params.top_p = 0.95f;
  sampler_scratch a;
  sampler_scratch b;
  std::vector<int32_t> first;
  for (uint64_t step = 0; step < 100; ++step)
    first.push_back(draw(logits, params, 1234, step, {}, {}, a).token);
  // Again in reverse order with another scratch: nothing carries over.
  for (uint64_t step = 100; step-- > 0;)
    EXPECT_EQ(draw(logits, params, 1234, step, {}, {}, b).token, first[step]);
  // And the draws do vary with the step and the seed.
  std::vector<int32_t> distinct = first;
  std::sort(distinct.begin(), distinct.end());
  EXPECT_GT(std::unique(distinct.begin(), distinct.end()) - distinct.begin(), 10);
  int differ = 0;
  for (uint64_t step = 0; step < 100; ++step)
    differ += draw(logits, params, 4321, step, {}, {}, a).token != first[step];
  EXPECT_GT(differ, 50);
}

TEST(SamplerTest, DrawsFollowSoftmaxOfLogitsOverTemperature) {
  const std::vector<float> logits{1.0f, 0.5f, -0.3f, 2.0f, 0.0f, 1.2f, -1.0f, 0.7f};
  for (const float temperature : {1.0f, 0.6f, 1.7f}) {
    sampling_params params;
    params.temperature = temperature;
    for (const uint64_t seed : {1ull, 99ull}) {
      const auto counts = histogram(logits, params, 20000, seed);
      // 7 degrees of freedom: P(chi2 > 24.3) = 0.001. Wrong temperature
      // handling gives chi2 in the hundreds.
      EXPECT_LT(chi_square(counts, softmax(logits, temperature)), 24.3)
        << "temperature " << temperature << " seed " << seed;
    }
  }
}

TEST(SamplerTest, DrawsWithAWrongTemperatureFailTheChiSquareCheck) {
  // Guards the statistic above: it does tell temperatures apart.
  const std::vector<float> logits{1.0f, 0.5f, -0.3f, 2.0f, 0.0f, 1.2f, -1.0f, 0.7f};
  sampling_params params;
  params.temperature = 1.0f;
  EXPECT_GT(chi_square(histogram(logits, params, 20000), softmax(logits, 1.2)), 100.0);
}

// --- filters ------------------------------------------------------------------

TEST(SamplerTest, TopKNeverPicksOutsideTheKLargest) {
  const std::vector<float> logits{1.0f, 3.0f, 0.5f, 2.5f, 2.9f, 0.0f, 1.5f, 2.0f};
  sampling_params params;
  params.top_k = 3; // {1, 4, 3}
  const auto counts = histogram(logits, params, 20000);
  std::vector<float> kept(logits.size(), -INFINITY);
  for (int id : {1, 4, 3})
    kept[id] = logits[id];
  EXPECT_LT(chi_square(counts, softmax(kept)), 13.8); // 2 dof, P = 0.001
}

TEST(SamplerTest, TopKOnALargeVocabularyKeepsOnlyTheKLargest) {
  const auto logits = random_logits(32000, 21, 1.0f);
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  const std::vector<int32_t> top(order.begin(), order.begin() + 40);
  sampling_params params;
  params.top_k = 40;
  params.temperature = 5.0f; // flat, so every one of the 40 shows up
  sampler_scratch scratch;
  std::vector<int> seen(logits.size(), 0);
  for (uint64_t step = 0; step < 4000; ++step)
    ++seen[draw(logits, params, 3, step, {}, {}, scratch).token];
  for (size_t id = 0; id < logits.size(); ++id) {
    const bool in_top = std::find(top.begin(), top.end(), id) != top.end();
    if (in_top)
      EXPECT_GT(seen[id], 0) << "token " << id << " is in the top k";
    else
      EXPECT_EQ(seen[id], 0) << "token " << id << " is outside the top k";
  }
}

TEST(SamplerTest, TopPRestrictsToTheNucleus) {
  const std::vector<double> probs{0.05, 0.5, 0.1, 0.3, 0.05};
  const auto logits = log_of(probs);
  sampling_params params;
  params.top_p = 0.75f; // 0.5 + 0.3 is the smallest prefix reaching it
  const auto counts = histogram(logits, params, 20000);
  EXPECT_LT(chi_square(counts, {0.0, 0.5 / 0.8, 0.0, 0.3 / 0.8, 0.0}), 10.8); // 1 dof
  params.top_p = 0.4f; // the most likely token alone
  EXPECT_EQ(histogram(logits, params, 500), (std::vector<int>{0, 500, 0, 0, 0}));
  params.top_p = 0.85f; // 0.5 + 0.3 + 0.1
  const auto wider = histogram(logits, params, 20000);
  EXPECT_LT(chi_square(wider, {0.0, 0.5 / 0.9, 0.1 / 0.9, 0.3 / 0.9, 0.0}), 13.8);
}

TEST(SamplerTest, MinPDropsTokensBelowTheThreshold) {
  const std::vector<double> probs{0.1, 0.4, 0.2, 0.3};
  const auto logits = log_of(probs);
  sampling_params params;
  params.min_p = 0.4f; // threshold 0.16: drops token 0 only
  const auto counts = histogram(logits, params, 20000);
  EXPECT_LT(chi_square(counts, {0.0, 0.4 / 0.9, 0.2 / 0.9, 0.3 / 0.9}), 13.8);
  params.min_p = 0.6f; // threshold 0.24: keeps 1 and 3
  const auto narrower = histogram(logits, params, 20000);
  EXPECT_LT(chi_square(narrower, {0.0, 0.4 / 0.7, 0.0, 0.3 / 0.7}), 10.8);
}

// A plain implementation of the documented algorithm (full comparator sort
// of every token). The optimised sampler must pick exactly the same tokens.
int32_t reference_sample(const std::vector<float>& logits, const sampling_params& params,
                         uint64_t seed, uint64_t step) {
  const size_t vocab = logits.size();
  std::vector<float> x(vocab);
  for (size_t i = 0; i < vocab; ++i)
    x[i] = logits[i] / params.temperature;
  std::vector<int32_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return x[a] != x[b] ? x[a] > x[b] : a < b;
  });
  if (params.top_k > 0 && static_cast<size_t>(params.top_k) < vocab)
    order.resize(static_cast<size_t>(params.top_k));
  const float max = x[order[0]];
  std::vector<float> e(vocab, 0.0f);
  double total = 0.0;
  const bool top_k = order.size() < vocab;
  for (size_t i = 0; i < vocab; ++i)
    e[i] = x[i] == max ? 1.0f : tessera::engine::sampler_exp(x[i] - max);
  if (top_k) {
    for (int32_t id : order)
      total += e[id];
  } else {
    // Over the whole vocabulary in four interleaved lanes, as documented.
    std::array<double, 4> lanes{};
    for (size_t i = 0; i < vocab; ++i)
      lanes[i % 4] += e[i];
    total = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
  }
  size_t keep = order.size();
  if (params.top_p < 1.0f) {
    double cum = 0.0;
    for (size_t j = 0; j < order.size(); ++j) {
      cum += e[order[j]];
      if (cum >= static_cast<double>(params.top_p) * total) {
        keep = j + 1;
        break;
      }
    }
  }
  while (keep > 1 && (e[order[keep - 1]] < params.min_p || e[order[keep - 1]] == 0.0f))
    --keep;
  double kept = 0.0;
  for (size_t j = 0; j < keep; ++j)
    kept += e[order[j]];
  const double target = sampler_uniform(seed, step) * kept;
  double cum = 0.0;
  for (size_t j = 0; j < keep; ++j) {
    cum += e[order[j]];
    if (cum > target)
      return order[j];
  }
  return order[keep - 1];
}

TEST(SamplerTest, LargeVocabularyMatchesAPlainReferenceExactly) {
  auto logits = random_logits(32000, 8, 3.0f);
  // Coarse values make many ties, which the candidate order must break by id.
  auto coarse = logits;
  for (float& v : coarse)
    v = std::round(v * 2.0f) / 2.0f;
  struct filter {
    float temperature;
    int32_t top_k;
    float top_p;
    float min_p;
  };
  const std::array<filter, 6> filters{{{1.0f, 0, 1.0f, 0.0f},
                                       {0.8f, 0, 0.9f, 0.0f},
                                       {1.3f, 0, 1.0f, 0.05f},
                                       {1.0f, 50, 0.95f, 0.0f},
                                       {2.0f, 1000, 1.0f, 0.1f},
                                       {3.0f, 0, 0.5f, 0.01f}}};
  sampler_scratch scratch;
  for (const auto* values : {&logits, &coarse}) {
    for (const filter& f : filters) {
      sampling_params params;
      params.temperature = f.temperature;
      params.top_k = f.top_k;
      params.top_p = f.top_p;
      params.min_p = f.min_p;
      for (uint64_t step = 0; step < 30; ++step)
        ASSERT_EQ(draw(*values, params, 77, step, {}, {}, scratch).token,
                  reference_sample(*values, params, 77, step))
          << "T " << f.temperature << " top_k " << f.top_k << " top_p " << f.top_p
          << " min_p " << f.min_p << " step " << step;
    }
  }
}

TEST(SamplerTest, NegativeInfinityLogitsAreNeverPicked) {
  const float inf = INFINITY;
  sampling_params params;
  params.top_k = 3;
  EXPECT_EQ(histogram({-inf, 0.0f, -inf, -inf}, params, 300), (std::vector<int>{0, 300, 0, 0}));
  params.top_k = 0;
  EXPECT_EQ(histogram({-inf, 0.0f, -inf, -inf}, params, 300), (std::vector<int>{0, 300, 0, 0}));
}

// --- logits the model should never produce ----------------------------------

// Every kind of request: greedy, sampled, top-k, with logprobs, penalised.
std::vector<sampling_params> every_kind_of_request() {
  std::vector<sampling_params> kinds(5);
  kinds[0] = greedy_params();
  kinds[1].temperature = 0.8f;
  kinds[2].top_k = 2;
  kinds[3].logprobs = 2;
  kinds[4].repetition_penalty = 1.3f;
  return kinds;
}

// The sampler's error for `logits` under each kind of request, as text; a
// token drawn instead fails the test.
void expect_bad_logits(const std::vector<float>& logits, const std::string& message) {
  for (const sampling_params& params : every_kind_of_request()) {
    sampler_scratch scratch;
    const std::vector<int32_t> output{1};
    auto t = sample(logits, params, 1, 0, {}, output, scratch);
    ASSERT_FALSE(t) << "drew token " << t->token << " from bad logits (temperature "
                    << params.temperature << ")";
    EXPECT_TRUE(t.error() == engine_errc::bad_logits) << tessera::error_text(t.error());
    EXPECT_EQ(tessera::error_message(t.error()), message);
  }
}

TEST(SamplerTest, NaNLogitsAreAnErrorNamingTheFirstNaN) {
  std::vector<float> logits{0.5f, 1.0f, 2.0f, NAN, 3.0f, NAN, 0.0f, 1.0f};
  expect_bad_logits(logits, "logits contain NaN (first at token id 3 of 8)");
  // Past the scan's eight lanes, and in its tail.
  std::vector<float> large(1003, 0.25f);
  large[1001] = NAN;
  expect_bad_logits(large, "logits contain NaN (first at token id 1001 of 1003)");
  large[517] = -NAN;
  expect_bad_logits(large, "logits contain NaN (first at token id 517 of 1003)");
}

TEST(SamplerTest, PositiveInfinityIsAnError) {
  expect_bad_logits({0.5f, 1.0f, INFINITY, 3.0f, INFINITY},
                    "logits contain +inf (first at token id 2 of 5)");
}

TEST(SamplerTest, LogitsWithNoFiniteValueAreAnError) {
  expect_bad_logits({-INFINITY, -INFINITY, -INFINITY},
                    "logits have no finite value (all of 3 are -inf)");
}

TEST(SamplerTest, SamplesAgainOnGoodLogitsAfterAnError) {
  sampler_scratch scratch;
  EXPECT_FALSE(sample(std::vector<float>{NAN, 1.0f}, greedy_params(), 1, 0, {}, {}, scratch));
  EXPECT_EQ(draw(std::vector<float>{0.0f, 1.0f}, greedy_params(), 1, 0, {}, {}, scratch).token, 1);
}

// --- penalties ----------------------------------------------------------------

TEST(SamplerTest, RepetitionPenaltyDividesPositiveLogitsOfSeenTokens) {
  const std::vector<float> logits{2.0f, 1.5f, 0.0f};
  auto params = greedy_params();
  EXPECT_EQ(pick(logits, params, 0, {}, {0}), 0);
  params.repetition_penalty = 2.0f; // 2.0 / 2 = 1.0 < 1.5
  EXPECT_EQ(pick(logits, params, 0, {}, {0}), 1);
  EXPECT_EQ(pick(logits, params, 0, {0}, {}), 1); // prompt tokens count too
  EXPECT_EQ(pick(logits, params, 0, {2}, {2}), 0); // only seen tokens change
}

TEST(SamplerTest, RepetitionPenaltyMultipliesNegativeLogits) {
  // Dividing -1.0 by 2 would raise it above -1.5 and keep token 0.
  const std::vector<float> logits{-1.0f, -1.5f, -4.0f};
  auto params = greedy_params();
  params.repetition_penalty = 2.0f; // -1.0 * 2 = -2.0 < -1.5
  EXPECT_EQ(pick(logits, params, 0, {0}, {}), 1);
  params.repetition_penalty = 0.5f; // < 1 encourages: -1.5 * 0.5 = -0.75 > -1.0
  EXPECT_EQ(pick(logits, params, 0, {1}, {}), 1);
}

TEST(SamplerTest, RepetitionPenaltyAppliesOncePerToken) {
  // Once: 3.0 / 2 = 1.5 > 1.4. Twice or more would drop it below 1.4.
  const std::vector<float> logits{3.0f, 1.4f};
  auto params = greedy_params();
  params.repetition_penalty = 2.0f;
  EXPECT_EQ(pick(logits, params, 0, {0, 0}, {0, 0, 0}), 0);
}

TEST(SamplerTest, FrequencyPenaltySubtractsPerOccurrenceInTheOutput) {
  const std::vector<float> logits{2.0f, 1.0f};
  auto params = greedy_params();
  params.frequency_penalty = 0.6f;
  EXPECT_EQ(pick(logits, params, 0, {}, {0}), 0);    // 2.0 - 0.6 = 1.4
  EXPECT_EQ(pick(logits, params, 0, {}, {0, 0}), 1); // 2.0 - 1.2 = 0.8
  params.frequency_penalty = 0.4f;
  EXPECT_EQ(pick(logits, params, 0, {}, {0, 0}), 0); // 2.0 - 0.8 = 1.2
  params.frequency_penalty = 0.6f;
  EXPECT_EQ(pick(logits, params, 0, {0, 0, 0}, {}), 0); // not the prompt
  params.frequency_penalty = -0.6f; // negative encourages: 1.0 + 1.2 > 2.0
  EXPECT_EQ(pick(logits, params, 0, {}, {1, 1}), 1);
}

TEST(SamplerTest, PresencePenaltySubtractsOnceForTokensInTheOutput) {
  const std::vector<float> logits{2.0f, 1.0f};
  auto params = greedy_params();
  params.presence_penalty = 0.9f;
  EXPECT_EQ(pick(logits, params, 0, {}, {0, 0, 0}), 0); // 2.0 - 0.9 = 1.1
  params.presence_penalty = 1.1f;
  EXPECT_EQ(pick(logits, params, 0, {}, {0}), 1); // 2.0 - 1.1 = 0.9
  EXPECT_EQ(pick(logits, params, 0, {0}, {}), 0); // not the prompt
}

TEST(SamplerTest, PenaltiesCombineAndLeaveTheScratchClean) {
  const std::vector<float> logits{4.0f, 1.9f, 1.0f};
  auto params = greedy_params();
  params.repetition_penalty = 2.0f;
  params.frequency_penalty = 0.05f;
  sampler_scratch scratch;
  // Once: 4.0 / 2 - 0.05 = 1.95 > 1.9. Three times: 4.0 / 2 - 0.15 = 1.85 < 1.9.
  const std::vector<int32_t> one{0};
  const std::vector<int32_t> three{0, 0, 0};
  EXPECT_EQ(draw(logits, params, 1, 0, {}, one, scratch).token, 0);
  EXPECT_EQ(draw(logits, params, 1, 0, {}, three, scratch).token, 1);
  // Counters left behind would penalise token 0 here.
  EXPECT_EQ(draw(logits, params, 1, 0, {}, one, scratch).token, 0);
  EXPECT_TRUE(std::all_of(scratch.token_counts.begin(), scratch.token_counts.end(),
                          [](int32_t c) { return c == 0; }));
}

// --- sampler_exp / sampler_uniform ---------------------------------------------

TEST(SamplerTest, ExpIsAccurateAndZeroFarBelow) {
  for (float x = -87.0f; x <= 0.0f; x += 0.01f) {
    const double want = std::exp(static_cast<double>(x));
    EXPECT_NEAR(tessera::engine::sampler_exp(x), want, want * 4e-7) << "x " << x;
  }
  EXPECT_EQ(tessera::engine::sampler_exp(0.0f), 1.0f);
  EXPECT_EQ(tessera::engine::sampler_exp(-90.0f), 0.0f);
  EXPECT_EQ(tessera::engine::sampler_exp(-INFINITY), 0.0f);
}

// --- sampler_uniform ----------------------------------------------------------

TEST(SamplerTest, UniformIsInTheUnitIntervalAndStateless) {
  std::vector<double> forward;
  double sum = 0.0;
  for (uint64_t step = 0; step < 10000; ++step) {
    const double u = sampler_uniform(5, step);
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
    forward.push_back(u);
    sum += u;
  }
  EXPECT_NEAR(sum / 10000.0, 0.5, 0.01);
  for (uint64_t step = 10000; step-- > 0;)
    ASSERT_EQ(sampler_uniform(5, step), forward[step]);
  EXPECT_EQ(sampler_uniform(5, 3), sampler_uniform(5, 3));
  EXPECT_NE(sampler_uniform(5, 3), sampler_uniform(6, 3));
  EXPECT_NE(sampler_uniform(5, 3), sampler_uniform(5, 4));
  EXPECT_NE(sampler_uniform(0, 0), sampler_uniform(1, 1)); // seed ^ step collisions
}

// --- validate -----------------------------------------------------------------

TEST(SamplingParamsTest, AcceptsDefaultsAndBoundaries) {
  EXPECT_FALSE(sampling_params{}.validate());
  sampling_params p;
  p.temperature = 0.0f;
  p.top_k = -1;
  p.top_p = 1.0f;
  p.min_p = 1.0f;
  p.repetition_penalty = 100.0f;
  p.frequency_penalty = -2.0f;
  p.presence_penalty = 2.0f;
  p.max_tokens = 1 << 24;
  p.min_tokens = 1 << 24;
  p.logprobs = 20;
  p.stop = std::vector<std::string>(16, std::string(256, 'x'));
  p.stop_token_ids = std::vector<int32_t>(64, 0);
  p.seed = 0;
  EXPECT_FALSE(p.validate()) << tessera::error_text(p.validate());
}

struct bad_case {
  const char* field;
  void (*set)(sampling_params&);
};

TEST(SamplingParamsTest, RejectsEachBadFieldNamingIt) {
  const bad_case cases[] = {
    {"temperature", [](sampling_params& p) { p.temperature = -0.1f; }},
    {"temperature", [](sampling_params& p) { p.temperature = NAN; }},
    {"temperature", [](sampling_params& p) { p.temperature = INFINITY; }},
    {"temperature", [](sampling_params& p) { p.temperature = 101.0f; }},
    {"top_k", [](sampling_params& p) { p.top_k = -2; }},
    {"top_p", [](sampling_params& p) { p.top_p = 0.0f; }},
    {"top_p", [](sampling_params& p) { p.top_p = 1.5f; }},
    {"top_p", [](sampling_params& p) { p.top_p = NAN; }},
    {"min_p", [](sampling_params& p) { p.min_p = -0.1f; }},
    {"min_p", [](sampling_params& p) { p.min_p = 1.1f; }},
    {"repetition_penalty", [](sampling_params& p) { p.repetition_penalty = 0.0f; }},
    {"repetition_penalty", [](sampling_params& p) { p.repetition_penalty = 101.0f; }},
    {"frequency_penalty", [](sampling_params& p) { p.frequency_penalty = 2.5f; }},
    {"frequency_penalty", [](sampling_params& p) { p.frequency_penalty = -2.5f; }},
    {"presence_penalty", [](sampling_params& p) { p.presence_penalty = -2.1f; }},
    {"presence_penalty", [](sampling_params& p) { p.presence_penalty = NAN; }},
    {"max_tokens", [](sampling_params& p) { p.max_tokens = 0; }},
    {"max_tokens", [](sampling_params& p) { p.max_tokens = (1 << 24) + 1; }},
    {"min_tokens", [](sampling_params& p) { p.min_tokens = -1; }},
    {"min_tokens", [](sampling_params& p) { p.min_tokens = 17; }},
    {"logprobs", [](sampling_params& p) { p.logprobs = -1; }},
    {"logprobs", [](sampling_params& p) { p.logprobs = 21; }},
    {"stop", [](sampling_params& p) { p.stop = {"ok", ""}; }},
    {"stop", [](sampling_params& p) { p.stop = {std::string(257, 'x')}; }},
    {"stop", [](sampling_params& p) { p.stop = std::vector<std::string>(17, "x"); }},
    {"stop_token_ids", [](sampling_params& p) { p.stop_token_ids = {2, -1}; }},
    {"stop_token_ids",
     [](sampling_params& p) { p.stop_token_ids = std::vector<int32_t>(65, 1); }},
  };
  for (const bad_case& c : cases) {
    sampling_params p;
    c.set(p);
    const caf::error err = p.validate();
    ASSERT_TRUE(err) << c.field << " was accepted";
    EXPECT_TRUE(err == engine_errc::bad_request) << tessera::error_text(err);
    const std::string message = tessera::error_message(err);
    EXPECT_EQ(message.rfind(c.field, 0), 0u) << message;
  }
}

TEST(SamplingParamsTest, MessageGivesTheRangeAndTheValue) {
  sampling_params p;
  p.top_p = 1.5f;
  EXPECT_EQ(tessera::error_message(p.validate()), "top_p must be in (0, 1], got 1.5");
  p = {};
  p.stop = {"a", std::string(300, 'x')};
  EXPECT_EQ(tessera::error_message(p.validate()), "stop[1] must be at most 256 bytes, got 300");
}

} // namespace
