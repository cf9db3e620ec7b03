#include "engine/jinja/value.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "engine/jinja/error.hpp"

namespace tessera::jinja {

const value* value_dict::find(std::string_view key) const {
  for (const auto& [k, v] : entries)
    if (k.text == key)
      return &v;
  return nullptr;
}

value* value_dict::find(std::string_view key) {
  for (auto& [k, v] : entries)
    if (k.text == key)
      return &v;
  return nullptr;
}

void value_dict::set(pstring key, value v) {
  if (auto* existing = find(key.text)) {
    *existing = std::move(v);
    return;
  }
  entries.emplace_back(std::move(key), std::move(v));
}

const value_list* value::list_ptr() const {
  if (auto* l = as<std::shared_ptr<value_list>>())
    return l->get();
  return nullptr;
}

const value_dict* value::dict_ptr() const {
  if (auto* d = as<std::shared_ptr<value_dict>>())
    return d->get();
  if (auto* n = as<std::shared_ptr<namespace_obj>>())
    return &(*n)->attrs;
  return nullptr;
}

bool value::truthy() const {
  struct visitor {
    bool operator()(const undefined&) const { return false; }
    bool operator()(const none_t&) const { return false; }
    bool operator()(bool b) const { return b; }
    bool operator()(int64_t i) const { return i != 0; }
    bool operator()(double d) const { return d != 0.0; }
    bool operator()(const pstring& s) const { return !s.empty(); }
    bool operator()(const std::shared_ptr<value_list>& l) const { return !l->empty(); }
    bool operator()(const std::shared_ptr<value_dict>& d) const { return !d->entries.empty(); }
    bool operator()(const std::shared_ptr<namespace_obj>&) const { return true; }
    bool operator()(const std::shared_ptr<callable>&) const { return true; }
  };
  return std::visit(visitor{}, v_);
}

std::string value::type_name() const {
  static constexpr const char* names[] = {"undefined", "none",  "boolean",   "integer", "float",
                                          "string",    "list",  "dict",      "namespace",
                                          "function"};
  return names[v_.index()];
}

namespace {

/// Python's repr of a float: the shortest digits that read back the same,
/// fixed notation for exponents -4..15 (with ".0" on integers), else
/// scientific ("1e+16").
std::string float_repr(double d) {
  if (std::isnan(d))
    return "nan";
  if (std::isinf(d))
    return d > 0 ? "inf" : "-inf";
  char buf[64];
  int prec = 0;
  for (; prec < 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*e", prec, d);
    if (std::strtod(buf, nullptr) == d)
      break;
  }
  std::string s = buf; // [-]d.ddde[+-]XX
  const bool neg = s[0] == '-';
  if (neg)
    s.erase(0, 1);
  const auto e = s.find('e');
  const int exp = std::stoi(s.substr(e + 1));
  std::string digits = s.substr(0, 1) + (e > 2 ? s.substr(2, e - 2) : std::string{});
  while (digits.size() > 1 && digits.back() == '0')
    digits.pop_back();
  std::string out;
  if (exp >= -4 && exp < 16) {
    if (exp < 0) {
      out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
    } else if (static_cast<size_t>(exp) + 1 >= digits.size()) {
      out = digits + std::string(static_cast<size_t>(exp) + 1 - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, static_cast<size_t>(exp) + 1) + "."
            + digits.substr(static_cast<size_t>(exp) + 1);
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1)
      out += "." + digits.substr(1);
    const int a = exp < 0 ? -exp : exp;
    out += std::string("e") + (exp < 0 ? '-' : '+') + (a < 10 ? "0" : "") + std::to_string(a);
  }
  return neg ? "-" + out : out;
}

void repr_into(const value& v, pstring& out, bool top_level_str);

void repr_string(const pstring& s, pstring& out) {
  const bool dq = s.text.find('\'') != std::string::npos && s.text.find('"') == std::string::npos;
  const char q = dq ? '"' : '\'';
  out.append(std::string_view(&q, 1));
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s.text[i];
    const bool d = s.mask[i] != 0;
    switch (c) {
      case '\\': out.append("\\\\", d); break;
      case '\n': out.append("\\n", d); break;
      case '\r': out.append("\\r", d); break;
      case '\t': out.append("\\t", d); break;
      default:
        if (c == q)
          out.append(std::string{'\\', c}, d);
        else
          out.append(std::string_view(&c, 1), d);
    }
  }
  out.append(std::string_view(&q, 1));
}

void repr_into(const value& v, pstring& out, bool top_level_str) {
  const bool d = v.from_data();
  if (v.is_undefined())
    return;
  if (v.is_none()) {
    out.append("None", d);
  } else if (auto* b = v.as<bool>()) {
    out.append(*b ? "True" : "False", d);
  } else if (auto* i = v.as<int64_t>()) {
    out.append(std::to_string(*i), d);
  } else if (auto* f = v.as<double>()) {
    out.append(float_repr(*f), d);
  } else if (auto* s = v.as<pstring>()) {
    if (top_level_str)
      out.append(*s);
    else
      repr_string(*s, out);
  } else if (auto* l = v.list_ptr()) {
    out.append("[");
    for (size_t k = 0; k < l->size(); ++k) {
      if (k > 0)
        out.append(", ");
      repr_into((*l)[k], out, false);
    }
    out.append("]");
  } else if (v.is<std::shared_ptr<namespace_obj>>()) {
    out.append("<Namespace>");
  } else if (auto* m = v.dict_ptr()) {
    out.append("{");
    bool first = true;
    for (const auto& [k, val] : m->entries) {
      if (!first)
        out.append(", ");
      first = false;
      repr_string(k, out);
      out.append(": ");
      repr_into(val, out, false);
    }
    out.append("}");
  } else {
    out.append("<function>");
  }
}

void json_string(const pstring& s, pstring& out) {
  out.append("\"");
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s.text[i]);
    const bool d = s.mask[i] != 0;
    switch (c) {
      case '"': out.append("\\\"", d); break;
      case '\\': out.append("\\\\", d); break;
      case '\n': out.append("\\n", d); break;
      case '\r': out.append("\\r", d); break;
      case '\t': out.append("\\t", d); break;
      case '\b': out.append("\\b", d); break;
      case '\f': out.append("\\f", d); break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out.append(buf, d);
        } else {
          out.append(std::string_view(&s.text[i], 1), d);
        }
    }
  }
  out.append("\"");
}

