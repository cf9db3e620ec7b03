#include "engine/jinja/builtins.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>

#include "engine/jinja/error.hpp"

namespace tessera::jinja {

namespace {

constexpr std::array<std::string_view, 37> filter_names = {
  "trim", "tojson", "length", "count", "items", "first", "last", "upper", "lower",
  "capitalize", "title", "replace", "join", "default", "d", "list", "string", "int",
  "float", "selectattr", "rejectattr", "select", "reject", "map", "safe", "e", "escape",
  "abs", "indent", "unique", "wordcount", "sum", "min", "max", "reverse", "dictsort", "round"};

constexpr std::array<std::string_view, 30> test_names = {
  "defined", "undefined", "none", "string", "mapping", "iterable", "sequence", "number",
  "integer", "float", "boolean", "true", "false", "equalto", "eq", "==", "ne", "!=", "in",
  "odd", "even", "divisibleby", "lower", "upper", "callable", "gt", ">", "lt", "<", "sameas"};

size_t utf8_len(unsigned char b) { return b < 0x80 ? 1 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 1; }

char32_t decode_at(std::string_view s, size_t i, size_t& len) {
  auto b = static_cast<unsigned char>(s[i]);
  len = std::min(utf8_len(b), s.size() - i);
  if (len == 1)
    return b;
  char32_t cp = b & (len == 2 ? 0x1F : len == 3 ? 0x0F : 0x07);
  for (size_t k = 1; k < len; ++k)
    cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  return cp;
}

/// Python's str.isspace().
bool is_py_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0
         || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029
         || c == 0x202F || c == 0x205F || c == 0x3000;
}

/// Byte offsets of each code point of s, plus s.size().
std::vector<size_t> cp_offsets(std::string_view s) {
  std::vector<size_t> out;
  for (size_t i = 0; i < s.size(); i += utf8_len(static_cast<unsigned char>(s[i])))
    out.push_back(i);
  out.push_back(s.size());
  return out;
}

const pstring& need_string(const value& v, const char* what) {
  if (auto* s = v.as<pstring>())
    return *s;
  fail(std::string(what) + " expects a string, got " + v.type_name());
}

int64_t need_int(const value& v, const char* what) {
  if (auto* i = v.as<int64_t>())
    return *i;
  if (auto* b = v.as<bool>())
    return *b ? 1 : 0;
  fail(std::string(what) + " expects an integer, got " + v.type_name());
}

const value* arg(std::vector<value>& args, kwargs& kw, size_t pos, std::string_view name) {
  for (auto& [k, v] : kw)
    if (k == name)
      return &v;
  return pos < args.size() ? &args[pos] : nullptr;
}

pstring map_ascii(const pstring& s, int mode) { // 0 upper, 1 lower, 2 capitalize, 3 title
  pstring out = s;
  bool word_start = true;
  for (size_t i = 0; i < out.text.size(); ++i) {
    char& c = out.text[i];
    const bool alpha = std::isalpha(static_cast<unsigned char>(c)) != 0;
    bool up = mode == 0 || (mode == 2 && i == 0) || (mode == 3 && word_start);
    c = static_cast<char>(up ? std::toupper(static_cast<unsigned char>(c))
                             : std::tolower(static_cast<unsigned char>(c)));
    word_start = !alpha;
  }
  return out;
}

pstring replace(const pstring& s, const pstring& from, const pstring& to, int64_t count) {
  pstring out;
  if (from.empty()) {
    // Python inserts `to` between every character (and at both ends).
    auto offs = cp_offsets(s.text);
    for (size_t k = 0; k + 1 < offs.size(); ++k) {
      if (count < 0 || static_cast<int64_t>(k) < count)
        out.append(to);
      out.append(s.substr(offs[k], offs[k + 1] - offs[k]));
    }
    if (count < 0 || static_cast<int64_t>(offs.size() - 1) < count)
      out.append(to);
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    auto hit = s.text.find(from.text, pos);
    if (hit == std::string::npos)
      break;
    out.append(s.substr(pos, hit - pos));
    out.append(to);
    pos = hit + from.size();
    ++done;
  }
  out.append(s.substr(pos));
  return out;
}

value split(const pstring& s, const value* sep, int64_t maxsplit) {
  value_list parts;
  if (sep == nullptr || sep->is_none()) {
    size_t i = 0;
    const auto& t = s.text;
    auto skip_ws = [&] {
      while (i < t.size()) {
        size_t len = 0;
        if (!is_py_space(decode_at(t, i, len)))
          break;
        i += len;
      }
    };
    skip_ws();
    while (i < t.size()) {
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        size_t end = t.size();
        parts.push_back(value::str(py_strip(s.substr(i, end - i), false, true)));
        return value::list(std::move(parts));
      }
      size_t start = i;
      while (i < t.size()) {
        size_t len = 0;
        if (is_py_space(decode_at(t, i, len)))
          break;
        i += len;
      }
      parts.push_back(value::str(s.substr(start, i - start)));
      skip_ws();
    }
    return value::list(std::move(parts));
  }
  const auto& d = need_string(*sep, "split");
  if (d.empty())
    fail("split: empty separator");
  size_t pos = 0;
  while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
    auto hit = s.text.find(d.text, pos);
    if (hit == std::string::npos)
      break;
    parts.push_back(value::str(s.substr(pos, hit - pos)));
    pos = hit + d.size();
  }
  parts.push_back(value::str(s.substr(pos)));
  return value::list(std::move(parts));
}

