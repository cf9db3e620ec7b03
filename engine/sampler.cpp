#include "engine/sampler.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <string>

#include "common/assert.hpp"
#include "engine/engine_errc.hpp"

namespace tessera::engine {

namespace {

/// Below this temperature the request is greedy, as in vLLM (_SAMPLING_EPS):
/// dividing by a tinier temperature only overflows the logits.
constexpr float greedy_temperature = 1e-5f;

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A uint32 whose unsigned order is the float's order (sample() refuses NaN
// before any key is made). -0 is folded into +0 first so that equal values
// tie.
uint32_t orderable_bits(float x) {
  const uint32_t b = std::bit_cast<uint32_t>(x + 0.0f);
  return (b & 0x80000000u) != 0 ? ~b : (b | 0x80000000u);
}

// Ascending key order is descending logit, then ascending id: the candidate
// order the whole sampling path walks, and a total order, so any correct
// sort gives the same sequence.
uint64_t candidate_key(float logit, size_t id) {
  return (uint64_t{~orderable_bits(logit)} << 32) | static_cast<uint32_t>(id);
}

int32_t key_id(uint64_t key) {
  return static_cast<int32_t>(key & 0xffffffffu);
}

// Sorts keys that arrive in ascending id order by their high 32 bits with a
// stable LSD radix sort (11, 11, 10 bits); stability keeps ids ascending
// among equal logits, so the result equals std::sort of the full keys.
// O(n) instead of O(n log n) with a comparator: about 5x faster at 32k.
void sort_candidates(std::vector<uint64_t>& keys, std::vector<uint64_t>& tmp) {
  const size_t n = keys.size();
  if (n <= 256) {
    std::sort(keys.begin(), keys.end());
    return;
  }
  tmp.resize(n);
  constexpr std::array<int, 3> shifts{32, 43, 54};
  for (const int shift : shifts) {
    std::array<uint32_t, 2048> offsets{};
    for (const uint64_t k : keys)
      ++offsets[(k >> shift) & 2047u];
    // A digit shared by every key (common for the exponent bits) orders nothing.
    if (std::find(offsets.begin(), offsets.end(), n) != offsets.end())
      continue;
    uint32_t sum = 0;
    for (uint32_t& c : offsets) {
      const uint32_t count = c;
      c = sum;
      sum += count;
    }
    for (const uint64_t k : keys)
      tmp[offsets[(k >> shift) & 2047u]++] = k;
    keys.swap(tmp);
  }
}

// Cephes' expf from basic IEEE operations only: the same bits under every
// libm, and it vectorises, so the log-sum-exp over a 32000-token vocabulary
// takes microseconds where libm's expf takes ~100. Clamping first keeps the
// float-to-int conversion defined for any input.
inline float exp_nonpositive(float x) {
  // The loops calling this vectorise only with -fno-trapping-math (set for
  // this file in engine/CMakeLists.txt): otherwise GCC sinks the polynomial
  // under the final select and will not if-convert an FP operation that
  // may trap. The option changes no value.
  float xc = x < 0.0f ? x : 0.0f;
  xc = xc > -88.0f ? xc : -88.0f;
  constexpr float log2e = 1.44269504088896341f;
  constexpr float round_magic = 12582912.0f; // 1.5 * 2^23: x + it rounds x to an integer
  const float n = (xc * log2e + round_magic) - round_magic;
  float r = xc - n * 0.693359375f; // ln 2 split in two for an exact first product
  r = r - n * -2.12194440e-4f;
  float y = 1.9875691500e-4f;
  y = y * r + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = y * (r * r) + r + 1.0f;
  const float two_n = std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
  const float result = y * two_n;
  // Below -87.3 exp(x) is subnormal: 0 is as good for probabilities.
  return x < -87.3f ? 0.0f : result;
}

// exp(x - max) with the maximum mapped to exactly 1, which also keeps an
// infinite maximum (a huge penalised logit over a small temperature) from
// producing inf - inf.
inline float unnormalised_prob(float x, float max) {
  const float e = exp_nonpositive(x - max);
  return x == max ? 1.0f : e;
}

struct max_scan {
  float max = 0.0f;
  bool has_nan = false;
};

// Maximum (NaN ignored) and whether a NaN was seen, in eight independent
// lanes: one long compare chain over 32000 floats is latency-bound.
max_scan scan_max(const float* x, size_t n) {
  constexpr size_t lanes = 8;
  std::array<float, lanes> m;
  m.fill(-std::numeric_limits<float>::infinity());
  std::array<int32_t, lanes> nan{};
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    for (size_t l = 0; l < lanes; ++l) {
      const float v = x[i + l];
      m[l] = v > m[l] ? v : m[l];
      nan[l] |= static_cast<int32_t>(v != v);
    }
  }
  max_scan r{-std::numeric_limits<float>::infinity(), false};
  for (; i < n; ++i) {
    r.max = x[i] > r.max ? x[i] : r.max;
    r.has_nan |= x[i] != x[i];
  }
  for (size_t l = 0; l < lanes; ++l) {
    r.max = m[l] > r.max ? m[l] : r.max;
    r.has_nan |= nan[l] != 0;
  }
  return r;
}

// The lowest id holding `max` (which occurs in x).
size_t first_index_of(const float* x, size_t n, float max) {
  size_t i = 0;
  while (i < n && x[i] != max)
    ++i;
  return i;
}

// Writes unnormalised_prob(x[i], max) to out[i]; a separate loop so that it
// vectorises.
void unnormalised_probs(const float* x, float max, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i)
    out[i] = unnormalised_prob(x[i], max);
}

