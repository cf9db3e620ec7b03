#include "engine/scheduler.hpp"

#include <algorithm>
#include <limits>

#include "common/assert.hpp"

namespace tessera::engine {

namespace {

// Runs first: higher priority, then earlier arrival.
bool runs_before(const sequence* a, const sequence* b) {
  if (a->priority != b->priority)
    return a->priority > b->priority;
  return a->arrival < b->arrival;
}

} // namespace

scheduler::scheduler(const scheduler_config& cfg, kv_cache& cache, const kv_hash_key& hash_key)
  : cfg_(cfg), cache_(cache), hash_key_(hash_key) {
  TESSERA_ASSERT(cfg.max_batched_tokens > 0 && cfg.max_num_seqs > 0);
}

int32_t scheduler::blocks_for(int32_t tokens) const {
  return (tokens + cache_.block_tokens() - 1) / cache_.block_tokens();
}

void scheduler::insert_waiting(sequence* seq) {
  seq->state = sequence_state::waiting;
  auto pos = std::upper_bound(waiting_.begin(), waiting_.end(), seq, runs_before);
  waiting_.insert(pos, seq);
}

void scheduler::add(sequence* seq) {
  TESSERA_ASSERT(seq->num_uncomputed() > 0, "a sequence needs a token to compute");
  insert_waiting(seq);
}

void scheduler::remove(sequence* seq) {
  std::erase(waiting_, seq);
  std::erase(running_, seq);
  cache_.free_blocks(seq->blocks);
  seq->blocks.clear();
  seq->state = sequence_state::finished;
}

void scheduler::hold(sequence* seq) {
  std::erase(waiting_, seq);
  std::erase(running_, seq);
  seq->state = sequence_state::finished;
}

int32_t scheduler::chunk(const sequence& seq, int32_t budget) const {
  int32_t cap = cfg_.max_prefill_chunk > 0 ? cfg_.max_prefill_chunk
                                           : std::numeric_limits<int32_t>::max();
  return std::min({seq.num_uncomputed(), budget, cap});
}

bool scheduler::reserve(sequence& seq, int32_t num_tokens, schedule_output& out) {
  const int32_t bt = cache_.block_tokens();
  const int32_t end = seq.num_computed + num_tokens;
  const int32_t have = static_cast<int32_t>(seq.blocks.size());
  const int32_t fresh = std::max(0, blocks_for(end) - have);
  // Existing blocks this step writes into that others share must be copied.
  const int32_t first_written = seq.num_computed / bt;
  const int32_t last_existing = std::min(have, blocks_for(end));
  int32_t shared = 0;
  for (int32_t i = first_written; i < last_existing; ++i)
    shared += cache_.ref_count(seq.blocks[i]) > 1 ? 1 : 0;
  if (cache_.num_free_blocks() < fresh + shared)
    return false;
  for (int32_t i = first_written; i < last_existing; ++i) {
    auto w = cache_.make_writable(seq.blocks[i]);
    TESSERA_ASSERT(w.has_value());
    if (w->needs_copy)
      out.copies.push_back({seq.blocks[i], w->id});
    seq.blocks[i] = w->id;
  }
  bool ok = cache_.allocate(fresh, seq.blocks);
  TESSERA_ASSERT(ok);
  return true;
}

void scheduler::drop_drafts(sequence& seq, int32_t n) {
  n = std::min(n, seq.num_draft);
  seq.tokens.resize(seq.tokens.size() - static_cast<size_t>(n));
  seq.num_draft -= n;
}

void scheduler::release_blocks(sequence& seq) {
  cache_.free_blocks(seq.blocks);
  seq.blocks.clear();
  seq.num_computed = 0;
  seq.num_cached_blocks = 0;
}

void scheduler::preempt(sequence& seq, schedule_output& out) {
  std::erase(running_, &seq);
  auto it = std::find_if(out.seqs.begin(), out.seqs.end(),
                         [&](const scheduled_seq& s) { return s.seq == &seq; });
  if (it != out.seqs.end()) {
    out.total_tokens -= it->num_tokens;
    out.seqs.erase(it);
  }
  std::erase_if(out.copies, [&](const block_copy& c) {
    return std::find(seq.blocks.begin(), seq.blocks.end(), c.dst) != seq.blocks.end();
  });
  drop_drafts(seq, seq.num_draft);
  release_blocks(seq);
  ++seq.num_preemptions;
  insert_waiting(&seq);
  out.preempted.push_back(&seq);
}

bool scheduler::release_waiting_holder(const sequence* keep, schedule_output& out) {
  for (auto it = waiting_.rbegin(); it != waiting_.rend(); ++it) {
    sequence* w = *it;
    if (w == keep || w->blocks.empty())
      continue;
    release_blocks(*w);
    ++w->num_preemptions;
    out.preempted.push_back(w);
    return true;
  }
  return false;
}

void scheduler::match_prefix(sequence& seq) {
  TESSERA_ASSERT(seq.blocks.empty() && seq.num_computed == 0);
  const int32_t bt = cache_.block_tokens();
  // At least the last token is always computed: its logits are needed.
  const size_t usable = static_cast<size_t>(seq.length() - 1) / bt;
  if (cache_.prefix_caching())
    kv_hash_blocks(hash_key_, seq.hash_root, seq.tokens, bt, usable, seq.hashes);
  size_t hits = cache_.match_prefix(
    std::span{seq.hashes}.first(std::min(usable, seq.hashes.size())), seq.blocks);
  seq.num_computed = static_cast<int32_t>(hits) * bt;
  seq.num_cached_blocks = static_cast<int32_t>(hits);
  cache_.record_prefix_query(static_cast<uint64_t>(seq.length()), hits * bt);
}

schedule_output scheduler::schedule() {
  schedule_output out;
  auto budget = [&] { return cfg_.max_batched_tokens - out.total_tokens; };
  admit_waiting(out, true);
  // Those just admitted are scheduled already; they lead running_ once
  // sorted (above every other running sequence).
  const size_t admitted_first = out.seqs.size();
  auto admitted_now = [&](const sequence* s) {
    return std::any_of(out.seqs.begin(), out.seqs.begin() + static_cast<std::ptrdiff_t>(admitted_first),
                       [&](const scheduled_seq& x) { return x.seq == s; });
  };
  std::stable_sort(running_.begin(), running_.end(), runs_before);

  for (size_t i = 0; i < running_.size() && budget() > 0;) {
    sequence* s = running_[i];
    if (admitted_now(s)) {
      ++i;
      continue;
    }
    int32_t n = chunk(*s, budget());
    // The drafts past the budget go: a step computes the real token and
    // every draft it keeps (drafts never span two steps).
    if (s->num_draft > 0 && n < s->num_uncomputed())
      drop_drafts(*s, s->num_uncomputed() - n);
    bool lost_self = false;
    while (!reserve(*s, n, out)) {
      // Drafts give way before anything is preempted for them.
      if (s->num_draft > 0) {
        drop_drafts(*s, s->num_draft);
        n = chunk(*s, budget());
        continue;
      }
      // Blocks held by waiting sequences go first: they are not running.
      if (release_waiting_holder(nullptr, out))
        continue;
      // running_ is sorted, so the back is the lowest-priority, newest one,
      // and (at index >= i) not yet scheduled in this step.
      sequence* victim = running_.back();
      lost_self = victim == s;
      preempt(*victim, out);
      if (lost_self)
        break;
    }
    if (lost_self)
      break;
    out.seqs.push_back({s, n});
    out.total_tokens += n;
    ++i;
  }
  // Running sequences the budget left out this step lose their drafts.
  for (sequence* s : running_)
    if (s->num_draft > 0 && std::none_of(out.seqs.begin(), out.seqs.end(),
                                         [&](const scheduled_seq& x) { return x.seq == s; }))
      drop_drafts(*s, s->num_draft);
  if (out.preempted.empty())
    admit_waiting(out, false);
  return out;
}

void scheduler::admit_waiting(schedule_output& out, bool above_running) {
  auto budget = [&] { return cfg_.max_batched_tokens - out.total_tokens; };
  while (!waiting_.empty() && budget() > 0) {
    sequence* s = waiting_.front();
    if (above_running && std::any_of(running_.begin(), running_.end(),
                                     [&](const sequence* r) { return r->priority >= s->priority; }))
      break;
    // The running sequence that would give way to s, if any.
    auto lowest = std::max_element(running_.begin(), running_.end(), runs_before);
    bool can_bump = lowest != running_.end() && (*lowest)->priority < s->priority;
    if (static_cast<int32_t>(running_.size()) >= cfg_.max_num_seqs) {
      if (!can_bump)
        break;
      preempt(**lowest, out);
      continue;
    }
    if (s->blocks.empty() && s->num_computed == 0)
      match_prefix(*s);
    int32_t n = chunk(*s, budget());
    if (!reserve(*s, n, out)) {
      if (release_waiting_holder(s, out))
        continue;
      if (can_bump) {
        preempt(**lowest, out);
        continue;
      }
      release_blocks(*s); // give the prefix hits back; they stay cached
      break;
    }
    waiting_.erase(waiting_.begin());
    s->state = sequence_state::running;
    running_.push_back(s);
    out.seqs.push_back({s, n});
    out.total_tokens += n;
  }
}

void scheduler::cache_full_blocks(sequence& seq) {
  const int32_t bt = cache_.block_tokens();
  const int32_t full = std::min(seq.num_computed / bt, static_cast<int32_t>(seq.blocks.size()));
  if (full <= seq.num_cached_blocks)
    return;
  if (cache_.prefix_caching()) {
    kv_hash_blocks(hash_key_, seq.hash_root, seq.tokens, bt, full, seq.hashes);
    for (int32_t i = seq.num_cached_blocks; i < full; ++i)
      cache_.cache_block(seq.blocks[i], seq.hashes[i]);
  }
  seq.num_cached_blocks = full;
}

void scheduler::commit(const schedule_output& out) {
  for (const auto& s : out.seqs) {
    if (s.seq->num_draft > 0)
      continue; // finish_speculation
    s.seq->num_computed += s.num_tokens;
    cache_full_blocks(*s.seq);
  }
}

void scheduler::finish_speculation(sequence& seq, int32_t num_valid) {
  TESSERA_ASSERT(num_valid >= 0 && seq.num_computed + num_valid <= seq.length(),
                 "accepted tokens within the sequence");
  seq.num_draft = 0;
  seq.num_computed += num_valid;
  // Blocks that held only rejected drafts go back; the last kept block's
  // rejected positions are past num_computed and get overwritten.
  const auto keep = static_cast<size_t>(blocks_for(seq.num_computed));
  if (seq.blocks.size() > keep) {
    cache_.free_blocks(std::span{seq.blocks}.subspan(keep));
    seq.blocks.resize(keep);
  }
  const auto whole = static_cast<size_t>(seq.length() / cache_.block_tokens());
  if (seq.hashes.size() > whole)
    seq.hashes.resize(whole);
  cache_full_blocks(seq);
}

} // namespace tessera::engine
