#include "engine/speculative.hpp"

#include <algorithm>
#include <string>

#include "common/assert.hpp"
#include "engine/engine_errc.hpp"

namespace tessera::engine {

int32_t ngram_propose(std::span<const int32_t> tokens, int32_t k, std::vector<int32_t>& out,
                      int32_t max_n, int32_t min_n) {
  const auto len = static_cast<int64_t>(tokens.size());
  if (k <= 0 || min_n < 1)
    return 0;
  for (int64_t n = std::min<int64_t>(max_n, len - 1); n >= min_n; --n) {
    const auto suffix = tokens.subspan(static_cast<size_t>(len - n));
    // Most recent occurrence first; the suffix itself (start len - n) is
    // not a match, so a match has at least one token after it.
    for (int64_t start = len - n - 1; start >= 0; --start) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + start))
        continue;
      const int64_t from = start + n;
      const int64_t take = std::min<int64_t>(k, len - from);
      out.insert(out.end(), tokens.begin() + from, tokens.begin() + from + take);
      return static_cast<int32_t>(take);
    }
  }
  return 0;
}

rejection_result rejection_sample(std::span<const float> p, std::span<const float> q,
                                  int32_t draft, double u_accept, double u_resample) {
  TESSERA_ASSERT(!p.empty() && p.size() == q.size(), "p and q cover the same vocabulary");
  TESSERA_ASSERT(draft >= 0 && static_cast<size_t>(draft) < p.size(), "the draft is in the vocabulary");
  const double pd = p[static_cast<size_t>(draft)];
  const double qd = q[static_cast<size_t>(draft)];
  TESSERA_ASSERT(qd > 0, "the draft had probability under q");
  if (u_accept < std::min(1.0, pd / qd))
    return {true, draft};
  double mass = 0;
  for (size_t i = 0; i < p.size(); ++i)
    mass += std::max(0.0, static_cast<double>(p[i]) - q[i]);
  const bool residual = mass > 0;
  if (!residual)
    for (float v : p)
      mass += v;
  const double target = u_resample * mass;
  double acc = 0;
  int32_t last = -1;
  for (size_t i = 0; i < p.size(); ++i) {
    const double w = residual ? std::max(0.0, static_cast<double>(p[i]) - q[i]) : p[i];
    if (w <= 0)
      continue;
    last = static_cast<int32_t>(i);
    acc += w;
    if (target < acc)
      return {false, last};
  }
  // Rounding left target at the very top: the last token with mass.
  TESSERA_ASSERT(last >= 0, "p has mass");
  return {false, last};
}

} // namespace tessera::engine
