#pragma once
/// @file
/// The Jinja lexer: template text and tag tokens, with whitespace control
/// applied to the text as jinja2 does with transformers' settings
/// (trim_blocks, lstrip_blocks, no trailing newline kept). Internal to
/// engine/jinja.

#include <string>
#include <string_view>
#include <vector>

#include "engine/jinja/error.hpp"

namespace tessera::jinja {

/// One token. Text tokens hold template text; name, string, integer,
/// floating and op tokens come from inside tags.
struct token {
  enum class type { text, var_begin, var_end, block_begin, block_end, name, string, integer,
                    floating, op, eof };
  type t = type::eof;
  std::string s;
  position pos;
};

/// Tokenizes `source`; the last token is eof. Throws jinja_error (an
/// unclosed tag or comment, a bad character or string literal, `raw`).
[[nodiscard]] std::vector<token> lex(std::string_view source);

} // namespace tessera::jinja