// Sum in double over four interleaved lanes (i % 4), combined as
// (0 + 1) + (2 + 3):
// a fixed order, so the same on every machine, and not one long chain of
// dependent additions.
double sum_lanes(const float* v, size_t n) {
  double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += v[i];
    s1 += v[i + 1];
    s2 += v[i + 2];
    s3 += v[i + 3];
  }
  for (; i < n; ++i)
    s0 += v[i];
  return (s0 + s1) + (s2 + s3);
}

// vLLM's order: repetition penalty over prompt and output, then frequency
// and presence over the output. `counts` is all zero on entry and on exit.
void apply_penalties(std::vector<float>& logits, const sampling_params& params,
                     std::span<const int32_t> prompt, std::span<const int32_t> output,
                     std::vector<int32_t>& counts) {
  const size_t vocab = logits.size();
  if (counts.size() != vocab)
    counts.assign(vocab, 0);
  // Ids at or past the row's end (a backend's logits_vocab() below the
  // vocabulary) are never sampled: nothing to penalise.
  auto in_row = [vocab](int32_t id) {
    TESSERA_ASSERT(id >= 0, "prompt/output token id out of the vocabulary");
    return static_cast<size_t>(id) < vocab;
  };
  if (params.repetition_penalty != 1.0f) {
    const float p = params.repetition_penalty;
    // counts marks tokens already penalised: a token is penalised once,
    // however often it occurs.
    auto penalise = [&](int32_t id) {
      if (!in_row(id) || counts[id] != 0)
        return;
      counts[id] = 1;
      float& x = logits[id];
      x = x > 0.0f ? x / p : x * p;
    };
    for (const int32_t id : prompt)
      penalise(id);
    for (const int32_t id : output)
      penalise(id);
    for (const int32_t id : prompt)
      if (in_row(id))
        counts[id] = 0;
    for (const int32_t id : output)
      if (in_row(id))
        counts[id] = 0;
  }
  if (params.frequency_penalty != 0.0f || params.presence_penalty != 0.0f) {
    for (const int32_t id : output)
      if (in_row(id))
        ++counts[id];
    for (const int32_t id : output) {
      if (!in_row(id) || counts[id] == 0)
        continue; // a repeat of a token already done
      logits[id] -= params.frequency_penalty * static_cast<float>(counts[id]);
      logits[id] -= params.presence_penalty;
      counts[id] = 0;
    }
  }
}