bool affix(const pstring& s, const value& what, bool prefix) {
  auto one = [&](const value& v) {
    const auto& a = need_string(v, prefix ? "startswith" : "endswith").text;
    return prefix ? s.text.starts_with(a) : s.text.ends_with(a);
  };
  if (auto* l = what.list_ptr())
    return std::any_of(l->begin(), l->end(), one);
  return one(what);
}

pstring join(const value& seq, const pstring& sep, const value* attribute) {
  pstring out;
  bool first = true;
  for (const auto& item : iterate(seq)) {
    if (!first)
      out.append(sep);
    first = false;
    out.append(to_pstring(attribute != nullptr ? get_attr(item, to_pstring(*attribute).text) : item));
  }
  return out;
}

value list_of_pairs(const value_dict& d) {
  value_list out;
  for (const auto& [k, v] : d.entries)
    out.push_back(value::list({value::str(k), v}));
  return value::list(std::move(out));
}

/// A dotted attribute path ("function.name") of item.
value attr_path(const value& item, const std::string& path) {
  value cur = item;
  size_t pos = 0;
  while (true) {
    auto dot = path.find('.', pos);
    auto part = path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    if (cur.is_undefined())
      return cur;
    cur = get_item(cur, value::str(part));
    if (dot == std::string::npos)
      return cur;
    pos = dot + 1;
  }
}

double as_double(const value& v) {
  if (auto* i = v.as<int64_t>())
    return static_cast<double>(*i);
  if (auto* d = v.as<double>())
    return *d;
  if (auto* b = v.as<bool>())
    return *b ? 1 : 0;
  fail("expected a number, got " + v.type_name());
}

