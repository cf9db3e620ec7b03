#include "chaos/load_plan.hpp"

#include <algorithm>
#include <random>

#include <nlohmann/json.hpp>

namespace tessera::chaos {

std::vector<planned_request> plan_load(const scenario& s, int32_t vocab) {
  // One generator for the schedule, one per request for its content, so
  // that a longer run keeps the first requests of a shorter one.
  std::mt19937_64 schedule{s.seed};
  std::exponential_distribution<double> gap{s.load.rate};
  std::vector<planned_request> out;
  const int32_t first_id = 8;
  const int32_t ids = std::max(vocab - first_id, 1);
  // The shared prefixes, from a generator of their own (the requests'
  // content stays what it was without them).
  std::vector<std::vector<int32_t>> prefixes(static_cast<size_t>(std::max(0, s.load.shared_prefixes)));
  std::mt19937_64 prefix_rng{s.seed ^ 0x5bd1e995u};
  for (auto& p : prefixes)
    for (int32_t i = 0; i < s.load.prefix_tokens; ++i)
      p.push_back(first_id + std::uniform_int_distribution<int32_t>{0, ids - 1}(prefix_rng));
  for (double t = gap(schedule); t < s.duration_s; t += gap(schedule)) {
    planned_request r;
    r.index = out.size();
    r.send_s = t;
    std::mt19937_64 rng{s.seed * 0x9e3779b97f4a7c15ull + r.index + 1};
    std::uniform_int_distribution<int32_t> len{s.load.prompt_tokens_min, s.load.prompt_tokens_max};
    std::uniform_int_distribution<int32_t> id{0, ids - 1};
    const int32_t n = len(rng);
    if (!prefixes.empty()) // its own generator: the rest of the request as without prefixes
      r.prompt = prefixes[std::mt19937_64{s.seed + r.index * 0x2545f4914f6cdd1dull}() % prefixes.size()];
    r.prompt.reserve(r.prompt.size() + static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i)
      r.prompt.push_back(first_id + id(rng));
    r.max_tokens = s.load.max_tokens;
    if (std::uniform_real_distribution<double>{0, 1}(rng) < s.load.seeded_fraction) {
      r.temperature = static_cast<float>(s.load.temperature);
      r.seed = rng() >> 12; // JSON numbers stay exact below 2^53
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::string completion_body(const planned_request& r, const std::string& model) {
  nlohmann::json j = {{"model", model},         {"prompt", r.prompt},   {"max_tokens", r.max_tokens},
                      {"temperature", r.temperature}, {"ignore_eos", true}, {"stream", true}};
  if (r.seed)
    j["seed"] = *r.seed;
  return j.dump();
}

} // namespace tessera::chaos
