#pragma once
/// @file
/// Function calling (OpenAI's `tools` / `tool_choice`): the request's tools
/// parsed and validated, the JSON Schema that constrains a required or
/// named call, and the parsers that turn a model's output into tool calls.
///
///   tool_choice       what is generated                        constrained by
///   "none"            text; tools are not shown to the template  nothing
///   "auto" (default)  text, parsed for the template's call format nothing
///   "required"        [{"name": N, "parameters": {...}}, ...]    required_call_schema
///                     (one object, not an array, when
///                     parallel_tool_calls is false)
///   {"type": "function", "function": {"name": N}}
///                     the arguments object of N alone           N's parameters
///
/// as vLLM constrains these choices. `auto` recognises the Hermes / Qwen2.5
/// format (`<tool_call>{"name": N, "arguments": {...}}</tool_call>`, any
/// number, text before the first is content) and the Llama 3.1 JSON format
/// (the whole reply, after an optional `<|python_tag|>`, is
/// `{"name": N, "parameters": {...}}`, or several separated by ';');
/// anything that does not parse, or names a function not offered, stays
/// content.

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "actors/frontend/api_error.hpp"

namespace tessera::actors::frontend {

/// One offered function.
struct tool_function {
  /// 1 to 64 of [a-zA-Z0-9_-] (OpenAI's rule), unique in the request.
  std::string name;
  /// Its parameters' JSON Schema as JSON text, key order kept;
  /// {"type":"object","properties":{}} when absent.
  std::string parameters;
};

/// How the model may call tools.
enum class tool_choice_kind : uint8_t { none, auto_, required, named };

/// The tools of a request and how they may be called.
struct tool_config {
  std::vector<tool_function> functions;
  /// The `tools` array as sent (validated, key order kept), as JSON text:
  /// what the chat template receives.
  std::string tools_json;
  tool_choice_kind choice = tool_choice_kind::auto_;
  /// The function of a named choice.
  std::string named;
  /// parallel_tool_calls. Default: true.
  bool parallel = true;

  /// True when `name` is an offered function.
  [[nodiscard]] bool offers(std::string_view name) const;
};

/// Bounds on tools. Default: OpenAI's 128 tools; what a frontend can
/// afford to compile per request.
struct tool_limits {
  /// Most tools. Default: 128.
  size_t max_tools = 128;
  /// Largest `parameters` schema of one tool, as JSON text. Default: 64 KiB.
  size_t max_schema_bytes = size_t{64} << 10;
  /// Largest schema of a required call (all tools' schemas together): the
  /// engine's bound on a structured-output schema. Default: 64 KiB.
  size_t max_call_schema_bytes = size_t{64} << 10;
  /// Largest description of one tool. Default: 8 KiB.
  size_t max_description_bytes = size_t{8} << 10;
  /// Most grammar states a required/named call's schema may compile to.
  /// Default: 200000.
  size_t max_grammar_nodes = 200'000;
  /// Deepest nesting of JSON in the body. Default: 64.
  int max_json_depth = 64;
};

/// Reads `tools`, `tool_choice` and `parallel_tool_calls` from a chat
/// request body. nullptr when no tools were given (tool_choice "none" or
/// absent; any other tool_choice without tools is a 400). Each error is a
/// 400 naming the field ("tools[3].function.name"). For required and named
/// choices the call's schema is compiled here, so a schema the grammar
/// engine refuses is a 400 naming the tool's parameters.
[[nodiscard]] api_result<std::shared_ptr<const tool_config>>
parse_tools(std::string_view body, const tool_limits& limits = {});

/// The JSON Schema text that constrains the output of `tools`: for a named
/// choice its function's parameters; for required an array (minItems 1)
/// of anyOf {"name": const, "parameters": schema} (a single such object
/// when not parallel); empty for none and auto.
[[nodiscard]] std::string call_schema(const tool_config& tools);

/// One call the model made.
struct tool_call {
  /// "call_" + 24 random letters and digits.
  std::string id;
  std::string name;
  /// The arguments as JSON text.
  std::string arguments;
};

/// A fresh tool call id.
[[nodiscard]] std::string make_tool_call_id();

/// A reply split into content and calls.
struct parsed_reply {
  /// The text that is not a call (the whole reply when nothing parsed).
  std::string content;
  /// The calls, ids filled in; empty when none parsed.
  std::vector<tool_call> calls;
};

/// Parses a whole reply generated under `tools` (per tool_choice, as the
/// table above). A reply that does not parse is content.
[[nodiscard]] parsed_reply parse_tool_reply(const tool_config& tools, std::string_view text);

/// In a streamed reply under tool_choice auto: how many bytes of `text`
/// (the reply so far, of which `released` bytes were sent as content) may
/// be sent as content now. Text from a `<tool_call>` tag on, a possible
/// start of one at the end, and a reply whose first non-space text is '{'
/// or `<|python_tag|>` are held until the reply ends.
[[nodiscard]] size_t releasable_content(std::string_view text, size_t released);

/// The conversation's tools described in a system message, for templates
/// that do not render `tools`: the Hermes format, which parse_tool_reply
/// reads back.
[[nodiscard]] std::string tools_preamble(const tool_config& tools);

} // namespace tessera::actors::frontend