// The n highest logits, highest first, lower id first among equals, with
// their logits in .logprob (the caller turns them into logprobs). Insertion
// into a list of at most max_logprobs entries: one pass, and almost every
// token is rejected by one comparison with the current n-th.
void top_logits(std::span<const float> logits, size_t n, std::vector<token_logprob>& top) {
  top.clear();
  top.reserve(n);
  float nth = -std::numeric_limits<float>::infinity(); // entry to beat once full
  for (size_t i = 0; i < logits.size(); ++i) {
    const float x = logits[i];
    if (top.size() == n && !(x > nth))
      continue;
    if (top.size() < n)
      top.emplace_back();
    size_t j = top.size() - 1;
    // Strict >: ids arrive ascending, so an equal logit stays behind.
    while (j > 0 && x > top[j - 1].logprob) {
      top[j] = top[j - 1];
      --j;
    }
    top[j] = token_logprob{static_cast<int32_t>(i), x};
    nth = top.back().logprob;
  }
}

// Why `x` (scan: its scan_max) cannot be sampled from, naming the first
// offending token id. Only called once the scan found a fault.
caf::error bad_logits(const float* x, size_t n, const max_scan& scan) {
  const std::string of = " of " + std::to_string(n);
  if (scan.has_nan) {
    size_t i = 0;
    while (i < n && x[i] == x[i])
      ++i;
    return make_engine_error(engine_errc::bad_logits,
                             "logits contain NaN (first at token id " + std::to_string(i) + of + ")");
  }
  if (scan.max > 0.0f)
    return make_engine_error(engine_errc::bad_logits,
                             "logits contain +inf (first at token id " +
                               std::to_string(first_index_of(x, n, scan.max)) + of + ")");
  return make_engine_error(engine_errc::bad_logits,
                           "logits have no finite value (all" + of + " are -inf)");
}

} // namespace

float sampler_exp(float x) {
  return exp_nonpositive(x);
}

double sampler_uniform(uint64_t seed, uint64_t step) {
  return static_cast<double>(splitmix64(seed ^ splitmix64(step)) >> 11) * 0x1.0p-53;
}

