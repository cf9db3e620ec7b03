#pragma once
/// @file
/// The parsed form of a template: expressions and statements, each with
/// its source position for error messages. Internal to engine/jinja.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/jinja/error.hpp"
#include "engine/jinja/value.hpp"

namespace tessera::jinja {

struct expr;
using expr_ptr = std::unique_ptr<expr>;

/// One expression node. Which fields are used depends on `kind`:
///  literal: lit;  name: name;  list / tuple: args (items);  dict: args
///  (key, value, key, value...);  attr: args[0], name;  item: args[0..1];
///  slice: args[0] (object), args[1..3] (start, stop, step; null: absent);
///  call: args[0] (callee), args[1..], kwargs;  filter / test: args[0]
///  (operand), args[1..], kwargs, name, negated (is not);  unary: name
///  ("not", "-", "+"), args[0];  binary: name (operator), args[0..1];
///  cond: args[0] (then), args[1] (condition), args[2] (else, may be null).
struct expr {
  enum class kind { literal, name, list, tuple, dict, attr, item, slice, call, filter, test,
                    unary, binary, cond };
  kind k = kind::literal;
  position pos;
  value lit;
  std::string name;
  std::vector<expr_ptr> args;
  std::vector<std::pair<std::string, expr_ptr>> kwargs;
  bool negated = false;
};

struct stmt;
using body = std::vector<std::unique_ptr<stmt>>;

/// One statement node:
///  text: text;  output: e;  if: branches (condition null for else);
///  for: targets, e (iterable), filter (may be null), body, else_body;
///  set: targets (names) or ns + attr, e; or a block set (e null, body);
///  macro: name, params (name, default or null), body;
///  break / continue;  generation: body (transformers' extension).
struct stmt {
  enum class kind { text, output, if_, for_, set, macro, break_, continue_, generation };
  kind k = kind::text;
  position pos;
  std::string text;
  expr_ptr e;
  expr_ptr filter;
  std::vector<std::string> targets;
  std::string ns;
  std::string attr;
  std::vector<std::pair<expr_ptr, body>> branches;
  body block;
  body else_block;
  std::string name;
  std::vector<std::pair<std::string, expr_ptr>> params;
};

/// A parsed template.
struct program {
  body root;
};

/// Parses `source` with transformers' settings (trim_blocks, lstrip_blocks,
/// no trailing newline kept). Throws jinja_error naming the construct and
/// its line and column.
[[nodiscard]] std::shared_ptr<const program> parse_program(std::string_view source);

} // namespace tessera::jinja
