#pragma once
/// @file
/// tessera::jinja: the Jinja subset Hugging Face chat templates use,
/// interpreted as transformers' apply_chat_template renders them (an
/// ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks, its
/// tojson, raise_exception and strftime_now).
///
/// What it takes: text, {{ }}, {# #}, whitespace control ({%- -%}, +);
/// for (loop.index, index0, revindex, revindex0, first, last, length,
/// previtem, nextitem; `for x in y if c`; else; break / continue), if /
/// elif / else, set (names, tuples, `ns.attr`, block set), macro and
/// calls of macros, generation blocks; literals (strings, numbers, lists,
/// dicts, tuples), attribute / subscript / slice access, + - * / // % **
/// ~, comparisons, and / or / not, in / not in, inline if / else; the
/// filters and tests in builtins.cpp; the string methods strip, lstrip,
/// rstrip, split, startswith, endswith, upper, lower, title, capitalize,
/// replace, find, count, join and the dict methods items, keys, values,
/// get; the globals range, namespace, dict, raise_exception, strftime_now.
/// Anything else is an error at compile time naming the construct and its
/// line and column. Undefined values are jinja2's default Undefined.
/// Case mapping (upper, lower, title) maps ASCII letters only.
///
/// Provenance: every output byte is marked as coming from the template
/// (its literals, and the `trusted` variables such as bos_token) or from
/// data (the `data` variables: messages, tools). The output is a list of
/// runs, so a caller can tokenize template text with special tokens on
/// and data with them off.

#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace tessera::jinja {

struct program;

/// A piece of rendered text and where it came from.
struct run {
  std::string text;
  /// True when the bytes came from data variables.
  bool from_data = false;
};

/// A compile or render error. `message` names the construct and its line
/// and column; when `raised`, it is the template's own raise_exception
/// message.
struct error {
  std::string message;
  bool raised = false;
};

/// Most bytes a render may produce before it is stopped (a template that
/// loops without bound). 16 MiB: a prompt is bounded far below that.
inline constexpr size_t max_output_bytes = size_t{16} << 20;

/// A parsed template. Immutable; render() may run concurrently.
class compiled_template {
public:
  /// Parses `source`. Errors: a syntax error or unsupported construct,
  /// naming it with its line and column.
  [[nodiscard]] static std::variant<compiled_template, error> compile(std::string_view source);

  /// Renders with the variables of `data` (object; all its strings,
  /// numbers and booleans are data) and `trusted` (object; template
  /// provenance, e.g. bos_token, add_generation_prompt). A name in both is
  /// taken from `trusted`. Adjacent runs of the same provenance are merged;
  /// no run is empty.
  [[nodiscard]] std::variant<std::vector<run>, error>
  render(const nlohmann::ordered_json& data, const nlohmann::ordered_json& trusted) const;

private:
  std::shared_ptr<const program> program_;
};

/// The text of `runs`, concatenated.
[[nodiscard]] std::string join_runs(const std::vector<run>& runs);

} // namespace tessera::jinja
