#include "actors/router/prefix_index.hpp"

#include <algorithm>
#include <bit>

#include "common/assert.hpp"

namespace tessera::actors {

namespace wire = transport::wire;

namespace {

// The fastest tier among the bits of `tiers` (g1 is bit 0).
int fastest_tier(uint8_t tiers) {
  return std::countr_zero(static_cast<unsigned>(tiers));
}

} // namespace

const char* to_string(kv_event_status s) {
  switch (s) {
    case kv_event_status::applied: return "applied";
    case kv_event_status::applied_after_gap: return "applied_after_gap";
    case kv_event_status::stale: return "stale";
    case kv_event_status::rejected: return "rejected";
  }
  return "unknown";
}

prefix_index::prefix_index(prefix_index_options opts) : opts_(opts) {}

kv_event_result prefix_index::apply(uint64_t worker_id, const wire::kv_event& ev) {
  kv_event_result result;
  // In-process events skip the wire decoder's checks, so the ranges are
  // checked again here; a rejected event must not advance the sequence.
  const auto tier = static_cast<unsigned>(ev.tier);
  const auto kind = static_cast<unsigned>(ev.kind);
  if (ev.worker_id != worker_id || tier >= kv_tier_count
      || kind > static_cast<unsigned>(wire::kv_event_kind::cleared)) {
    ++stats_.rejected_events;
    result.status = kv_event_status::rejected;
    return result;
  }
  auto [it, inserted] = workers_.try_emplace(worker_id);
  worker_state& w = it->second;
  // While a resync is pending, the worker's "cleared" is its answer even if
  // its id is below what the gap made us expect (the gap's id may have
  // been bogus): the worker's sequence restarts there.
  const bool resync_answer = w.needs_resync && ev.kind == wire::kv_event_kind::cleared;
  if (!inserted && ev.event_id < w.next_event_id && !resync_answer) {
    ++stats_.stale_events;
    result.status = kv_event_status::stale;
    return result;
  }
  if (ev.event_id > w.next_event_id) {
    result.status = kv_event_status::applied_after_gap;
    result.missed = ev.event_id - w.next_event_id;
    ++stats_.gaps;
    stats_.missed_events += result.missed;
    // A cleared event replaces the worker's whole view, so what was lost
    // before it no longer matters.
    if (!w.needs_resync && ev.kind != wire::kv_event_kind::cleared) {
      w.needs_resync = true;
      result.resync_requested = true;
    }
  }
  w.next_event_id = ev.event_id == UINT64_MAX ? UINT64_MAX : ev.event_id + 1;
  ++stats_.events_applied;

  const auto bit = static_cast<uint8_t>(1u << tier);
  switch (ev.kind) {
    case wire::kv_event_kind::stored:
      if (ev.parent_hash && find(*ev.parent_hash, worker_id) == npos)
        ++stats_.unknown_parents;
      for (auto h : ev.block_hashes)
        store(w, worker_id, h, bit);
      break;
    case wire::kv_event_kind::removed:
      for (auto h : ev.block_hashes)
        remove(worker_id, h, bit);
      break;
    case wire::kv_event_kind::cleared:
      clear_worker(w);
      w.needs_resync = false;
      break;
  }
  return result;
}

void prefix_index::remove_worker(uint64_t worker_id) {
  auto it = workers_.find(worker_id);
  if (it == workers_.end())
    return;
  clear_worker(it->second);
  workers_.erase(it);
}

std::vector<worker_overlap>
prefix_index::overlap(std::span<const engine::kv_block_hash> chain) const {
  std::vector<worker_overlap> out;
  if (chain.empty())
    return out;
  auto first = heads_.find(chain[0]);
  if (first == heads_.end())
    return out;
  for (uint32_t i = first->second; i != npos; i = slab_[i].next_holder) {
    worker_overlap o;
    o.worker_id = slab_[i].worker;
    o.blocks = 1;
    o.tier_blocks[fastest_tier(slab_[i].tiers)] = 1;
    out.push_back(o);
  }
  std::sort(out.begin(), out.end(),
            [](const worker_overlap& a, const worker_overlap& b) { return a.worker_id < b.worker_id; });
  // A worker is still in the walk at block k while its count equals k: it
  // held every block before. Only the holders of each block are visited.
  for (size_t k = 1; k < chain.size(); ++k) {
    auto head = heads_.find(chain[k]);
    if (head == heads_.end())
      break;
    size_t extended = 0;
    for (uint32_t i = head->second; i != npos; i = slab_[i].next_holder) {
      auto o = std::lower_bound(out.begin(), out.end(), slab_[i].worker,
                                [](const worker_overlap& a, uint64_t id) { return a.worker_id < id; });
      if (o == out.end() || o->worker_id != slab_[i].worker
          || o->blocks != static_cast<int32_t>(k))
        continue;
      ++o->blocks;
      ++o->tier_blocks[fastest_tier(slab_[i].tiers)];
      ++extended;
    }
    if (extended == 0)
      break;
  }
  return out;
}

void prefix_index::touch(uint64_t worker_id, std::span<const engine::kv_block_hash> chain) {
  for (auto h : chain) {
    const uint32_t i = find(h, worker_id);
    if (i == npos)
      return;
    lru_unlink(i);
    lru_push_back(i);
  }
}

bool prefix_index::needs_resync(uint64_t worker_id) const {
  auto it = workers_.find(worker_id);
  return it != workers_.end() && it->second.needs_resync;
}

std::optional<uint64_t> prefix_index::next_event_id(uint64_t worker_id) const {
  auto it = workers_.find(worker_id);
  if (it == workers_.end())
    return std::nullopt;
  return it->second.next_event_id;
}

std::optional<wire::kv_tier> prefix_index::tier_of(engine::kv_block_hash hash,
                                                   uint64_t worker_id) const {
  const uint32_t i = find(hash, worker_id);
  if (i == npos)
    return std::nullopt;
  return static_cast<wire::kv_tier>(fastest_tier(slab_[i].tiers));
}

size_t prefix_index::worker_entries(uint64_t worker_id) const {
  auto it = workers_.find(worker_id);
  return it == workers_.end() ? 0 : it->second.entries;
}

uint32_t prefix_index::find(engine::kv_block_hash hash, uint64_t worker) const {
  auto it = heads_.find(hash);
  if (it == heads_.end())
    return npos;
  for (uint32_t i = it->second; i != npos; i = slab_[i].next_holder)
    if (slab_[i].worker == worker)
      return i;
  return npos;
}

void prefix_index::store(worker_state& w, uint64_t worker, engine::kv_block_hash hash,
                         uint8_t tier_bit) {
  if (const uint32_t i = find(hash, worker); i != npos) {
    slab_[i].tiers |= tier_bit;
    lru_unlink(i);
    lru_push_back(i);
    return;
  }
  if (opts_.max_entries != 0 && entries_ >= opts_.max_entries) {
    TESSERA_ASSERT(lru_head_ != npos, "a full index has an oldest entry");
    unlink(lru_head_);
    ++stats_.evicted_entries;
  }
  const uint32_t i = allocate();
  entry& e = slab_[i];
  e.hash = hash;
  e.worker = worker;
  e.tiers = tier_bit;
  auto [head, inserted] = heads_.try_emplace(hash, i);
  e.next_holder = inserted ? npos : head->second;
  head->second = i;
  lru_push_back(i);
  e.worker_prev = npos;
  e.worker_next = w.head;
  if (w.head != npos)
    slab_[w.head].worker_prev = i;
  w.head = i;
  ++w.entries;
  ++entries_;
}

void prefix_index::remove(uint64_t worker, engine::kv_block_hash hash, uint8_t tier_bit) {
  const uint32_t i = find(hash, worker);
  if (i == npos || (slab_[i].tiers & tier_bit) == 0) {
    ++stats_.unknown_removals;
    return;
  }
  if (slab_[i].tiers == tier_bit)
    unlink(i);
  else
    slab_[i].tiers &= static_cast<uint8_t>(~tier_bit);
}

void prefix_index::clear_worker(worker_state& w) {
  while (w.head != npos)
    unlink(w.head);
}

void prefix_index::unlink(uint32_t i) {
  entry& e = slab_[i];
  TESSERA_ASSERT(e.tiers != 0, "unlinking a free entry");

  auto head = heads_.find(e.hash);
  TESSERA_ASSERT(head != heads_.end(), "an entry's hash is in the table");
  if (head->second == i) {
    if (e.next_holder == npos)
      heads_.erase(head);
    else
      head->second = e.next_holder;
  } else {
    uint32_t prev = head->second;
    while (slab_[prev].next_holder != i) {
      prev = slab_[prev].next_holder;
      TESSERA_ASSERT(prev != npos, "an entry is in its hash's holder list");
    }
    slab_[prev].next_holder = e.next_holder;
  }

  lru_unlink(i);

  auto w = workers_.find(e.worker);
  TESSERA_ASSERT(w != workers_.end(), "an entry's worker is known");
  if (e.worker_prev != npos)
    slab_[e.worker_prev].worker_next = e.worker_next;
  else
    w->second.head = e.worker_next;
  if (e.worker_next != npos)
    slab_[e.worker_next].worker_prev = e.worker_prev;
  --w->second.entries;
  --entries_;

  e.tiers = 0;
  e.worker_prev = e.worker_next = npos;
  e.next_holder = free_;
  free_ = i;
}

void prefix_index::lru_push_back(uint32_t i) {
  slab_[i].lru_prev = lru_tail_;
  slab_[i].lru_next = npos;
  if (lru_tail_ != npos)
    slab_[lru_tail_].lru_next = i;
  else
    lru_head_ = i;
  lru_tail_ = i;
}

void prefix_index::lru_unlink(uint32_t i) {
  entry& e = slab_[i];
  if (e.lru_prev != npos)
    slab_[e.lru_prev].lru_next = e.lru_next;
  else
    lru_head_ = e.lru_next;
  if (e.lru_next != npos)
    slab_[e.lru_next].lru_prev = e.lru_prev;
  else
    lru_tail_ = e.lru_prev;
  e.lru_prev = e.lru_next = npos;
}

uint32_t prefix_index::allocate() {
  if (free_ != npos) {
    const uint32_t i = free_;
    free_ = slab_[i].next_holder;
    return i;
  }
  TESSERA_ASSERT(slab_.size() < npos, "prefix index entry slab is full (2^32 entries)");
  slab_.emplace_back();
  return static_cast<uint32_t>(slab_.size() - 1);
}

} // namespace tessera::actors