value bound(const value& self, const std::string& name) {
  return value::function([self, name](std::vector<value>& args, kwargs& kw) -> value {
    const value* a0 = arg(args, kw, 0, "");
    if (auto* s = self.as<pstring>()) {
      if (name == "strip" || name == "lstrip" || name == "rstrip") {
        const pstring* chars = a0 != nullptr && !a0->is_none() ? &need_string(*a0, name.c_str()) : nullptr;
        return value::str(py_strip(*s, name != "rstrip", name != "lstrip", chars));
      }
      if (name == "split") {
        const value* m = arg(args, kw, 1, "maxsplit");
        return split(*s, arg(args, kw, 0, "sep"), m != nullptr ? need_int(*m, "split") : -1);
      }
      if (name == "startswith" || name == "endswith") {
        if (a0 == nullptr)
          fail(name + " takes an argument");
        return value{affix(*s, *a0, name == "startswith")};
      }
      if (name == "upper" || name == "lower" || name == "capitalize" || name == "title")
        return value::str(map_ascii(*s, name == "upper" ? 0 : name == "lower" ? 1
                                               : name == "capitalize" ? 2 : 3));
      if (name == "replace") {
        if (args.size() < 2)
          fail("replace takes two arguments");
        const value* c = arg(args, kw, 2, "count");
        return value::str(replace(*s, need_string(args[0], "replace"),
                                  need_string(args[1], "replace"),
                                  c != nullptr ? need_int(*c, "replace") : -1));
      }
      if (name == "find" || name == "count") {
        if (a0 == nullptr)
          fail(name + " takes an argument");
        const auto& n = need_string(*a0, name.c_str()).text;
        if (name == "find") {
          auto hit = s->text.find(n);
          return value{hit == std::string::npos ? int64_t{-1}
                                                : static_cast<int64_t>(cp_offsets(s->text.substr(0, hit)).size() - 1)};
        }
        if (n.empty())
          return value{static_cast<int64_t>(cp_offsets(s->text).size())};
        int64_t c = 0;
        for (auto p = s->text.find(n); p != std::string::npos; p = s->text.find(n, p + n.size()))
          ++c;
        return value{c};
      }
      if (name == "join") {
        if (a0 == nullptr)
          fail("join takes an argument");
        return value::str(join(*a0, *s, nullptr));
      }
    }
    if (auto* d = self.dict_ptr()) {
      if (name == "items")
        return list_of_pairs(*d);
      if (name == "keys" || name == "values") {
        value_list out;
        for (const auto& [k, v] : d->entries)
          out.push_back(name == "keys" ? value::str(k) : v);
        return value::list(std::move(out));
      }
      if (name == "get") {
        if (a0 == nullptr)
          fail("get takes a key");
        if (auto* v = d->find(to_pstring(*a0).text); v != nullptr && a0->is_string())
          return *v;
        const value* def = arg(args, kw, 1, "default");
        return def != nullptr ? *def : value::none();
      }
    }
    fail("unsupported method '" + name + "' of a " + self.type_name());
  });
}

bool is_string_method(const std::string& n) {
  static constexpr std::string_view names[] = {
    "strip", "lstrip", "rstrip", "split", "startswith", "endswith", "upper", "lower",
    "capitalize", "title", "replace", "find", "count", "join"};
  return std::find(std::begin(names), std::end(names), n) != std::end(names);
}

pstring html_escape(const pstring& s) {
  pstring out;
  for (size_t i = 0; i < s.size(); ++i) {
    const bool d = s.mask[i] != 0;
    switch (s.text[i]) {
      case '&': out.append("&amp;", d); break;
      case '<': out.append("&lt;", d); break;
      case '>': out.append("&gt;", d); break;
      case '"': out.append("&#34;", d); break;
      case '\'': out.append("&#39;", d); break;
      default: out.append(std::string_view(&s.text[i], 1), d);
    }
  }
  return out;
}

} // namespace

int compare_values(const value& a, const value& b) {
  if (a.is_number() && b.is_number()) {
    double x = as_double(a);
    double y = as_double(b);
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string())
    return a.as<pstring>()->text.compare(b.as<pstring>()->text);
  fail("cannot compare a " + a.type_name() + " with a " + b.type_name());
}

bool is_known_filter(std::string_view name) {
  return std::find(filter_names.begin(), filter_names.end(), name) != filter_names.end();
}

bool is_known_test(std::string_view name) {
  return std::find(test_names.begin(), test_names.end(), name) != test_names.end();
}

pstring py_strip(const pstring& s, bool left, bool right, const pstring* chars) {
  auto strip_cp = [&](char32_t c, std::string_view bytes) {
    if (chars == nullptr)
      return is_py_space(c);
    return chars->text.find(bytes) != std::string::npos;
  };
  const auto& t = s.text;
  size_t begin = 0;
  if (left) {
    while (begin < t.size()) {
      size_t len = 0;
      char32_t c = decode_at(t, begin, len);
      if (!strip_cp(c, std::string_view(t).substr(begin, len)))
        break;
      begin += len;
    }
  }
  size_t end = t.size();
  if (right) {
    while (end > begin) {
      size_t start = end - 1;
      while (start > begin && (static_cast<unsigned char>(t[start]) & 0xC0) == 0x80)
        --start;
      size_t len = 0;
      char32_t c = decode_at(t, start, len);
      if (!strip_cp(c, std::string_view(t).substr(start, end - start)))
        break;
      end = start;
    }
  }
  return s.substr(begin, end - begin);
}

