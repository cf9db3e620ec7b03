#pragma once
/// @file
/// Regular expressions (the ECMA-262 subset JSON Schema "pattern" uses in
/// practice) compiled to a DFA over code points, and the other string
/// languages the schema compiler needs (any string, any string but a few).
///
/// Supported: literals, `.`, classes `[a-z]`/`[^...]`, escapes \d \w \s
/// (ASCII digits/word characters; \s the whitespace both ECMA-262 and
/// Python agree on) and \D \W \S (ASCII only: a subset both dialects
/// accept), \t \n \r \f \v \0 \xHH \uHHHH and escaped punctuation,
/// alternation, groups `( )` `(?: )` `(?<name> )`, quantifiers * + ? {n}
/// {n,} {n,m} (lazy forms mean the same language), anchors ^ and $ at the
/// start/end of a top-level alternative. Without ^ (or $) the match may
/// start (or end) anywhere in the string, as JSON Schema specifies.
/// Refused with an error naming the construct and its offset: lookaround,
/// backreferences, \b \B, anchors elsewhere.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/grammar/char_set.hpp"

namespace tessera::engine::grammar {

/// A DFA over code points: per state, edges with disjoint char sets.
struct char_dfa {
  struct edge {
    char_set set;
    uint32_t to = 0;
  };
  std::vector<std::vector<edge>> edges;
  std::vector<bool> accepting;
  uint32_t start = 0;
};

/// Compiles `pattern` with JSON Schema's search semantics. On failure
/// returns false and sets `error` to a sentence naming the construct and
/// its byte offset.
[[nodiscard]] bool compile_pattern(std::string_view pattern, char_dfa& out, std::string& error);

/// The DFA of every string.
[[nodiscard]] char_dfa any_string_dfa();

/// The DFA of every string except those in `excluded`.
[[nodiscard]] char_dfa any_string_except(const std::vector<std::string>& excluded);

/// Decodes one UTF-8 code point of `s` at `i` (advancing `i`); invalid
/// bytes decode as themselves (Latin-1), so nothing is lost.
uint32_t decode_utf8_at(std::string_view s, size_t& i);

} // namespace tessera::engine::grammar