namespace {

/// Step 1 of sample(): validates the raw logits and fills `result`'s
/// top_logprobs (when asked); returns the raw log-normaliser (0 when no
/// logprobs were asked for) in `log_norm` and the scan in `scan`.
caf::error raw_pass(std::span<const float> logits, const sampling_params& params,
                    sampler_scratch& scratch, sampled_token& result, double& log_norm,
                    max_scan& scan) {
  const size_t vocab = logits.size();
  TESSERA_ASSERT(vocab > 0 && vocab <= static_cast<size_t>(std::numeric_limits<int32_t>::max()),
                 "logits must have between 1 and 2^31-1 entries");
  const float* raw = logits.data();
  // 1. The raw distribution: log_softmax(logits) = logit - (max + log sum exp(logit - max)).
  scan = scan_max(raw, vocab);
  // NaN or infinite logits mean a corrupt KV cache or weights: this
  // sequence cannot go on, but the others in the batch can.
  if (scan.has_nan || !std::isfinite(scan.max)) [[unlikely]]
    return bad_logits(raw, vocab, scan);
  // Only requests that asked for logprobs pay for the exp pass over the
  // vocabulary (a greedy step without them is one max scan).
  log_norm = 0.0;
  if (params.logprobs) {
    std::vector<float>& e = scratch.probs; // [vocab] by token id
    e.resize(vocab);
    unnormalised_probs(raw, scan.max, vocab, e.data());
    log_norm = static_cast<double>(scan.max) + std::log(sum_lanes(e.data(), vocab));
  }
  if (params.logprobs && *params.logprobs > 0) {
    top_logits(logits, std::min(static_cast<size_t>(*params.logprobs), vocab),
               result.top_logprobs);
    for (token_logprob& t : result.top_logprobs)
      t.logprob = static_cast<float>(static_cast<double>(raw[static_cast<size_t>(t.token)]) - log_norm);
  }
  return {};
}

bool is_greedy(const sampling_params& params) {
  return params.temperature < greedy_temperature || params.top_k == 1;
}

/// Step 2 of sample(): whether penalties apply; if so, or when sampling,
/// scratch.logits holds the (penalised) copy of the logits.
bool penalised_copy(std::span<const float> logits, const sampling_params& params,
                    std::span<const int32_t> prompt, std::span<const int32_t> output,
                    sampler_scratch& scratch) {
  const bool penalise =
    (params.repetition_penalty != 1.0f && (!prompt.empty() || !output.empty()))
    || ((params.frequency_penalty != 0.0f || params.presence_penalty != 0.0f)
        && !output.empty());
  if (penalise || !is_greedy(params))
    scratch.logits.assign(logits.begin(), logits.end());
  if (penalise)
    apply_penalties(scratch.logits, params, prompt, output, scratch.token_counts);
  return penalise;
}

/// Step 4 of sample() up to the draw: temperature, top-k, softmax, top-p,
/// min-p over scratch.logits. The kept candidates are scratch.sort_keys[0,
/// returned count), best first; their unnormalised probabilities are in
/// scratch.probs by id, and their sum in `kept`.
size_t kept_candidates(const sampling_params& params, sampler_scratch& scratch, double& kept) {
  const size_t vocab = scratch.logits.size();
  float* x = scratch.logits.data();
  const float temperature = params.temperature;
  if (temperature != 1.0f)
    for (size_t i = 0; i < vocab; ++i)
      x[i] /= temperature;
  const float max = scan_max(x, vocab).max;
  std::vector<float>& e = scratch.probs; // [vocab] by token id
  e.resize(vocab);
  std::vector<uint64_t>& keys = scratch.sort_keys;
  keys.clear();
  double total = 0.0;
  if (params.top_k > 1 && static_cast<size_t>(params.top_k) < vocab) {
    const size_t k = static_cast<size_t>(params.top_k);
    keys.resize(vocab);
    for (size_t i = 0; i < vocab; ++i)
      keys[i] = candidate_key(x[i], i);
    std::nth_element(keys.begin(), keys.begin() + static_cast<ptrdiff_t>(k), keys.end());
    keys.resize(k);
    std::sort(keys.begin(), keys.end());
    for (const uint64_t key : keys) {
      const int32_t id = key_id(key);
      e[id] = unnormalised_prob(x[id], max);
      total += e[id];
    }
  } else {
    // Tokens min-p will drop (p < min_p * p_max, and p_max is 1 here) or
    // with zero probability can never be kept: the kept set is a prefix of
    // the sorted candidates and they would sort behind it. Leaving them out
    // before sorting changes no result and shortens the sort.
    unnormalised_probs(x, max, vocab, e.data());
    total = sum_lanes(e.data(), vocab);
    const float min_e = params.min_p;
    for (size_t i = 0; i < vocab; ++i)
      if (e[i] > 0.0f && e[i] >= min_e)
        keys.push_back(candidate_key(x[i], i));
    sort_candidates(keys, scratch.sort_tmp);
  }
  TESSERA_ASSERT(!keys.empty(), "the most likely token is always a candidate");
  auto prob_at = [&](size_t j) { return e[key_id(keys[j])]; };

  size_t n_keep = keys.size();
  if (params.top_p < 1.0f) {
    const double mass = static_cast<double>(params.top_p) * total;
    double cum = 0.0;
    for (size_t j = 0; j < keys.size(); ++j) {
      cum += prob_at(j);
      if (cum >= mass) {
        n_keep = j + 1;
        break;
      }
    }
  }
  // Probabilities are non-increasing along the candidates, so min-p and the
  // zero-probability tail are cut from the end; the first one always stays.
  const float min_e = params.min_p * prob_at(0);
  while (n_keep > 1 && (prob_at(n_keep - 1) < min_e || prob_at(n_keep - 1) == 0.0f))
    --n_keep;

  kept = 0.0;
  for (size_t j = 0; j < n_keep; ++j)
    kept += prob_at(j);
  return n_keep;
}

} // namespace

