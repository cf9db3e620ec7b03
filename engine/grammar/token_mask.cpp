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

void token_masker::fill(const grammar_matcher& m, mask_mode mode, token_mask& out) {
  size_t words = (static_cast<size_t>(trie_.vocab_size()) + 63) / 64;
  if (mode == mask_mode::free && cache_entries_ > 0) {
    std::string key = m.serialize();
    if (auto it = cache_.find(key); it != cache_.end()) {
      ++hits_;
      lru_.splice(lru_.begin(), lru_, it->second.second);
      out = it->second.first;
      return;
    }
    ++misses_;
    walk(m, mode, out);
    if (cache_.size() >= cache_entries_) {
      cache_.erase(lru_.back());
      lru_.pop_back();
    }
    lru_.push_front(key);
    cache_.emplace(std::move(key), std::make_pair(out, lru_.begin()));
    return;
  }
  out.bits.assign(words, 0);
  walk(m, mode, out);
}

void token_masker::walk(const grammar_matcher& m, mask_mode mode, token_mask& out) {
  size_t words = (static_cast<size_t>(trie_.vocab_size()) + 63) / 64;
  out.bits.assign(words, 0);
  out.eos_allowed = false;
  auto set_bit = [&](int32_t id) {
    out.bits[static_cast<size_t>(id) / 64] |= uint64_t{1} << (id % 64);
  };
  if (m.can_end()) {
    out.eos_allowed = !trie_.eos_ids().empty();
    for (int32_t id : trie_.eos_ids())
      if (id >= 0 && id < trie_.vocab_size())
        set_bit(id);
    if (mode == mask_mode::closing)
      return;
  }
  arena_ = m.frames();
  stack_ops ops(m.grammar_ref(), arena_, m.max_depth());
  levels_.resize(trie_.max_depth() + 1);
  marks_.resize(trie_.max_depth() + 1);
  levels_[0] = m.tops();
  marks_[0] = arena_.size();
  uint32_t start_distance = mode == mask_mode::closing ? ops.distance(levels_[0]) : 0;
  candidates_.clear();

  const auto& nodes = trie_.nodes();
  const auto& ids = trie_.token_ids();
  size_t k = 1;
  while (k < nodes.size()) {
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
    if (st.tops.empty()) {
      k = tn.subtree_end;
      continue;
    }
    marks_[d] = arena_.size();
    ++k;
  }
  if (mode == mask_mode::closing && !candidates_.empty()) {
    uint32_t best = no_node;
    for (auto& [id, dist] : candidates_)
      best = std::min(best, dist);
    uint32_t limit = best < start_distance ? start_distance : best + 1;
    for (auto& [id, dist] : candidates_)
      if (dist < limit)
        set_bit(id);
  }
}

} // namespace tessera::engine::grammar
