#pragma once
/// @file
/// The values a Jinja template computes with, and strings that remember,
/// byte by byte, whether they came from the template's own text or from
/// data (message contents, tool definitions): the provenance the chat
/// renderer needs so that data can never become control tokens.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace tessera::jinja {

/// A string with one provenance flag per byte: mask[i] != 0 when text[i]
/// came from data. Every string operation keeps the flags of the bytes it
/// keeps, so concatenation, trim, slicing and replace preserve provenance.
struct pstring {
  std::string text;
  std::string mask;

  pstring() = default;
  /// `s`, every byte from data when `from_data`.
  explicit pstring(std::string s, bool from_data = false)
    : text(std::move(s)), mask(text.size(), from_data ? '\1' : '\0') {}

  void append(const pstring& o) {
    text += o.text;
    mask += o.mask;
  }
  void append(std::string_view s, bool from_data = false) {
    text += s;
    mask.append(s.size(), from_data ? '\1' : '\0');
  }
  [[nodiscard]] pstring substr(size_t pos, size_t n = std::string::npos) const {
    pstring out;
    out.text = text.substr(pos, n);
    out.mask = mask.substr(pos, n);
    return out;
  }
  [[nodiscard]] size_t size() const { return text.size(); }
  [[nodiscard]] bool empty() const { return text.empty(); }
};

class value;
using value_list = std::vector<value>;
/// A mapping in insertion order (Python dicts keep it; tojson shows it).
struct value_dict {
  std::vector<std::pair<pstring, value>> entries;
  [[nodiscard]] const value* find(std::string_view key) const;
  [[nodiscard]] value* find(std::string_view key);
  void set(pstring key, value v);
};

/// Keyword arguments of a call, in the order given.
using kwargs = std::vector<std::pair<std::string, value>>;
/// A callable: a macro, a global function or a bound method.
using callable = std::function<value(std::vector<value>&, kwargs&)>;

/// Undefined: a name or attribute that does not exist. Remembers what it
/// was, for the error when it is used where jinja2 raises.
struct undefined {
  std::string name;
};
struct none_t {};
/// namespace(...): a mutable dict that `set ns.attr = ...` can assign to
/// from inside loops.
struct namespace_obj {
  value_dict attrs;
};

/// A Jinja value. Lists, dicts and namespaces are shared (as in Python);
/// templates rarely mutate anything but namespaces.
class value {
public:
  using storage =
    std::variant<undefined, none_t, bool, int64_t, double, pstring, std::shared_ptr<value_list>,
                 std::shared_ptr<value_dict>, std::shared_ptr<namespace_obj>,
                 std::shared_ptr<callable>>;

  value() : v_(undefined{}) {}
  value(storage v, bool from_data = false) : v_(std::move(v)), from_data_(from_data) {}
  static value none(bool from_data = false) { return value{none_t{}, from_data}; }
  static value str(std::string s, bool from_data = false) {
    return value{pstring(std::move(s), from_data)};
  }
  static value str(pstring s) { return value{std::move(s)}; }
  static value list(value_list items = {}) {
    return value{std::make_shared<value_list>(std::move(items))};
  }
  static value dict(value_dict d = {}) { return value{std::make_shared<value_dict>(std::move(d))}; }
  static value function(callable f) { return value{std::make_shared<callable>(std::move(f))}; }
  static value undef(std::string name) { return value{undefined{std::move(name)}}; }

  [[nodiscard]] const storage& get() const { return v_; }
  template <class T>
  [[nodiscard]] bool is() const {
    return std::holds_alternative<T>(v_);
  }
  template <class T>
  [[nodiscard]] const T* as() const {
    return std::get_if<T>(&v_);
  }
  [[nodiscard]] bool is_undefined() const { return is<undefined>(); }
  [[nodiscard]] bool is_none() const { return is<none_t>(); }
  [[nodiscard]] bool is_string() const { return is<pstring>(); }
  [[nodiscard]] bool is_number() const { return is<int64_t>() || is<double>(); }
  [[nodiscard]] const value_list* list_ptr() const;
  [[nodiscard]] const value_dict* dict_ptr() const;
  /// Numbers, booleans and None read from data print as data.
  [[nodiscard]] bool from_data() const { return from_data_; }

  /// Python truthiness (undefined is false).
  [[nodiscard]] bool truthy() const;
  /// The type's name for error messages ("string", "list", "undefined").
  [[nodiscard]] std::string type_name() const;

private:
  storage v_;
  bool from_data_ = false;
};

/// str(v) as Jinja prints it: undefined -> "", None -> "None", True,
/// 1.5, lists and dicts as Python's repr.
[[nodiscard]] pstring to_pstring(const value& v);
/// Python's repr(v) (strings quoted).
[[nodiscard]] pstring repr(const value& v);
/// Deep equality as Python's ==.
[[nodiscard]] bool equals(const value& a, const value& b);
/// transformers' tojson: json.dumps(v, ensure_ascii=False, indent=indent)
/// (indent < 0: none), keys in their order. Throws render errors for
/// values JSON cannot hold.
[[nodiscard]] pstring to_json(const value& v, int indent);
/// A JSON document as a value; every string, number and boolean in it is
/// marked as data when `from_data`.
/// (ordered_json keeps the keys' order, as Python's json.loads does.)
[[nodiscard]] value from_json(const nlohmann::json& j, bool from_data);
[[nodiscard]] value from_json(const nlohmann::ordered_json& j, bool from_data);

} // namespace tessera::jinja