value_list iterate(const value& v) {
  if (v.is_undefined() || v.is_none())
    return {};
  if (auto* l = v.list_ptr())
    return *l;
  if (v.is<std::shared_ptr<value_dict>>()) {
    value_list out;
    for (const auto& [k, val] : v.dict_ptr()->entries)
      out.push_back(value::str(k));
    return out;
  }
  if (auto* s = v.as<pstring>()) {
    value_list out;
    auto offs = cp_offsets(s->text);
    for (size_t k = 0; k + 1 < offs.size(); ++k)
      out.push_back(value::str(s->substr(offs[k], offs[k + 1] - offs[k])));
    return out;
  }
  fail("a " + v.type_name() + " is not iterable");
}

value get_attr(const value& obj, const std::string& name) {
  if (auto* u = obj.as<undefined>())
    fail("'" + (u->name.empty() ? std::string{"value"} : u->name) + "' is undefined (reading ."
         + name + ")");
  if (obj.is<std::shared_ptr<value_dict>>()) {
    if (name == "items" || name == "keys" || name == "values" || name == "get")
      return bound(obj, name);
  }
  if (auto* d = obj.dict_ptr()) {
    if (auto* v = d->find(name))
      return *v;
    return value::undef(name);
  }
  if (obj.is_string() && is_string_method(name))
    return bound(obj, name);
  return value::undef(name);
}

value get_item(const value& obj, const value& key) {
  if (auto* u = obj.as<undefined>())
    fail("'" + (u->name.empty() ? std::string{"value"} : u->name) + "' is undefined (reading ["
         + repr(key).text + "])");
  if (auto* d = obj.dict_ptr()) {
    if (auto* k = key.as<pstring>())
      if (auto* v = d->find(k->text))
        return *v;
    return value::undef(key.is_string() ? key.as<pstring>()->text : repr(key).text);
  }
  if (key.is<int64_t>() || key.is<bool>()) {
    int64_t i = need_int(key, "an index");
    if (auto* l = obj.list_ptr()) {
      auto n = static_cast<int64_t>(l->size());
      if (i < 0)
        i += n;
      if (i < 0 || i >= n)
        return value::undef("[" + std::to_string(i) + "]");
      return (*l)[static_cast<size_t>(i)];
    }
    if (auto* s = obj.as<pstring>()) {
      auto offs = cp_offsets(s->text);
      auto n = static_cast<int64_t>(offs.size()) - 1;
      if (i < 0)
        i += n;
      if (i < 0 || i >= n)
        return value::undef("[" + std::to_string(i) + "]");
      auto u = static_cast<size_t>(i);
      return value::str(s->substr(offs[u], offs[u + 1] - offs[u]));
    }
  }
  if (auto* k = key.as<pstring>())
    return get_attr(obj, k->text);
  return value::undef(repr(key).text);
}

value get_slice(const value& obj, const value& start, const value& stop, const value& step) {
  int64_t st = step.is_none() || step.is_undefined() ? 1 : need_int(step, "a slice step");
  if (st == 0)
    fail("slice step cannot be zero");
  value_list items;
  const pstring* s = obj.as<pstring>();
  std::vector<size_t> offs;
  int64_t n = 0;
  if (s != nullptr) {
    offs = cp_offsets(s->text);
    n = static_cast<int64_t>(offs.size()) - 1;
  } else if (auto* l = obj.list_ptr()) {
    n = static_cast<int64_t>(l->size());
  } else if (obj.is_undefined()) {
    fail("'" + obj.as<undefined>()->name + "' is undefined (slicing it)");
  } else {
    fail("cannot slice a " + obj.type_name());
  }
  auto bound_of = [&](const value& v, int64_t def) {
    if (v.is_none() || v.is_undefined())
      return def;
    int64_t i = need_int(v, "a slice bound");
    if (i < 0)
      i += n;
    if (st > 0)
      return std::clamp<int64_t>(i, 0, n);
    return std::clamp<int64_t>(i, -1, n - 1);
  };
  int64_t a = bound_of(start, st > 0 ? 0 : n - 1);
  int64_t b = bound_of(stop, st > 0 ? n : -1);
  std::vector<int64_t> idx;
  for (int64_t i = a; st > 0 ? i < b : i > b; i += st)
    idx.push_back(i);
  if (s != nullptr) {
    pstring out;
    for (auto i : idx) {
      auto u = static_cast<size_t>(i);
      out.append(s->substr(offs[u], offs[u + 1] - offs[u]));
    }
    return value::str(std::move(out));
  }
  const auto* l = obj.list_ptr();
  for (auto i : idx)
    items.push_back((*l)[static_cast<size_t>(i)]);
  return value::list(std::move(items));
}

