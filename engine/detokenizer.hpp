#pragma once
/// @file
/// Turns generated token ids into text as they arrive, never emitting half
/// a UTF-8 character, for streaming responses.

#include <cstdint>
#include <string>

#include "engine/tokenizer.hpp"

namespace tessera::engine {

/// Streams the text of a token sequence. Concatenating every `push` result
/// and `finish` gives `tok.decode(ids, skip_special)` (for a sequence
/// pushed from its start with `at_sequence_start`). Bytes that cannot
/// become valid UTF-8 are emitted as U+FFFD as soon as that is certain;
/// at most 3 bytes of an incomplete character are held. Not thread-safe;
/// one per sequence. Keeps a reference to `tok`, which must outlive it.
class incremental_detokenizer {
public:
  /// `skip_special`: special tokens contribute nothing. Default: true.
  /// `at_sequence_start`: the first token begins the sequence, so the
  /// leading space of sentencepiece tokenizers is dropped. Default: false.
  explicit incremental_detokenizer(const tokenizer& tok, bool skip_special = true,
                                   bool at_sequence_start = false);

  /// Adds token `id`; returns the text that became final (often empty
  /// while a multi-byte character is incomplete). Out-of-range ids add
  /// nothing.
  [[nodiscard]] std::string push(int32_t id);

  /// Flushes held bytes (an incomplete character becomes U+FFFD) and
  /// returns them. The detokenizer can be pushed to again afterwards.
  [[nodiscard]] std::string finish();

  /// Number of bytes held back, waiting for the rest of a character (0..3).
  [[nodiscard]] size_t pending_bytes() const { return pending_.size(); }

private:
  const tokenizer* tok_;
  bool skip_special_;
  bool strip_leading_space_;
  std::string pending_; // the start of an incomplete UTF-8 character
};

} // namespace tessera::engine
