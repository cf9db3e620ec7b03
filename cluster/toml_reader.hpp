#pragma once
/// @file
/// Strict reading of a TOML file's keys (cluster configs, chaos
/// scenarios): every problem of a file is collected, each prefixed with the
/// file's name, instead of stopping at the first; unknown keys suggest the
/// nearest known one (nearest_name.hpp); values out of range say the range
/// and what was given.

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include <caf/error.hpp>
#include <caf/sec.hpp>
#include <toml++/toml.h>

#include "cluster/nearest_name.hpp"

namespace tessera::cluster {

class toml_reader {
public:
  using view = toml::node_view<const toml::node>;

  explicit toml_reader(std::string name) : name_(std::move(name)) {}

  void problem(const std::string& what) { problems_.push_back(name_ + ": " + what); }
  [[nodiscard]] std::vector<std::string> take_problems() { return std::move(problems_); }
  [[nodiscard]] size_t count() const { return problems_.size(); }
  [[nodiscard]] bool ok() const { return problems_.empty(); }
  /// Every problem, one a line (caf::sec::invalid_argument); none if ok().
  [[nodiscard]] caf::error error() const {
    if (problems_.empty())
      return {};
    std::string text;
    for (const auto& p : problems_)
      text += (text.empty() ? "" : "\n") + p;
    return caf::make_error(caf::sec::invalid_argument, text);
  }

  /// Each key of `t` must be one of `known`; `prefix` ("sim.", "node[2].")
  /// names the table.
  void known_keys(const toml::table& t, const std::vector<std::string>& known, const std::string& prefix) {
    for (const auto& [k, _] : t) {
      const std::string key{k.str()};
      if (std::find(known.begin(), known.end(), key) != known.end())
        continue;
      if (prefix.empty())
        problem("unknown key " + quote_input(key) + did_you_mean(key, known));
      else
        problem("unknown key " + quote_input(prefix + key) + did_you_mean(key, known) + " (known in " +
                prefix.substr(0, prefix.size() - 1) + ": " + joined(known) + ")");
    }
  }

  /// The table of an array entry (`at`: "node[2]"), its keys checked
  /// against `known`; null, with the problem "<at> is not a table<hint>",
  /// when it is something else.
  const toml::table* entry_table(const toml::node& entry, const std::string& at,
                                 const std::vector<std::string>& known, const std::string& hint = {}) {
    auto* t = entry.as_table();
    if (t == nullptr)
      problem(at + " is not a table" + hint);
    else
      known_keys(*t, known, at + ".");
    return t;
  }

  void str(const view& v, const std::string& key, std::string& out) {
    if (!v)
      return;
    if (auto s = v.value_exact<std::string>())
      out = *s;
    else
      problem("'" + key + "' must be a string");
  }

  template <class T>
  void num(const view& v, const std::string& key, int64_t lo, int64_t hi, T& out) {
    if (!v)
      return;
    auto x = v.value_exact<int64_t>();
    if (!x || *x < lo || *x > hi) {
      problem("'" + key + "' must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]" +
              (x ? ", got " + std::to_string(*x) : std::string{}));
      return;
    }
    out = static_cast<T>(*x);
  }

  /// A number in [lo, hi], or (lo, hi] with `open_lo`.
  template <class T>
  void flt(const view& v, const std::string& key, double lo, double hi, T& out, bool open_lo = false) {
    if (!v)
      return;
    auto x = v.value<double>();
    const bool above = x && (open_lo ? *x > lo : *x >= lo);
    if (!x || !above || !(*x <= hi)) {
      problem("'" + key + "' must be a number in " + (open_lo ? "(" : "[") + number_text(lo) + ", " +
              number_text(hi) + "]" + (x ? ", got " + number_text(*x) : std::string{}));
      return;
    }
    out = static_cast<T>(*x);
  }

  void flag(const view& v, const std::string& key, bool& out) {
    if (!v)
      return;
    if (auto b = v.value_exact<bool>())
      out = *b;
    else
      problem("'" + key + "' must be true or false");
  }

  /// "a, b, c".
  [[nodiscard]] static std::string joined(const std::vector<std::string>& names) {
    std::string out;
    for (const auto& n : names)
      out += (out.empty() ? "" : ", ") + n;
    return out;
  }

  /// `v` as TOML would print it (shortest form).
  [[nodiscard]] static std::string number_text(double v) {
    std::ostringstream os;
    os << v;
    return os.str();
  }

private:
  std::string name_;
  std::vector<std::string> problems_;
};

} // namespace tessera::cluster
