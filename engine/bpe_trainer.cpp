#include "engine/bpe_trainer.hpp"

#include <algorithm>
#include <queue>
#include <unordered_map>

#include "common/assert.hpp"

namespace tessera::engine {

namespace {

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
         static_cast<uint32_t>(right);
}

int32_t key_left(uint64_t key) { return static_cast<int32_t>(key >> 32); }
int32_t key_right(uint64_t key) { return static_cast<int32_t>(key & 0xFFFFFFFFu); }

/// Incremental pair statistics over the training words.
class pair_trainer {
public:
  pair_trainer(const std::vector<bpe_word_count>& words, bpe_training& out) : out_(out) {
    for (const auto& w : words) {
      if (w.count <= 0 || w.word.size() < 2)
        continue;
      std::vector<int32_t> syms;
      for (char c : w.word)
        syms.push_back(static_cast<uint8_t>(c));
      words_.push_back(std::move(syms));
      counts_.push_back(w.count);
    }
    for (size_t i = 0; i < words_.size(); ++i)
      add_pairs(i, +1);
    flush_touched();
  }

  /// Learns merges until `symbol_count` symbols exist or no pair is left.
  void run(size_t symbol_count) {
    while (out_.symbols.size() < symbol_count && !heap_.empty()) {
      auto [count, neg_key] = heap_.top();
      heap_.pop();
      uint64_t key = ~neg_key;
      auto it = pair_counts_.find(key);
      if (it == pair_counts_.end() || it->second != count || count <= 0)
        continue; // stale entry
      apply(key);
    }
  }

private:
  void add_pairs(size_t w, int sign) {
    const auto& syms = words_[w];
    for (size_t i = 0; i + 1 < syms.size(); ++i) {
      auto key = pair_key(syms[i], syms[i + 1]);
      pair_counts_[key] += sign * counts_[w];
      touched_.push_back(key);
      if (sign > 0)
        where_[key].push_back(static_cast<uint32_t>(w));
    }
  }

  void flush_touched() {
    std::sort(touched_.begin(), touched_.end());
    touched_.erase(std::unique(touched_.begin(), touched_.end()), touched_.end());
    for (auto key : touched_) {
      auto count = pair_counts_[key];
      if (count > 0)
        heap_.emplace(count, ~key); // max count, then smallest key
    }
    touched_.clear();
  }

  void apply(uint64_t key) {
    int32_t left = key_left(key);
    int32_t right = key_right(key);
    auto bytes = out_.symbols[left] + out_.symbols[right];
    int32_t result = 0;
    if (auto it = index_.find(bytes); it != index_.end()) {
      result = it->second;
    } else {
      result = static_cast<int32_t>(out_.symbols.size());
      index_.emplace(bytes, result);
      out_.symbols.push_back(std::move(bytes));
    }
    if (applied_.insert(key).second) {
      out_.merges.push_back({left, right, result});
      ++out_.learnt;
    }
    auto list = std::move(where_[key]);
    where_.erase(key);
    std::sort(list.begin(), list.end());
    list.erase(std::unique(list.begin(), list.end()), list.end());
    for (auto w : list) {
      auto& syms = words_[w];
      bool present = false;
      for (size_t i = 0; i + 1 < syms.size() && !present; ++i)
        present = syms[i] == left && syms[i + 1] == right;
      if (!present)
        continue;
      add_pairs(w, -1);
      std::vector<int32_t> merged;
      merged.reserve(syms.size());
      for (size_t i = 0; i < syms.size(); ++i) {
        if (i + 1 < syms.size() && syms[i] == left && syms[i + 1] == right) {
          merged.push_back(result);
          ++i;
        } else {
          merged.push_back(syms[i]);
        }
      }
      syms = std::move(merged);
      add_pairs(w, +1);
    }
    flush_touched();
  }

public:
  /// Registers the bytes of every existing symbol.
  void index_symbols() {
    for (size_t i = 0; i < out_.symbols.size(); ++i)
      index_.emplace(out_.symbols[i], static_cast<int32_t>(i));
  }

private:
  bpe_training& out_;
  std::vector<std::vector<int32_t>> words_;
  std::vector<int64_t> counts_;
  std::unordered_map<uint64_t, int64_t> pair_counts_;
  std::unordered_map<uint64_t, std::vector<uint32_t>> where_; // may list stale words
  std::priority_queue<std::pair<int64_t, uint64_t>> heap_;    // (count, ~key), lazy
  std::vector<uint64_t> touched_;
  std::unordered_map<std::string, int32_t> index_;
  std::unordered_set<uint64_t> applied_;
};

/// Adds merges of existing symbols until `symbol_count` symbols exist:
/// pairs (a, b) enumerated by a + b over the symbols in creation order
/// (learnt ones first), skipping b starting with a space so the results
/// look like word pieces.
void pad_merges(bpe_training& out, size_t symbol_count,
                const std::unordered_set<std::string>& reserved) {
  std::unordered_set<std::string> taken(out.symbols.begin(), out.symbols.end());
  while (out.symbols.size() < symbol_count) {
    std::vector<int32_t> order;
    for (size_t i = 256; i < out.symbols.size(); ++i)
      order.push_back(static_cast<int32_t>(i));
    for (int32_t b = 0; b < 256; ++b)
      order.push_back(b);
    size_t before = out.symbols.size();
    auto n = order.size();
    for (size_t diag = 0; diag < 2 * n - 1 && out.symbols.size() < symbol_count; ++diag) {
      for (size_t i = diag < n ? 0 : diag - n + 1; i <= diag && i < n; ++i) {
        int32_t a = order[i];
        int32_t b = order[diag - i];
        const auto& sb = out.symbols[b];
        if (sb.empty() || sb.front() == ' ')
          continue;
        auto bytes = out.symbols[a] + sb;
        if (taken.contains(bytes) || reserved.contains(bytes))
          continue;
        taken.insert(bytes);
        out.merges.push_back({a, b, static_cast<int32_t>(out.symbols.size())});
        out.symbols.push_back(std::move(bytes));
        if (out.symbols.size() == symbol_count)
          break;
      }
    }
    // Each round can at least join the longest symbol with itself.
    TESSERA_ASSERT(out.symbols.size() > before, "BPE padding made no progress");
  }
}

} // namespace

bpe_training train_bpe(const std::vector<bpe_word_count>& words, size_t symbol_count,
                       const std::unordered_set<std::string>& reserved) {
  bpe_training out;
  for (int b = 0; b < 256; ++b)
    out.symbols.emplace_back(1, static_cast<char>(b));
  if (symbol_count <= 256)
    return out;
  pair_trainer trainer{words, out};
  trainer.index_symbols();
  trainer.run(symbol_count);
  pad_merges(out, symbol_count, reserved);
  return out;
}

} // namespace tessera::engine
