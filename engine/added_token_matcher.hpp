#pragma once
/// @file
/// Finds added tokens (e.g. "<|eot_id|>") written literally in text, so
/// tokenizers can cut them out before pre-tokenization.

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::engine {

/// A set of literal tokens matched longest first, left to right.
/// Immutable after construction; thread-safe.
class added_token_matcher {
public:
  /// One literal token.
  struct entry {
    std::string content;
    int32_t id = 0;
    /// Matched only when the caller asks for special tokens.
    bool special = false;
  };

  added_token_matcher() = default;

  /// Builds the matcher; empty contents are ignored.
  explicit added_token_matcher(std::vector<entry> entries);

  /// Walks `text`: calls `on_text` for each run of plain text (never empty)
  /// and `on_token` for each token found. Special tokens are only matched
  /// when `match_special` is true.
  void split(std::string_view text, bool match_special,
             const std::function<void(std::string_view)>& on_text,
             const std::function<void(int32_t)>& on_token) const;

  /// True if there are no tokens to match.
  [[nodiscard]] bool empty() const { return entries_.empty(); }

private:
  std::vector<entry> entries_;           // sorted by content length, longest first
  std::vector<std::vector<uint32_t>> by_first_byte_; // [256] -> indexes into entries_
};

} // namespace tessera::engine
