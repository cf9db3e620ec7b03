#pragma once
/// @file
/// JSON Schema -> grammar: the subset structured-output APIs accept.
///
/// Supported keywords: type (one or a list of object, array, string,
/// number, integer, boolean, null), enum, const, properties, required,
/// additionalProperties (false, true/absent = any JSON value, or a
/// schema), items, minItems, maxItems, minLength, maxLength, pattern (see
/// regex.hpp), format (date, time, date-time, uuid, email, ipv4: strings
/// generated in a plain subset of each, e.g. dates with days 01-28), anyOf, oneOf (treated as anyOf), $ref to "#", "#/$defs/..."
/// or "#/definitions/..." (recursion allowed), $defs, definitions, and the
/// annotations title, description, $schema, $id, $comment, default,
/// examples, deprecated, readOnly, writeOnly. Any other keyword is an error
/// naming it and its JSON pointer. A schema without "type" takes its type
/// from its keywords (properties -> object, items -> array, ...), else any
/// JSON value.
///
/// The language generated: compact JSON with at most
/// json_grammar_options::max_whitespace whitespace bytes (space, \n, \t)
/// in each gap ({ ws key ws : ws value ws , ... ws }); none before or after
/// the document. Object properties appear in the order the schema lists
/// them (optional ones may be left out), then additional properties when
/// allowed, whose names differ from the listed ones. Strings are written
/// canonically: every character raw except " \ and control characters,
/// which take their short escape (\" \\ \b \f \n \r \t) or \u00XX (lower
/// case); lengths count code points as JSON Schema does. Numbers:
/// -?(0|[1-9][0-9]{0,D-1})(\.[0-9]{1,D})?([eE][+-]?[0-9]{1,2})? with D =
/// json_grammar_options::max_number_digits (integers without fraction and
/// exponent), so every number fits a double and a model cannot write
/// digits forever. Every document the grammar accepts is valid
/// under the schema; not every valid document is accepted (that is the
/// point: the model is steered to one canonical form).

#include <memory>
#include <string_view>

#include <nlohmann/json.hpp>

#include "engine/grammar/grammar.hpp"

namespace tessera::engine::grammar {

/// Options of the schema compiler.
struct json_grammar_options {
  /// Whitespace bytes allowed in each structural gap. Default: 1 (so a
  /// model cannot pad forever, yet "a": 1 and {"a", "b"} styles fit).
  int max_whitespace = 1;
  /// Largest minLength/maxLength/minItems/maxItems honoured (these are
  /// unrolled into the automaton); larger bounds are an error. Default: 1024.
  int max_unrolled = 1024;
  /// Most digits of a number's integer part, and of its fraction. The
  /// exponent has at most 2 digits. Default: 20.
  int max_number_digits = 20;
  /// Size limits of the finalised grammar.
  grammar_limits limits;
};

/// A compiled grammar, or why not.
struct json_grammar_result {
  std::shared_ptr<const grammar> value; // null on error
  grammar_error error;
  [[nodiscard]] bool ok() const { return value != nullptr; }
};

/// Compiles `schema` (a JSON Schema document) into a grammar accepting
/// exactly the JSON texts described above. An ordered_json keeps the
/// properties in the order the schema text lists them (nlohmann::json
/// would sort them, and the model would be made to write them sorted).
[[nodiscard]] json_grammar_result compile_json_schema(const nlohmann::ordered_json& schema,
                                                      const json_grammar_options& options = {});

/// Parses `schema_text` (keeping property order) and compiles it; text that
/// is not JSON is an error saying where.
[[nodiscard]] json_grammar_result compile_json_schema_text(std::string_view schema_text,
                                                           const json_grammar_options& options = {});

/// The grammar of `response_format: {"type": "json_object"}`: any JSON
/// object (values of any JSON type).
[[nodiscard]] json_grammar_result compile_json_object_mode(const json_grammar_options& options = {});

} // namespace tessera::engine::grammar
