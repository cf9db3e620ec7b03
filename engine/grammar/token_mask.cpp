#include "engine/grammar/token_mask.hpp"

#include <algorithm>
#include <bit>
#include <numeric>

namespace tessera::engine::grammar {

token_trie::token_trie(const grammar_vocabulary& vocab) {
  vocab_size_ = static_cast<int32_t>(vocab.token_bytes.size());
  eos_ids_ = vocab.eos_ids;
  bytes_.resize(vocab.token_bytes.size());
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < vocab_size_; ++id) {
    bool special = static_cast<size_t>(id) < vocab.special.size() && vocab.special[id];
    if (special || is_eos(id) || vocab.token_bytes[id].empty())
      continue;
    bytes_[id] = vocab.token_bytes[id];
    ids.push_back(id);
  }
  std::stable_sort(ids.begin(), ids.end(),
                   [&](int32_t a, int32_t b) { return bytes_[a] < bytes_[b]; });
  nodes_.push_back({});
  std::vector<uint32_t> path{0}; // path[d] = node at depth d
  const std::string* prev = nullptr;
  for (int32_t id : ids) {
    const std::string& s = bytes_[id];
    size_t common = 0;
    if (prev != nullptr)
      while (common < s.size() && common < prev->size() && s[common] == (*prev)[common] &&
             common + 1 < path.size())
        ++common;
    while (path.size() > common + 1) {
      nodes_[path.back()].subtree_end = static_cast<uint32_t>(nodes_.size());
      path.pop_back();
    }
    for (size_t d = common; d < s.size(); ++d) {
      node n;
      n.byte = static_cast<uint8_t>(s[d]);
      n.depth = static_cast<uint16_t>(std::min<size_t>(d + 1, 0xFFFF));
      n.tokens_begin = n.tokens_end = static_cast<uint32_t>(token_ids_.size());
      nodes_.push_back(n);
      path.push_back(static_cast<uint32_t>(nodes_.size() - 1));
    }
    token_ids_.push_back(id);
    nodes_[path.back()].tokens_end = static_cast<uint32_t>(token_ids_.size());
    max_depth_ = std::max(max_depth_, s.size());
    prev = &s;
  }
  while (!path.empty()) {
    nodes_[path.back()].subtree_end = static_cast<uint32_t>(nodes_.size());
    path.pop_back();
  }
}

bool token_trie::is_eos(int32_t id) const {
  return std::find(eos_ids_.begin(), eos_ids_.end(), id) != eos_ids_.end();
}

size_t token_mask::count() const {
  size_t n = 0;
  for (uint64_t w : bits)
    n += static_cast<size_t>(std::popcount(w));
  return n;
}

token_masker::token_masker(const token_trie& trie, size_t cache_entries)
    : trie_(trie), cache_entries_(cache_entries) {}

bool token_masker::accept_token(grammar_matcher& m, int32_t id) const {
  if (trie_.is_eos(id))
    return m.can_end();
  if (id < 0 || id >= trie_.vocab_size() || trie_.bytes_of(id).empty())
    return false;
  return m.accept_bytes(trie_.bytes_of(id));
}

void token_masker::fill(const grammar_matcher& m, mask_mode mode, token_mask& out,
                        uint32_t budget) {
  if (mode == mask_mode::free && cache_entries_ > 0) {
    std::string key = m.serialize();
    if (auto it = cache_.find(key); it != cache_.end()) {
      ++hits_;
      lru_.splice(lru_.begin(), lru_, it->second.second);
      out = it->second.first;
      return;
    }
    ++misses_;
    fill_from_node_cache(m, out);
    if (cache_.size() >= cache_entries_) {
      cache_.erase(lru_.back());
      lru_.pop_back();
    }
    lru_.push_front(key);
    cache_.emplace(std::move(key), std::make_pair(out, lru_.begin()));
    return;
  }
  walk(m, mode, out, budget);
}

void token_masker::start_mask(const grammar_matcher& m, token_mask& out) const {
  size_t words = (static_cast<size_t>(trie_.vocab_size()) + 63) / 64;
  out.bits.assign(words, 0);
  out.eos_allowed = false;
  if (m.can_end()) {
    out.eos_allowed = !trie_.eos_ids().empty();
    for (int32_t id : trie_.eos_ids())
      if (id >= 0 && id < trie_.vocab_size())
        out.bits[static_cast<size_t>(id) / 64] |= uint64_t{1} << (id % 64);
  }
}

