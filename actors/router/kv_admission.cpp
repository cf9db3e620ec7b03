#include "actors/router/kv_admission.hpp"

#include <algorithm>

namespace tessera::actors {

void kv_commitments::heard(uint64_t worker, int64_t used_blocks, clock::time_point at) {
  auto& w = workers_[worker];
  w.used = std::max<int64_t>(0, used_blocks);
  w.heard_at = at;
}

void kv_commitments::routed(uint64_t request, uint64_t worker, std::span<const engine::kv_block_hash> blocks,
                            int64_t need, int64_t growth) {
  requests_[request] = entry{worker, {blocks.begin(), blocks.end()}, std::max<int64_t>(0, need),
                             std::max<int64_t>(0, growth), false, {}};
}

int64_t kv_commitments::shared_blocks(uint64_t worker, std::span<const engine::kv_block_hash> blocks) const {
  size_t best = 0;
  for (const auto& [id, e] : requests_) {
    if (e.worker != worker || e.blocks.size() <= best || blocks.size() <= best)
      continue;
    // Chained hashes: equal at block i means equal up to i, so the first
    // block that differs ends the shared prefix.
    const size_t n = std::min(e.blocks.size(), blocks.size());
    if (e.blocks[best] != blocks[best])
      continue; // shares at most `best`: cannot beat it
    auto mismatch = std::mismatch(e.blocks.begin() + static_cast<std::ptrdiff_t>(best),
                                  e.blocks.begin() + static_cast<std::ptrdiff_t>(n),
                                  blocks.begin() + static_cast<std::ptrdiff_t>(best));
    best = static_cast<size_t>(mismatch.first - e.blocks.begin());
  }
  return static_cast<int64_t>(best);
}

void kv_commitments::prefilled(uint64_t request, clock::time_point at) {
  if (auto it = requests_.find(request); it != requests_.end() && !it->second.prefilled) {
    it->second.prefilled = true;
    it->second.prefilled_at = at;
  }
}

void kv_commitments::finished(uint64_t request) {
  requests_.erase(request);
}

void kv_commitments::forget_worker(uint64_t worker) {
  workers_.erase(worker);
}

bool kv_commitments::pending(const entry& e) const {
  if (!e.prefilled)
    return true;
  auto w = workers_.find(e.worker);
  // A heartbeat sent before the prompt landed may arrive just after its
  // first token: only one heard later than that counts it.
  return w == workers_.end() || w->second.heard_at <= e.prefilled_at;
}

int64_t kv_commitments::room(uint64_t worker, int64_t num_blocks) const {
  int64_t committed = 0;
  if (auto w = workers_.find(worker); w != workers_.end())
    committed = w->second.used;
  for (const auto& [id, e] : requests_)
    if (e.worker == worker)
      committed += e.growth + (pending(e) ? e.need : 0);
  return num_blocks - committed;
}

int64_t kv_commitments::active(uint64_t worker) const {
  return std::count_if(requests_.begin(), requests_.end(),
                       [&](const auto& r) { return r.second.worker == worker; });
}

bool kv_commitments::fits(uint64_t worker, int64_t num_blocks, int64_t need, int64_t growth) const {
  return active(worker) == 0 || room(worker, num_blocks) >= need + growth;
}

} // namespace tessera::actors
