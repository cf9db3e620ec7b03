#include "bench/trace_cache_optimum.hpp"

#include <algorithm>
#include <unordered_set>

namespace tessera::bench {

namespace {

// A 64-bit name for the prefix ending in `id` after the prefix `parent`
// (splitmix64's finalizer over both): prefixes, not single ids, are what a
// cache can serve, so an id that reappears after another prefix is no hit.
uint64_t prefix_key(uint64_t parent, int64_t id) {
  uint64_t z = parent ^ (static_cast<uint64_t>(id) + 0x9e3779b97f4a7c15ULL + (parent << 6) + (parent >> 2));
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

} // namespace

std::vector<int64_t> optimal_prefix_hits(const std::vector<trace_request>& requests, int64_t block_tokens) {
  std::vector<int64_t> hits;
  hits.reserve(requests.size());
  std::unordered_set<uint64_t> seen; // every prefix of every earlier request
  for (const auto& r : requests) {
    uint64_t key = 0;
    size_t k = 0;
    bool hit = true;
    for (int64_t id : r.hash_ids) {
      key = prefix_key(key, id);
      if (hit && seen.contains(key))
        ++k;
      else
        hit = false;
      seen.insert(key);
    }
    hits.push_back(std::min(static_cast<int64_t>(k) * block_tokens, r.input_length));
  }
  return hits;
}

prefix_reuse optimal_prefix_reuse(const std::vector<trace_request>& requests, int64_t block_tokens) {
  prefix_reuse out;
  const auto hits = optimal_prefix_hits(requests, block_tokens);
  for (size_t i = 0; i < requests.size(); ++i) {
    out.input_tokens += requests[i].input_length;
    out.hit_tokens += hits[i];
  }
  return out;
}

} // namespace tessera::bench