bool contains(const value& haystack, const value& needle) {
  if (auto* s = haystack.as<pstring>())
    return s->text.find(need_string(needle, "'in' on a string").text) != std::string::npos;
  if (auto* l = haystack.list_ptr())
    return std::any_of(l->begin(), l->end(), [&](const value& v) { return equals(v, needle); });
  if (auto* d = haystack.dict_ptr())
    return needle.is_string() && d->find(needle.as<pstring>()->text) != nullptr;
  if (haystack.is_undefined())
    fail("'" + haystack.as<undefined>()->name + "' is undefined (testing 'in' it)");
  fail("'in' needs a string, list or dict on the right, got " + haystack.type_name());
}

bool apply_test(const std::string& name, const value& v, std::vector<value>& args) {
  auto need_arg = [&]() -> const value& {
    if (args.empty())
      fail("test '" + name + "' takes an argument");
    return args[0];
  };
  if (name == "defined")
    return !v.is_undefined();
  if (name == "undefined")
    return v.is_undefined();
  if (name == "none")
    return v.is_none();
  if (name == "string")
    return v.is_string();
  if (name == "mapping")
    return v.is<std::shared_ptr<value_dict>>();
  if (name == "iterable")
    return v.is_string() || v.list_ptr() != nullptr || v.is<std::shared_ptr<value_dict>>();
  if (name == "sequence")
    return v.is_string() || v.list_ptr() != nullptr || v.is<std::shared_ptr<value_dict>>();
  if (name == "number")
    return v.is_number();
  if (name == "integer")
    return v.is<int64_t>();
  if (name == "float")
    return v.is<double>();
  if (name == "boolean")
    return v.is<bool>();
  if (name == "true")
    return v.is<bool>() && *v.as<bool>();
  if (name == "false")
    return v.is<bool>() && !*v.as<bool>();
  if (name == "callable")
    return v.is<std::shared_ptr<callable>>();
  if (name == "equalto" || name == "eq" || name == "==")
    return equals(v, need_arg());
  if (name == "ne" || name == "!=")
    return !equals(v, need_arg());
  if (name == "sameas") {
    const auto& o = need_arg();
    return v.get().index() == o.get().index() && equals(v, o);
  }
  if (name == "gt" || name == ">")
    return compare_values(v, need_arg()) > 0;
  if (name == "lt" || name == "<")
    return compare_values(v, need_arg()) < 0;
  if (name == "in")
    return contains(need_arg(), v);
  if (name == "odd" || name == "even")
    return (need_int(v, name.c_str()) % 2 != 0) == (name == "odd");
  if (name == "divisibleby") {
    auto d = need_int(need_arg(), "divisibleby");
    if (d == 0)
      fail("divisibleby 0");
    return need_int(v, "divisibleby") % d == 0;
  }
  if (name == "lower" || name == "upper") {
    const auto& t = need_string(v, name.c_str()).text;
    return std::none_of(t.begin(), t.end(), [&](char c) {
      return name == "lower" ? std::isupper(static_cast<unsigned char>(c)) != 0
                             : std::islower(static_cast<unsigned char>(c)) != 0;
    });
  }
  fail("unsupported test '" + name + "'");
}