void json_into(const value& v, pstring& out, int indent, int depth) {
  if (depth > 512)
    fail("tojson: nesting deeper than 512");
  const bool d = v.from_data();
  auto newline = [&](int level) {
    out.append("\n");
    out.append(std::string(static_cast<size_t>(indent * level), ' '));
  };
  if (v.is_undefined())
    fail("tojson: undefined value" + (v.as<undefined>()->name.empty()
                                        ? std::string{}
                                        : " '" + v.as<undefined>()->name + "'"));
  if (v.is_none()) {
    out.append("null", d);
  } else if (auto* b = v.as<bool>()) {
    out.append(*b ? "true" : "false", d);
  } else if (auto* i = v.as<int64_t>()) {
    out.append(std::to_string(*i), d);
  } else if (auto* f = v.as<double>()) {
    auto s = float_repr(*f);
    if (s == "nan")
      s = "NaN";
    else if (s == "inf")
      s = "Infinity";
    else if (s == "-inf")
      s = "-Infinity";
    out.append(s, d);
  } else if (auto* s = v.as<pstring>()) {
    json_string(*s, out);
  } else if (auto* l = v.list_ptr()) {
    if (l->empty()) {
      out.append("[]");
      return;
    }
    out.append("[");
    for (size_t k = 0; k < l->size(); ++k) {
      if (k > 0)
        out.append(indent >= 0 ? "," : ", ");
      if (indent >= 0)
        newline(depth + 1);
      json_into((*l)[k], out, indent, depth + 1);
    }
    if (indent >= 0)
      newline(depth);
    out.append("]");
  } else if (auto* m = v.dict_ptr()) {
    if (m->entries.empty()) {
      out.append("{}");
      return;
    }
    out.append("{");
    bool first = true;
    for (const auto& [k, val] : m->entries) {
      if (!first)
        out.append(indent >= 0 ? "," : ", ");
      first = false;
      if (indent >= 0)
        newline(depth + 1);
      json_string(k, out);
      out.append(": ");
      json_into(val, out, indent, depth + 1);
    }
    if (indent >= 0)
      newline(depth);
    out.append("}");
  } else {
    fail("tojson: a " + v.type_name() + " is not JSON serializable");
  }
}

} // namespace

