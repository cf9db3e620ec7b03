#pragma once
/// @file
/// Constrained decoding inside the engine: compiled grammars cached by
/// schema text, the tokenizer's vocabulary as a byte trie (built on first
/// use), and one token masker (its mask caches shared by all requests).
/// The engine keeps one grammar_matcher per constrained request (the
/// request's, not the KV's) and, per logits row:
///
///   mask(matcher, row)                     // disallowed ids -> -inf (cached)
///   token = sample(row)
///   if (!fits(matcher, token, tokens_left)) {  // would outrun max_tokens
///     mask_bounded(matcher, tokens_left, row); // an uncached walk, rare
///     token = sample(row)                      // same seed and step
///   }
///   accept(matcher, token)
///
/// So every step keeps the document completable within the tokens left
/// (each further token can shorten the shortest completion by at least a
/// byte), and a generation cut by max_tokens still ends as a valid document
/// whenever the first step could. Not thread-safe: the engine's thread only.

#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include <caf/expected.hpp>

#include "engine/grammar/matcher.hpp"
#include "engine/grammar/token_mask.hpp"
#include "engine/sampling_params.hpp"

namespace tessera::engine {

class tokenizer;

/// Most grammar states one schema may compile to in the engine (the API
/// frontend's default limit is the same, so what it accepted compiles here).
inline constexpr size_t structured_output_max_grammar_nodes = 200'000;

/// The engine's constrained-decoding state shared by requests.
class structured_output {
public:
  /// `tok`'s token bytes make the vocabulary (null: every request is
  /// refused); `eos_ids` end a document. Logits rows may be wider than the
  /// tokenizer's vocabulary: the extra ids are never allowed.
  structured_output(std::shared_ptr<const tokenizer> tok, std::vector<int32_t> eos_ids);
  ~structured_output();

  /// A matcher for `p` (which must be active) advanced through `output`
  /// (tokens already generated, e.g. by an exporting engine or before a
  /// migration). Errors (bad_request): a schema the compiler refuses,
  /// naming the keyword and its JSON pointer; no EOS id; an output token
  /// the grammar does not allow there.
  [[nodiscard]] caf::expected<grammar::grammar_matcher>
  start(const structured_output_params& p, std::span<const int32_t> output);

  /// Sets the logits of tokens `m` does not allow to -inf. Returns the
  /// number of ids still allowed (0: nothing can continue).
  size_t mask(const grammar::grammar_matcher& m, std::span<float> row);
  /// Whether, after `token`, the document can still be completed within
  /// the `tokens_left - 1` tokens that would remain (`tokens_left` counts
  /// this one). EOS always fits.
  [[nodiscard]] bool fits(const grammar::grammar_matcher& m, int32_t token, int32_t tokens_left) const;
  /// As mask, keeping only tokens that fit (or, if none does, those that
  /// come closest to an end).
  size_t mask_bounded(const grammar::grammar_matcher& m, int32_t tokens_left, std::span<float> row);

  /// Advances `m` by `token`; false (nothing changed) if not allowed.
  bool accept(grammar::grammar_matcher& m, int32_t token) const;

  /// Grammars compiled, and served from the cache, since construction.
  [[nodiscard]] uint64_t compiles() const { return compiles_; }
  [[nodiscard]] uint64_t compile_cache_hits() const { return compile_hits_; }

private:
  caf::expected<std::shared_ptr<const grammar::grammar>> grammar_for(const structured_output_params& p);
  grammar::token_masker& masker();
  size_t apply(std::span<float> row) const;

  std::shared_ptr<const tokenizer> tok_;
  std::vector<int32_t> eos_ids_;
  std::unique_ptr<grammar::token_trie> trie_;
  std::unique_ptr<grammar::token_masker> masker_;
  grammar::token_mask scratch_;
  // Compiled grammars by kind + schema text, least recently used last.
  std::list<std::string> lru_;
  std::unordered_map<std::string, std::pair<std::shared_ptr<const grammar::grammar>,
                                            std::list<std::string>::iterator>>
    grammars_;
  uint64_t compiles_ = 0;
  uint64_t compile_hits_ = 0;
};

} // namespace tessera::engine
