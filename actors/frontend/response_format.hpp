#pragma once
/// @file
/// The `response_format` field of /v1/chat/completions and /v1/completions
/// (OpenAI's structured output): parsed, validated and compiled into the
/// grammar the engine's sampler will constrain the output with.
///
///   {"type": "text"}                              no constraint
///   {"type": "json_object"}                       any JSON object
///   {"type": "json_schema", "json_schema": {"name": "...", "schema": {...},
///    "strict": true|false, "description": "..."}} a document valid under
///                                                 the schema
///
/// The schema is read from the raw body with its key order kept, so the
/// model writes properties in the order the schema lists them. `strict`
/// false is served like true (the output is always constrained; OpenAI's
/// non-strict mode is only best effort). Errors are 400s naming the field
/// (e.g. "response_format.json_schema.schema: unsupported JSON Schema
/// keyword 'minimum' (keyword 'minimum' at '#/properties/age')").

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "actors/frontend/api_error.hpp"
#include "engine/grammar/grammar.hpp"
#include "engine/sampling_params.hpp"

namespace tessera::actors::frontend {

/// What `response_format` asks for.
struct response_format {
  enum class kind : uint8_t { text, json_object, json_schema };
  kind type = kind::text;
  /// json_schema.name (letters, digits, '_' and '-', 1..64 bytes).
  std::string name;
  /// json_schema.strict; served the same either way.
  bool strict = false;
  /// json_schema.schema as JSON text, key order kept.
  std::string schema_text;
};

/// Bounds on a response_format. Default: what an API server can afford per
/// request.
struct response_format_limits {
  /// Largest schema, in bytes of its JSON text. Default: 64 KiB.
  size_t max_schema_bytes = size_t{64} << 10;
  /// Most grammar states a schema may compile to. Default: 200000.
  size_t max_grammar_nodes = 200'000;
  /// Deepest nesting of JSON arrays and objects in the body. Default: 64.
  int max_json_depth = 64;
};

/// Reads `response_format` from a request body (JSON text). Absent or
/// null: text. A malformed value is a 400 naming the field.
[[nodiscard]] api_result<response_format>
parse_response_format(std::string_view body, const response_format_limits& limits = {});

/// The grammar of `format`: nullptr for text, else the compiled grammar;
/// a schema the compiler refuses is a 400 naming the keyword and its
/// JSON pointer.
[[nodiscard]] api_result<std::shared_ptr<const engine::grammar::grammar>>
compile_response_format(const response_format& format, const response_format_limits& limits = {});

/// parse_response_format and compile_response_format of `body`, the result
/// put into `params.structured_output` (text: left none) for the engine,
/// which compiles the schema again from its text (cached there). A 400
/// naming the field or the schema keyword on error.
[[nodiscard]] std::optional<api_error> apply_response_format(std::string_view body,
                                                             engine::sampling_params& params,
                                                             const response_format_limits& limits = {});

} // namespace tessera::actors::frontend