pstring to_pstring(const value& v) {
  pstring out;
  repr_into(v, out, true);
  return out;
}

pstring repr(const value& v) {
  pstring out;
  repr_into(v, out, false);
  return out;
}

bool equals(const value& a, const value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is<int64_t>() && b.is<int64_t>())
      return *a.as<int64_t>() == *b.as<int64_t>();
    auto x = a.is<int64_t>() ? static_cast<double>(*a.as<int64_t>()) : *a.as<double>();
    auto y = b.is<int64_t>() ? static_cast<double>(*b.as<int64_t>()) : *b.as<double>();
    return x == y;
  }
  // Python: True == 1.
  if (a.is<bool>() && b.is_number())
    return equals(value{int64_t{*a.as<bool>() ? 1 : 0}}, b);
  if (b.is<bool>() && a.is_number())
    return equals(a, value{int64_t{*b.as<bool>() ? 1 : 0}});
  if (a.get().index() != b.get().index()) {
    // A dict and a namespace are never equal; a list and a list are.
    return false;
  }
  if (a.is_undefined() || a.is_none())
    return true;
  if (auto* x = a.as<bool>())
    return *x == *b.as<bool>();
  if (auto* s = a.as<pstring>())
    return s->text == b.as<pstring>()->text;
  if (auto* l = a.list_ptr()) {
    auto* r = b.list_ptr();
    if (l->size() != r->size())
      return false;
    for (size_t i = 0; i < l->size(); ++i)
      if (!equals((*l)[i], (*r)[i]))
        return false;
    return true;
  }
  if (a.is<std::shared_ptr<value_dict>>()) {
    auto* x = a.dict_ptr();
    auto* y = b.dict_ptr();
    if (x->entries.size() != y->entries.size())
      return false;
    for (const auto& [k, v] : x->entries) {
      auto* o = y->find(k.text);
      if (o == nullptr || !equals(v, *o))
        return false;
    }
    return true;
  }
  if (auto* n = a.as<std::shared_ptr<namespace_obj>>())
    return n->get() == b.as<std::shared_ptr<namespace_obj>>()->get();
  return a.as<std::shared_ptr<callable>>()->get() == b.as<std::shared_ptr<callable>>()->get();
}

pstring to_json(const value& v, int indent) {
  pstring out;
  json_into(v, out, indent, 0);
  return out;
}

namespace {

template <class Json>
value from_json_impl(const Json& j, bool from_data) {
  switch (j.type()) {
    case nlohmann::json::value_t::null: return value::none(from_data);
    case nlohmann::json::value_t::boolean: return value{j.template get<bool>(), from_data};
    case nlohmann::json::value_t::number_integer: return value{j.template get<int64_t>(), from_data};
    case nlohmann::json::value_t::number_unsigned:
      return value{static_cast<int64_t>(j.template get<uint64_t>()), from_data};
    case nlohmann::json::value_t::number_float: return value{j.template get<double>(), from_data};
    case nlohmann::json::value_t::string: return value::str(j.template get<std::string>(), from_data);
    case nlohmann::json::value_t::array: {
      value_list items;
      items.reserve(j.size());
      for (const auto& e : j)
        items.push_back(from_json_impl(e, from_data));
      return value::list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      value_dict d;
      for (const auto& [k, e] : j.items())
        d.entries.emplace_back(pstring(k, from_data), from_json_impl(e, from_data));
      return value::dict(std::move(d));
    }
    default: return value::none(from_data);
  }
}

} // namespace

value from_json(const nlohmann::json& j, bool from_data) { return from_json_impl(j, from_data); }

value from_json(const nlohmann::ordered_json& j, bool from_data) {
  return from_json_impl(j, from_data);
}

} // namespace tessera::jinja