value apply_filter(const std::string& name, const value& v, std::vector<value>& args,
                   kwargs& kw) {
  if (name == "safe")
    return v;
  if (name == "trim") {
    const value* chars = arg(args, kw, 0, "chars");
    return value::str(py_strip(need_string(v, "trim"), true, true,
                               chars != nullptr && !chars->is_none() ? &need_string(*chars, "trim") : nullptr));
  }
  if (name == "tojson") {
    const value* ind = arg(args, kw, 0, "indent");
    for (const auto& [k, val] : kw)
      if (k != "indent" && !(k == "ensure_ascii" && !val.truthy()))
        fail("tojson: unsupported argument '" + k + "'");
    return value::str(to_json(v, ind != nullptr && !ind->is_none() ? static_cast<int>(need_int(*ind, "tojson indent")) : -1));
  }
  if (name == "length" || name == "count") {
    if (v.is_undefined())
      return value{int64_t{0}};
    if (auto* s = v.as<pstring>())
      return value{static_cast<int64_t>(cp_offsets(s->text).size() - 1)};
    if (auto* l = v.list_ptr())
      return value{static_cast<int64_t>(l->size())};
    if (auto* d = v.dict_ptr())
      return value{static_cast<int64_t>(d->entries.size())};
    fail("length of a " + v.type_name());
  }
  if (name == "items") {
    if (v.is_undefined())
      return value::list();
    if (auto* d = v.dict_ptr())
      return list_of_pairs(*d);
    fail("items of a " + v.type_name());
  }
  if (name == "first" || name == "last") {
    auto items = iterate(v);
    if (items.empty())
      return value::undef(name);
    return name == "first" ? items.front() : items.back();
  }
  if (name == "upper" || name == "lower" || name == "capitalize" || name == "title") {
    pstring s = to_pstring(v);
    return value::str(map_ascii(s, name == "upper" ? 0 : name == "lower" ? 1
                                      : name == "capitalize" ? 2 : 3));
  }
  if (name == "replace") {
    if (args.size() < 2)
      fail("replace takes two arguments");
    const value* c = arg(args, kw, 2, "count");
    return value::str(replace(to_pstring(v), need_string(args[0], "replace"),
                              need_string(args[1], "replace"), c != nullptr ? need_int(*c, "replace") : -1));
  }
  if (name == "join") {
    const value* sep = arg(args, kw, 0, "d");
    const value* attribute = arg(args, kw, 1, "attribute");
    return value::str(join(v, sep != nullptr ? need_string(*sep, "join") : pstring{}, attribute));
  }
  if (name == "default" || name == "d") {
    const value* def = arg(args, kw, 0, "default_value");
    const value* boolean = arg(args, kw, 1, "boolean");
    const bool use_default = v.is_undefined() || (boolean != nullptr && boolean->truthy() && !v.truthy());
    if (use_default)
      return def != nullptr ? *def : value::str("");
    return v;
  }
  if (name == "list")
    return value::list(iterate(v));
  if (name == "reverse") {
    if (v.is_string())
      return get_slice(v, value::none(), value::none(), value{int64_t{-1}});
    auto items = iterate(v);
    std::reverse(items.begin(), items.end());
    return value::list(std::move(items));
  }
  if (name == "string")
    return value::str(to_pstring(v));
  if (name == "int" || name == "float") {
    const value* def = arg(args, kw, 0, "default");
    value fallback = def != nullptr ? *def : (name == "int" ? value{int64_t{0}} : value{0.0});
    double d = 0;
    if (v.is_number() || v.is<bool>()) {
      d = as_double(v);
    } else if (auto* s = v.as<pstring>()) {
      auto t = py_strip(*s, true, true).text;
      char* end = nullptr;
      d = std::strtod(t.c_str(), &end);
      if (t.empty() || end != t.c_str() + t.size())
        return fallback;
    } else {
      return fallback;
    }
    if (name == "int")
      return v.is<int64_t>() ? v : value{static_cast<int64_t>(std::trunc(d))};
    return value{d};
  }
  if (name == "abs") {
    if (auto* i = v.as<int64_t>())
      return value{*i < 0 ? -*i : *i};
    return value{std::fabs(as_double(v))};
  }
  if (name == "round") {
    const value* p = arg(args, kw, 0, "precision");
    double scale = std::pow(10.0, p != nullptr ? static_cast<double>(need_int(*p, "round")) : 0.0);
    return value{std::nearbyint(as_double(v) * scale) / scale};
  }
  if (name == "sum" || name == "min" || name == "max") {
    auto items = iterate(v);
    if (name == "sum") {
      value acc{int64_t{0}};
      for (auto& it : items)
        acc = acc.is<int64_t>() && it.is<int64_t>()
                ? value{*acc.as<int64_t>() + *it.as<int64_t>()}
                : value{as_double(acc) + as_double(it)};
      return acc;
    }
    if (items.empty())
      return value::undef(name);
    value best = items[0];
    for (auto& it : items)
      if ((compare_values(it, best) < 0) == (name == "min") && compare_values(it, best) != 0)
        best = it;
    return best;
  }
  if (name == "unique") {
    value_list out;
    for (auto& it : iterate(v))
      if (std::none_of(out.begin(), out.end(), [&](const value& o) { return equals(o, it); }))
        out.push_back(it);
    return value::list(std::move(out));
  }
  if (name == "dictsort") {
    auto* d = v.dict_ptr();
    if (d == nullptr)
      fail("dictsort of a " + v.type_name());
    auto entries = d->entries;
    std::stable_sort(entries.begin(), entries.end(),
                     [](const auto& a, const auto& b) { return a.first.text < b.first.text; });
    value_dict sorted;
    sorted.entries = std::move(entries);
    return list_of_pairs(sorted);
  }
  if (name == "wordcount")
    return value{static_cast<int64_t>(split(to_pstring(v), nullptr, -1).list_ptr()->size())};
  if (name == "indent") {
    const value* w = arg(args, kw, 0, "width");
    const value* first = arg(args, kw, 1, "first");
    pstring pad(std::string(static_cast<size_t>(w != nullptr ? need_int(*w, "indent") : 4), ' '));
    pstring s = to_pstring(v);
    pstring out;
    if (first != nullptr && first->truthy())
      out.append(pad);
    for (size_t i = 0; i < s.size(); ++i) {
      out.append(s.substr(i, 1));
      if (s.text[i] == '\n' && i + 1 < s.size() && s.text[i + 1] != '\n')
        out.append(pad);
    }
    return value::str(std::move(out));
  }
  if (name == "e" || name == "escape")
    return value::str(html_escape(to_pstring(v)));
  if (name == "selectattr" || name == "rejectattr" || name == "select" || name == "reject") {
    const bool by_attr = name.ends_with("attr");
    const bool keep = name.starts_with("select");
    size_t a = 0;
    std::string attr;
    if (by_attr) {
      if (args.empty())
        fail(name + " takes an attribute name");
      attr = need_string(args[0], name.c_str()).text;
      a = 1;
    }
    std::string test = args.size() > a ? need_string(args[a], name.c_str()).text : std::string{};
    if (!test.empty() && !is_known_test(test))
      fail(name + ": unsupported test '" + test + "'");
    std::vector<value> test_args(args.begin() + static_cast<long>(std::min(args.size(), a + 1)), args.end());
    value_list out;
    for (auto& it : iterate(v)) {
      value subject = by_attr ? attr_path(it, attr) : it;
      bool ok = test.empty() ? subject.truthy() : apply_test(test, subject, test_args);
      if (ok == keep)
        out.push_back(it);
    }
    return value::list(std::move(out));
  }
  if (name == "map") {
    const value* attribute = arg(args, kw, SIZE_MAX, "attribute");
    value_list out;
    if (attribute != nullptr) {
      const value* def = arg(args, kw, SIZE_MAX, "default");
      auto path = need_string(*attribute, "map").text;
      for (auto& it : iterate(v)) {
        value r = attr_path(it, path);
        out.push_back(r.is_undefined() && def != nullptr ? *def : r);
      }
      return value::list(std::move(out));
    }
    if (args.empty())
      fail("map takes a filter name or attribute=");
    auto filter = need_string(args[0], "map").text;
    if (!is_known_filter(filter) || filter == "map")
      fail("map: unsupported filter '" + filter + "'");
    std::vector<value> rest(args.begin() + 1, args.end());
    for (auto& it : iterate(v)) {
      auto a2 = rest;
      auto k2 = kw;
      out.push_back(apply_filter(filter, it, a2, k2));
    }
    return value::list(std::move(out));
  }
  fail("unsupported filter '" + name + "'");
}

} // namespace tessera::jinja