void token_masker::walk(const grammar_matcher& m, mask_mode mode, token_mask& out,
                        uint32_t budget) {
  start_mask(m, out);
  if (m.can_end() && mode == mask_mode::closing)
    return;
  arena_ = m.frames();
  stack_ops ops(m.grammar_ref(), arena_, m.max_depth());
  levels_.resize(trie_.max_depth() + 1);
  marks_.resize(trie_.max_depth() + 1);
  levels_[0] = m.tops();
  marks_[0] = arena_.size();
  candidates_.clear();
  walk_range(ops, 0, mode, out, nullptr);
  if (mode == mask_mode::bounded) {
    bool any = false;
    for (auto& [id, dist] : candidates_)
      if (dist <= budget) {
        out.bits[static_cast<size_t>(id) / 64] |= uint64_t{1} << (id % 64);
        any = true;
      }
    if (any || m.can_end())
      return;
    mode = mask_mode::closing; // nothing fits: get as close as possible
  }
  if (mode == mask_mode::closing && !candidates_.empty()) {
    uint32_t start_distance = ops.distance(m.tops());
    uint32_t best = no_node;
    for (auto& [id, dist] : candidates_)
      best = std::min(best, dist);
    uint32_t limit = best < start_distance ? start_distance : best + 1;
    for (auto& [id, dist] : candidates_)
      if (dist < limit)
        out.bits[static_cast<size_t>(id) / 64] |= uint64_t{1} << (id % 64);
  }
}

// Walks the subtree below trie node `root` from the stacks in
// levels_[depth(root)] (arena marked at marks_[depth(root)]). With
// `boundaries`, records the trie nodes after which the bottom frame's rule
// ended (ended = true there) and tokens go on past it.
void token_masker::walk_range(stack_ops& ops, uint32_t root, mask_mode mode, token_mask& out,
                              std::vector<uint32_t>* boundaries) {
  const auto& nodes = trie_.nodes();
  const auto& ids = trie_.token_ids();
  auto set_bit = [&](int32_t id) {
    out.bits[static_cast<size_t>(id) / 64] |= uint64_t{1} << (id % 64);
  };
  size_t k = root + 1;
  size_t end = nodes[root].subtree_end;
  while (k < end) {
    const token_trie::node& tn = nodes[k];
    size_t d = tn.depth;
    arena_.resize(marks_[d - 1]);
    stack_tops& st = levels_[d];
    ops.step(levels_[d - 1], tn.byte, st);
    if (st.tops.empty() && !st.ended) {
      k = tn.subtree_end;
      continue;
    }
    if (tn.tokens_begin != tn.tokens_end) {
      if (mode == mask_mode::free) {
        for (uint32_t t = tn.tokens_begin; t < tn.tokens_end; ++t)
          set_bit(ids[t]);
      } else {
        uint32_t dist = ops.distance(st);
        for (uint32_t t = tn.tokens_begin; t < tn.tokens_end; ++t)
          candidates_.emplace_back(ids[t], dist);
      }
    }
    if (boundaries != nullptr && st.ended && tn.subtree_end > k + 1)
      boundaries->push_back(static_cast<uint32_t>(k));
    if (st.tops.empty()) {
      k = tn.subtree_end;
      continue;
    }
    marks_[d] = arena_.size();
    ++k;
  }
}

// A free mask from per-node entries: for each stack, the tokens its top
// node allows within its own rule (computed once per node and depth: they
// do not depend on the frames below), plus, where that rule may end inside
// a token, the rest of those tokens walked from the real frames below.
void token_masker::fill_from_node_cache(const grammar_matcher& m, token_mask& out) {
  start_mask(m, out);
  levels_.resize(trie_.max_depth() + 1);
  marks_.resize(trie_.max_depth() + 1);
  const auto& frames = m.frames();
  for (uint32_t t : m.tops().tops) {
    const stack_frame& top = frames[t];
    const node_entry& entry = node_entry_for(m, top.node, top.depth);
    for (size_t w = 0; w < out.bits.size(); ++w)
      out.bits[w] |= entry.allowed[w];
    if (top.parent == no_node || entry.boundaries.empty())
      continue;
    arena_ = frames;
    stack_ops ops(m.grammar_ref(), arena_, m.max_depth());
    stack_tops popped;
    ops.close(top.parent, popped);
    if (popped.tops.empty())
      continue;
    size_t base = arena_.size();
    for (uint32_t k : entry.boundaries) {
      size_t d = trie_.nodes()[k].depth;
      arena_.resize(base);
      levels_[d] = popped;
      marks_[d] = base;
      walk_range(ops, k, mask_mode::free, out, nullptr);
    }
  }
}

const token_masker::node_entry& token_masker::node_entry_for(const grammar_matcher& m,
                                                             uint32_t node, uint32_t depth) {
  node_key key{m.grammar_ref().fingerprint(), (uint64_t{depth} << 32) | node};
  if (auto it = node_cache_.find(key); it != node_cache_.end())
    return it->second;
  if (node_cache_.size() >= std::max<size_t>(cache_entries_, 16))
    node_cache_.clear();
  node_entry entry;
  token_mask scratch;
  scratch.bits.assign((static_cast<size_t>(trie_.vocab_size()) + 63) / 64, 0);
  arena_.clear();
  arena_.push_back({node, no_node, depth});
  stack_ops ops(m.grammar_ref(), arena_, m.max_depth());
  levels_[0].tops.assign(1, 0);
  levels_[0].ended = false;
  marks_[0] = arena_.size();
  walk_range(ops, 0, mask_mode::free, scratch, &entry.boundaries);
  entry.allowed = std::move(scratch.bits);
  return node_cache_.emplace(key, std::move(entry)).first->second;
}

} // namespace tessera::engine::grammar
