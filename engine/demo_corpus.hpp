#pragma once
/// @file
/// The built-in English text the demo tokenizer learns its merges from.

#include <string_view>

namespace tessera::engine {

/// A few kilobytes of varied English prose (original text, ASCII, with
/// digits, punctuation and newlines). Fixed: changing it changes every demo
/// tokenizer.
[[nodiscard]] std::string_view demo_corpus();

} // namespace tessera::engine
