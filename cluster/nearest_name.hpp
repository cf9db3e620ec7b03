#pragma once
/// @file
/// Messages about names from outside: "did you mean ...?" (the known
/// name nearest to a misspelt one, for config keys and subcommands), and
/// input quoted at a bounded length.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::cluster {

/// Levenshtein distance between `a` and `b` (insertions, deletions and
/// substitutions of one byte each cost 1).
[[nodiscard]] size_t edit_distance(std::string_view a, std::string_view b);

/// The name of `known` nearest to `given`, if it is close enough to be
/// the one meant: at most max(2, |given| / 3) edits away, or `given` is a
/// prefix of it (`serv` -> `serve`). Ties go to the earlier name.
[[nodiscard]] std::optional<std::string> nearest_name(std::string_view given,
                                                      const std::vector<std::string>& known);

/// "; did you mean 'x'?" for the nearest name, or "" when none is close.
[[nodiscard]] std::string did_you_mean(std::string_view given, const std::vector<std::string>& known);

/// `value` in single quotes for an error message, cut to its first 200
/// bytes (with its length said) so that a huge input is not echoed back.
[[nodiscard]] std::string quote_input(std::string_view value);

} // namespace tessera::cluster
