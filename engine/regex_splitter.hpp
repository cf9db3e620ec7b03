#pragma once
/// @file
/// Splits text with a compiled Unicode regex (PCRE2, UTF + UCP, JIT when
/// available), as the pre-tokenizers of byte-level BPE tokenizers do.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <caf/expected.hpp>

namespace tessera::engine {

/// GPT-2's pre-tokenizer regex (ByteLevel with use_regex: true).
inline constexpr std::string_view gpt2_split_pattern =
  R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

/// Llama 3's pre-tokenizer regex (Split, behavior Isolated).
inline constexpr std::string_view llama3_split_pattern =
  R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

/// A compiled split pattern. Immutable; `split` is thread-safe.
class regex_splitter {
public:
  /// Compiles `pattern`; a literal string when `literal` is true. The error
  /// (code engine_errc::bad_tokenizer) carries PCRE2's message and offset.
  [[nodiscard]] static caf::expected<regex_splitter> compile(std::string_view pattern,
                                                             bool literal = false);

  regex_splitter(regex_splitter&&) noexcept;
  regex_splitter& operator=(regex_splitter&&) noexcept;
  ~regex_splitter();

  /// Appends to `out` the pieces of `text` (well-formed UTF-8) with every
  /// match isolated: matches and the gaps between them, in order, none
  /// empty. The pieces view `text`.
  void split(std::string_view text, std::vector<std::string_view>& out) const;

private:
  struct impl;
  explicit regex_splitter(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

} // namespace tessera::engine