caf::expected<sampled_token> sample(std::span<const float> logits, const sampling_params& params,
                                    uint64_t seed, uint64_t step, std::span<const int32_t> prompt,
                                    std::span<const int32_t> output, sampler_scratch& scratch) {
  const size_t vocab = logits.size();
  const float* raw = logits.data();
  sampled_token result;
  double log_norm = 0.0;
  max_scan raw_scan;
  if (auto err = raw_pass(logits, params, scratch, result, log_norm, raw_scan)) [[unlikely]]
    return err;
  auto raw_logprob = [&](size_t id) {
    return params.logprobs ? static_cast<float>(static_cast<double>(raw[id]) - log_norm) : 0.0f;
  };

  // 2. Penalties, on a copy.
  const bool penalise = penalised_copy(logits, params, prompt, output, scratch);

  // 3. Greedy.
  if (is_greedy(params)) {
    const float* x = penalise ? scratch.logits.data() : raw;
    const float max = penalise ? scan_max(x, vocab).max : raw_scan.max;
    const size_t best = first_index_of(x, vocab, max);
    result.token = static_cast<int32_t>(best);
    result.logprob = raw_logprob(best);
    return result;
  }

  // 4. Temperature, top-k, softmax, top-p, min-p, draw.
  double kept = 0.0;
  const size_t n_keep = kept_candidates(params, scratch, kept);
  const auto& keys = scratch.sort_keys;
  const auto& e = scratch.probs;
  const double target = sampler_uniform(seed, step) * kept;
  size_t pick = n_keep - 1; // only reached through rounding
  double cum = 0.0;
  for (size_t j = 0; j < n_keep; ++j) {
    cum += e[key_id(keys[j])];
    if (cum > target) {
      pick = j;
      break;
    }
  }
  const int32_t token = key_id(keys[pick]);
  result.token = token;
  result.logprob = raw_logprob(static_cast<size_t>(token));
  return result;
}

bool sampling_is_greedy(const sampling_params& params) {
  return is_greedy(params);
}

caf::error sampling_distribution(std::span<const float> logits, const sampling_params& params,
                                 std::span<const int32_t> prompt, std::span<const int32_t> output,
                                 sampler_scratch& scratch, std::vector<float>& probs) {
  const size_t vocab = logits.size();
  sampling_params no_logprobs = params;
  no_logprobs.logprobs.reset();
  sampled_token unused;
  double log_norm = 0.0;
  max_scan raw_scan;
  if (auto err = raw_pass(logits, no_logprobs, scratch, unused, log_norm, raw_scan)) [[unlikely]]
    return err;
  const bool penalise = penalised_copy(logits, params, prompt, output, scratch);
  probs.assign(vocab, 0.0f);
  if (is_greedy(params)) {
    const float* x = penalise ? scratch.logits.data() : logits.data();
    const float max = penalise ? scan_max(x, vocab).max : raw_scan.max;
    probs[first_index_of(x, vocab, max)] = 1.0f;
    return {};
  }
  double kept = 0.0;
  const size_t n_keep = kept_candidates(params, scratch, kept);
  for (size_t j = 0; j < n_keep; ++j) {
    const int32_t id = key_id(scratch.sort_keys[j]);
    probs[static_cast<size_t>(id)] = static_cast<float>(scratch.probs[static_cast<size_t>(id)] / kept);
  }
  return {};
}

caf::expected<sampled_token> token_logprobs(std::span<const float> logits,
                                            const sampling_params& params, int32_t token,
                                            sampler_scratch& scratch) {
  TESSERA_ASSERT(token >= 0 && static_cast<size_t>(token) < logits.size(), "the token is in the row");
  sampled_token result;
  double log_norm = 0.0;
  max_scan scan;
  if (auto err = raw_pass(logits, params, scratch, result, log_norm, scan)) [[unlikely]]
    return err;
  result.token = token;
  result.logprob = params.logprobs
                     ? static_cast<float>(static_cast<double>(logits[static_cast<size_t>(token)]) - log_norm)
                     : 0.0f;
  return result;
}

} // namespace tessera::engine
