#pragma once
/// @file
/// Jinja's filters and tests, attribute and item access, and the Python
/// string/dict methods chat templates call. Internal to engine/jinja.
/// Strings keep their provenance through every operation.

#include <string>
#include <string_view>
#include <vector>

#include "engine/jinja/value.hpp"

namespace tessera::jinja {

/// True for the filters / tests apply_filter / apply_test implement (the
/// parser refuses others, naming them).
[[nodiscard]] bool is_known_filter(std::string_view name);
[[nodiscard]] bool is_known_test(std::string_view name);

/// `operand | name(args, kw)`. Throws jinja_error on bad arguments.
[[nodiscard]] value apply_filter(const std::string& name, const value& operand,
                                 std::vector<value>& args, kwargs& kw);
/// `operand is name(args)`.
[[nodiscard]] bool apply_test(const std::string& name, const value& operand,
                              std::vector<value>& args);

/// obj.name as jinja2 resolves it (dict methods, string methods, keys);
/// an attribute of undefined is an error naming it.
[[nodiscard]] value get_attr(const value& obj, const std::string& name);
/// obj[key]: list and string indexes (negative from the end), dict keys.
[[nodiscard]] value get_item(const value& obj, const value& key);
/// obj[start:stop:step] with Python's rules (null parts absent).
[[nodiscard]] value get_slice(const value& obj, const value& start, const value& stop,
                              const value& step);
/// `needle in haystack`.
[[nodiscard]] bool contains(const value& haystack, const value& needle);
/// The items a for loop walks: a list's items, a dict's keys, a string's
/// characters; undefined and none are empty. Others are an error.
[[nodiscard]] value_list iterate(const value& v);
/// Python's ordering of two numbers or two strings (-1, 0, 1); others
/// are an error.
[[nodiscard]] int compare_values(const value& a, const value& b);
/// Python's str.strip(chars) on UTF-8 (chars empty: Unicode whitespace).
[[nodiscard]] pstring py_strip(const pstring& s, bool left, bool right, const pstring* chars = nullptr);

} // namespace tessera::jinja
