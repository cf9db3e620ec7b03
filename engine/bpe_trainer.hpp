#pragma once
/// @file
/// Learns byte-level BPE merges from word counts, for the demo tokenizer.

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

namespace tessera::engine {

/// One learnt merge: symbols `left` and `right` become `result`.
/// Symbols 0..255 are the bytes; merges create symbols 256 onward.
struct bpe_merge {
  int32_t left = 0;
  int32_t right = 0;
  int32_t result = 0;
};

/// The outcome of training.
struct bpe_training {
  /// The raw bytes of every symbol; the first 256 are the single bytes.
  std::vector<std::string> symbols;
  /// Merges in rank order. Each result is new, except that a pair whose
  /// bytes equal an existing symbol's reuses that symbol (a second merge
  /// to the same token, as the Hugging Face trainer does).
  std::vector<bpe_merge> merges;
  /// Merges learnt from the words (the rest are padding).
  size_t learnt = 0;
};

/// A word (raw bytes, one pre-tokenizer piece) and how often it occurs.
struct bpe_word_count {
  std::string word;
  int64_t count = 0;
};

/// Learns merges until there are exactly `symbol_count` symbols (at least
/// 256). Most frequent pair first, ties to the smaller (left, right) pair.
/// When the words have no pairs left, pads with merges of existing symbols
/// (earliest learnt first) whose bytes are not yet a symbol and not in
/// `reserved`, so every merge's inputs precede its result. Deterministic.
[[nodiscard]] bpe_training train_bpe(const std::vector<bpe_word_count>& words,
                                     size_t symbol_count,
                                     const std::unordered_set<std::string>& reserved);

} // namespace tessera::engine
