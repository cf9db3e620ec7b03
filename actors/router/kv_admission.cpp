#include "actors/router/kv_admission.hpp"

#include <algorithm>

namespace tessera::actors {

void kv_commitments::heard(uint64_t worker, int64_t used_blocks, clock::time_point at) {
  auto& w = workers_[worker];
  w.used = std::max<int64_t>(0, used_blocks);
  w.heard_at = at;
  w.heard = true;
}

void kv_commitments::routed(uint64_t request, uint64_t worker, std::span<const engine::kv_block_hash> blocks,
                            int64_t need, int64_t growth) {
  finished(request); // a new attempt: the old entry (maybe on another worker) goes
  requests_[request] = entry{worker, {blocks.begin(), blocks.end()}, std::max<int64_t>(0, need),
                             std::max<int64_t>(0, growth), false, {}};
  workers_[worker].requests.insert(request);
}

const kv_commitments::worker_figures* kv_commitments::figures(uint64_t worker) const {
  auto w = workers_.find(worker);
  return w == workers_.end() ? nullptr : &w->second;
}

int64_t kv_commitments::shared_blocks(uint64_t worker, std::span<const engine::kv_block_hash> blocks) const {
  const auto* w = figures(worker);
  if (w == nullptr)
    return 0;
  size_t best = 0;
  for (uint64_t id : w->requests) {
    const auto& e = requests_.at(id);
    if (e.blocks.size() <= best || blocks.size() <= best)
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
  auto it = requests_.find(request);
  if (it == requests_.end())
    return;
  if (auto w = workers_.find(it->second.worker); w != workers_.end())
    w->second.requests.erase(request);
  requests_.erase(it);
}

void kv_commitments::forget_worker(uint64_t worker) {
  auto w = workers_.find(worker);
  if (w == workers_.end())
    return;
  for (uint64_t id : w->second.requests)
    requests_.erase(id);
  workers_.erase(w);
}

bool kv_commitments::pending(const entry& e, const worker_figures& w) const {
  // A heartbeat sent before the prompt landed may arrive just after its
  // first token: only one heard later than that counts it.
  return !e.prefilled || !w.heard || w.heard_at <= e.prefilled_at;
}

int64_t kv_commitments::room(uint64_t worker, int64_t num_blocks) const {
  const auto* w = figures(worker);
  if (w == nullptr)
    return num_blocks;
  int64_t committed = w->used;
  for (uint64_t id : w->requests) {
    const auto& e = requests_.at(id);
    committed += e.growth + (pending(e, *w) ? e.need : 0);
  }
  return num_blocks - committed;
}

int64_t kv_commitments::active(uint64_t worker) const {
  const auto* w = figures(worker);
  return w == nullptr ? 0 : static_cast<int64_t>(w->requests.size());
}

bool kv_commitments::fits(uint64_t worker, int64_t num_blocks, int64_t need, int64_t growth) const {
  return active(worker) == 0 || room(worker, num_blocks) >= need + growth;
}

} // namespace tessera::actors
