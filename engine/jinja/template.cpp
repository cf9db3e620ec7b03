#include "engine/jinja/template.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ctime>
#include <unordered_map>

#include "engine/jinja/ast.hpp"
#include "engine/jinja/builtins.hpp"

namespace tessera::jinja {

namespace {

enum class flow { normal, break_, continue_ };

constexpr int max_call_depth = 64;
constexpr int64_t max_range = 100000;

using scope = std::unordered_map<std::string, value>;

/// Executes a program's statements. Lives for one render.
class evaluator {
public:
  explicit evaluator(scope root) { scopes_.push_back(std::move(root)); }

  pstring run(const body& b) {
    pstring out;
    exec(b, out);
    return out;
  }

private:
  flow exec(const body& b, pstring& out) {
    for (const auto& s : b) {
      auto f = exec_one(*s, out);
      if (f != flow::normal)
        return f;
      if (out.size() > max_output_bytes)
        fail("the output passed " + std::to_string(max_output_bytes) + " bytes");
    }
    return flow::normal;
  }

  flow exec_one(const stmt& s, pstring& out) {
    try {
      switch (s.k) {
        case stmt::kind::text: out.append(s.text); return flow::normal;
        case stmt::kind::output: out.append(to_pstring(eval(*s.e))); return flow::normal;
        case stmt::kind::if_:
          for (const auto& [cond, blk] : s.branches)
            if (!cond || eval(*cond).truthy())
              return exec(blk, out);
          return flow::normal;
        case stmt::kind::for_: exec_for(s, out); return flow::normal;
        case stmt::kind::set: exec_set(s); return flow::normal;
        case stmt::kind::macro: define_macro(s); return flow::normal;
        case stmt::kind::break_: return flow::break_;
        case stmt::kind::continue_: return flow::continue_;
        case stmt::kind::generation: return exec(s.block, out);
      }
    } catch (jinja_error& e) {
      locate(e, s.pos);
      throw;
    }
    return flow::normal;
  }

  void assign(const std::vector<std::string>& targets, const value& v) {
    if (targets.size() == 1) {
      scopes_.back()[targets[0]] = v;
      return;
    }
    auto items = iterate(v);
    if (items.size() != targets.size())
      fail("cannot unpack " + std::to_string(items.size()) + " values into "
           + std::to_string(targets.size()) + " names");
    for (size_t i = 0; i < targets.size(); ++i)
      scopes_.back()[targets[i]] = items[i];
  }

  void exec_for(const stmt& s, pstring& out) {
    value_list items = iterate(eval(*s.e));
    if (s.filter) {
      value_list kept;
      for (auto& it : items) {
        scopes_.emplace_back();
        assign(s.targets, it);
        bool ok = eval(*s.filter).truthy();
        scopes_.pop_back();
        if (ok)
          kept.push_back(std::move(it));
      }
      items = std::move(kept);
    }
    if (items.empty()) {
      exec(s.else_block, out);
      return;
    }
    const auto n = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < n; ++i) {
      value_dict loop;
      loop.set(pstring("index"), value{i + 1});
      loop.set(pstring("index0"), value{i});
      loop.set(pstring("revindex"), value{n - i});
      loop.set(pstring("revindex0"), value{n - i - 1});
      loop.set(pstring("first"), value{i == 0});
      loop.set(pstring("last"), value{i == n - 1});
      loop.set(pstring("length"), value{n});
      loop.set(pstring("previtem"), i > 0 ? items[static_cast<size_t>(i - 1)] : value::undef("previtem"));
      loop.set(pstring("nextitem"), i + 1 < n ? items[static_cast<size_t>(i + 1)] : value::undef("nextitem"));
      scopes_.emplace_back();
      scopes_.back()["loop"] = value::dict(std::move(loop));
      assign(s.targets, items[static_cast<size_t>(i)]);
      flow f = flow::normal;
      try {
        f = exec(s.block, out);
      } catch (...) {
        scopes_.pop_back();
        throw;
      }
      scopes_.pop_back();
      if (f == flow::break_)
        break;
    }
  }

  void exec_set(const stmt& s) {
    value v;
    if (s.e) {
      v = eval(*s.e);
    } else {
      pstring captured;
      exec(s.block, captured);
      v = value::str(std::move(captured));
    }
    if (!s.ns.empty()) {
      value target = lookup(s.ns);
      auto* ns = target.as<std::shared_ptr<namespace_obj>>();
      if (ns == nullptr)
        fail("cannot set '" + s.attr + "' on '" + s.ns + "', a " + target.type_name()
             + ", not a namespace");
      (*ns)->attrs.set(pstring(s.attr), std::move(v));
      return;
    }
    assign(s.targets, v);
  }

  void define_macro(const stmt& s) {
    const stmt* m = &s;
    scopes_.back()[s.name] = value::function([this, m](std::vector<value>& args, kwargs& kw) {
      return call_macro(*m, args, kw);
    });
  }

  value call_macro(const stmt& m, std::vector<value>& args, kwargs& kw) {
    if (args.size() > m.params.size())
      fail("macro '" + m.name + "' takes at most " + std::to_string(m.params.size())
           + " arguments, got " + std::to_string(args.size()));
    if (depth_ >= max_call_depth)
      fail("macro calls nested deeper than " + std::to_string(max_call_depth));
    std::vector<scope> saved;
    saved.swap(scopes_);
    scopes_.push_back(saved.front()); // the template's top level
    scopes_.emplace_back();
    ++depth_;
    pstring out;
    try {
      for (size_t i = 0; i < m.params.size(); ++i) {
        const auto& [pname, def] = m.params[i];
        value v = value::undef(pname);
        if (i < args.size())
          v = args[i];
        bool found = false;
        for (auto& [k, kv] : kw)
          if (k == pname) {
            v = kv;
            found = true;
          }
        if (i >= args.size() && !found && def)
          v = eval(*def);
        scopes_.back()[pname] = std::move(v);
      }
      for (auto& [k, kv] : kw) {
        bool known = false;
        for (const auto& p : m.params)
          known = known || p.first == k;
        if (!known)
          fail("macro '" + m.name + "' has no argument '" + k + "'");
      }
      exec(m.block, out);
    } catch (...) {
      --depth_;
      scopes_.swap(saved);
      throw;
    }
    --depth_;
    // Top-level sets inside a macro stay in the macro, as in jinja2.
    scopes_.swap(saved);
    return value::str(std::move(out));
  }

  value lookup(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it)
      if (auto f = it->find(name); f != it->end())
        return f->second;
    return value::undef(name);
  }

  static value arith(const std::string& op, const value& a, const value& b) {
    if (a.is_undefined() || b.is_undefined()) {
      const auto& u = a.is_undefined() ? a : b;
      fail("'" + u.as<undefined>()->name + "' is undefined (in '" + op + "')");
    }
    if (op == "+") {
      if (a.is_string() && b.is_string()) {
        pstring s = *a.as<pstring>();
        s.append(*b.as<pstring>());
        return value::str(std::move(s));
      }
      if (a.list_ptr() != nullptr && b.list_ptr() != nullptr) {
        value_list l = *a.list_ptr();
        l.insert(l.end(), b.list_ptr()->begin(), b.list_ptr()->end());
        return value::list(std::move(l));
      }
    }
    if (op == "*" && (a.is_string() || b.is_string())) {
      const auto& s = a.is_string() ? a : b;
      const auto& n = a.is_string() ? b : a;
      if (!n.is<int64_t>())
        fail("cannot multiply a string by a " + n.type_name());
      auto times = *n.as<int64_t>();
      if (times > 0
          && static_cast<uint64_t>(times) > max_output_bytes / std::max<size_t>(1, s.as<pstring>()->size()))
        fail("string repetition past " + std::to_string(max_output_bytes) + " bytes");
      pstring out;
      for (int64_t i = 0; i < times; ++i)
        out.append(*s.as<pstring>());
      return value::str(std::move(out));
    }
    auto num = [&](const value& v) -> bool { return v.is_number() || v.is<bool>(); };
    if (!num(a) || !num(b))
      fail("unsupported operand types for " + op + ": " + a.type_name() + " and " + b.type_name());
    auto as_int = [](const value& v) {
      return v.is<bool>() ? int64_t{*v.as<bool>() ? 1 : 0} : *v.as<int64_t>();
    };
    auto as_dbl = [&](const value& v) {
      return v.is<double>() ? *v.as<double>() : static_cast<double>(as_int(v));
    };
    const bool ints = !a.is<double>() && !b.is<double>();
    if (op == "/") {
      if (as_dbl(b) == 0)
        fail("division by zero");
      return value{as_dbl(a) / as_dbl(b)};
    }
    if (op == "**") {
      double p = std::pow(as_dbl(a), as_dbl(b));
      if (ints && as_int(b) >= 0) {
        if (!(std::fabs(p) < 9.2e18))
          fail("integer overflow in **");
        return value{static_cast<int64_t>(p)};
      }
      return value{p};
    }
    if (ints) {
      int64_t x = as_int(a);
      int64_t y = as_int(b);
      int64_t r = 0;
      if (op == "+" || op == "-" || op == "*") {
        bool overflow = op == "+"   ? __builtin_add_overflow(x, y, &r)
                        : op == "-" ? __builtin_sub_overflow(x, y, &r)
                                    : __builtin_mul_overflow(x, y, &r);
        if (overflow)
          fail("integer overflow in " + op);
        return value{r};
      }
      if (y == 0)
        fail("division by zero");
      if (y == -1)
        return op == "//" ? arith("-", value{int64_t{0}}, a) : value{int64_t{0}};
      int64_t q = x / y;
      int64_t m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) {
        --q;
        m += y;
      }
      return value{op == "//" ? q : m};
    }
    double x = as_dbl(a);
    double y = as_dbl(b);
    if (op == "+")
      return value{x + y};
    if (op == "-")
      return value{x - y};
    if (op == "*")
      return value{x * y};
    if (y == 0)
      fail("division by zero");
    if (op == "//")
      return value{std::floor(x / y)};
    double r = std::fmod(x, y);
    if (r != 0 && ((r < 0) != (y < 0)))
      r += y;
    return value{r};
  }

  value eval(const expr& e) {
    try {
      return eval_inner(e);
    } catch (jinja_error& err) {
      locate(err, e.pos);
      throw;
    }
  }

  void eval_args(const expr& e, size_t from, std::vector<value>& args, kwargs& kw) {
    for (size_t i = from; i < e.args.size(); ++i)
      args.push_back(eval(*e.args[i]));
    for (const auto& [k, v] : e.kwargs)
      kw.emplace_back(k, eval(*v));
  }

  value eval_inner(const expr& e) {
    switch (e.k) {
      case expr::kind::literal: return e.lit;
      case expr::kind::name: return lookup(e.name);
      case expr::kind::list:
      case expr::kind::tuple: {
        value_list items;
        for (const auto& a : e.args)
          items.push_back(eval(*a));
        return value::list(std::move(items));
      }
      case expr::kind::dict: {
        value_dict d;
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
          value k = eval(*e.args[i]);
          if (!k.is_string())
            fail("dict keys must be strings, got a " + k.type_name());
          d.set(*k.as<pstring>(), eval(*e.args[i + 1]));
        }
        return value::dict(std::move(d));
      }
      case expr::kind::attr: return get_attr(eval(*e.args[0]), e.name);
      case expr::kind::item: return get_item(eval(*e.args[0]), eval(*e.args[1]));
      case expr::kind::slice: {
        value obj = eval(*e.args[0]);
        auto part = [&](size_t i) { return e.args[i] ? eval(*e.args[i]) : value::none(); };
        return get_slice(obj, part(1), part(2), part(3));
      }
      case expr::kind::call: {
        value callee = eval(*e.args[0]);
        std::vector<value> args;
        kwargs kw;
        eval_args(e, 1, args, kw);
        if (auto* u = callee.as<undefined>())
          fail("'" + u->name + "' is undefined (called as a function)");
        auto* f = callee.as<std::shared_ptr<callable>>();
        if (f == nullptr)
          fail("a " + callee.type_name() + " is not callable");
        return (**f)(args, kw);
      }
      case expr::kind::filter: {
        value operand = eval(*e.args[0]);
        std::vector<value> args;
        kwargs kw;
        eval_args(e, 1, args, kw);
        return apply_filter(e.name, operand, args, kw);
      }
      case expr::kind::test: {
        value operand = eval(*e.args[0]);
        std::vector<value> args;
        kwargs kw;
        eval_args(e, 1, args, kw);
        return value{apply_test(e.name, operand, args) != e.negated};
      }
      case expr::kind::unary: {
        value v = eval(*e.args[0]);
        if (e.name == "not")
          return value{!v.truthy()};
        if (v.is<int64_t>())
          return e.name == "-" ? arith("-", value{int64_t{0}}, v) : v;
        if (v.is<double>())
          return value{e.name == "-" ? -*v.as<double>() : *v.as<double>()};
        fail("unary " + e.name + " of a " + v.type_name());
      }
      case expr::kind::binary: {
        const auto& op = e.name;
        if (op == "and") {
          value l = eval(*e.args[0]);
          return l.truthy() ? eval(*e.args[1]) : l;
        }
        if (op == "or") {
          value l = eval(*e.args[0]);
          return l.truthy() ? l : eval(*e.args[1]);
        }
        value l = eval(*e.args[0]);
        value r = eval(*e.args[1]);
        if (op == "~") {
          pstring s = to_pstring(l);
          s.append(to_pstring(r));
          return value::str(std::move(s));
        }
        if (op == "==")
          return value{equals(l, r)};
        if (op == "!=")
          return value{!equals(l, r)};
        if (op == "<")
          return value{compare_values(l, r) < 0};
        if (op == "<=")
          return value{compare_values(l, r) <= 0};
        if (op == ">")
          return value{compare_values(l, r) > 0};
        if (op == ">=")
          return value{compare_values(l, r) >= 0};
        if (op == "in")
          return value{contains(r, l)};
        if (op == "not in")
          return value{!contains(r, l)};
        return arith(op, l, r);
      }
      case expr::kind::cond:
        if (eval(*e.args[1]).truthy())
          return eval(*e.args[0]);
        return e.args[2] ? eval(*e.args[2]) : value::undef("");
    }
    fail("unknown expression");
  }

  std::vector<scope> scopes_;
  int depth_ = 0;
};

scope globals() {
  scope g;
  g["raise_exception"] = value::function([](std::vector<value>& args, kwargs&) -> value {
    jinja_error e{args.empty() ? std::string{"raise_exception"} : to_pstring(args[0]).text};
    e.raised = true;
    throw e;
  });
  g["strftime_now"] = value::function([](std::vector<value>& args, kwargs&) -> value {
    if (args.empty() || !args[0].is_string())
      fail("strftime_now takes a format string");
    std::time_t now = std::time(nullptr);
    std::tm tm{};
    localtime_r(&now, &tm);
    char buf[256];
    size_t n = std::strftime(buf, sizeof buf, args[0].as<pstring>()->text.c_str(), &tm);
    return value::str(std::string(buf, n));
  });
  g["range"] = value::function([](std::vector<value>& args, kwargs&) -> value {
    auto num = [&](size_t i) {
      if (!args[i].is<int64_t>())
        fail("range takes integers, got a " + args[i].type_name());
      return *args[i].as<int64_t>();
    };
    if (args.empty() || args.size() > 3)
      fail("range takes 1 to 3 arguments");
    int64_t start = args.size() == 1 ? 0 : num(0);
    int64_t stop = args.size() == 1 ? num(0) : num(1);
    int64_t step = args.size() == 3 ? num(2) : 1;
    if (step == 0)
      fail("range step cannot be zero");
    value_list out;
    for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
      if (static_cast<int64_t>(out.size()) >= max_range)
        fail("range longer than " + std::to_string(max_range));
      out.push_back(value{i});
      if (__builtin_add_overflow(i, step, &i))
        break;
    }
    return value::list(std::move(out));
  });
  auto make_dict = [](std::vector<value>& args, kwargs& kw, bool ns) -> value {
    value_dict d;
    for (auto& a : args) {
      if (auto* src = a.dict_ptr())
        for (const auto& [k, v] : src->entries)
          d.set(k, v);
      else
        fail(std::string(ns ? "namespace" : "dict") + " takes a dict or keyword arguments");
    }
    for (auto& [k, v] : kw)
      d.set(pstring(k), v);
    if (!ns)
      return value::dict(std::move(d));
    auto n = std::make_shared<namespace_obj>();
    n->attrs = std::move(d);
    return value{n};
  };
  g["namespace"] = value::function(
    [make_dict](std::vector<value>& a, kwargs& k) { return make_dict(a, k, true); });
  g["dict"] = value::function(
    [make_dict](std::vector<value>& a, kwargs& k) { return make_dict(a, k, false); });
  return g;
}

} // namespace

std::variant<compiled_template, error> compiled_template::compile(std::string_view source) {
  try {
    compiled_template t;
    t.program_ = parse_program(source);
    return t;
  } catch (const jinja_error& e) {
    return error{e.message, e.raised};
  }
}

std::variant<std::vector<run>, error>
compiled_template::render(const nlohmann::ordered_json& data,
                          const nlohmann::ordered_json& trusted) const {
  scope root = globals();
  for (const auto& [k, v] : data.items())
    root[k] = from_json(v, true);
  for (const auto& [k, v] : trusted.items())
    root[k] = from_json(v, false);
  pstring out;
  try {
    evaluator ev(std::move(root));
    out = ev.run(program_->root);
  } catch (const jinja_error& e) {
    return error{e.message, e.raised};
  }
  std::vector<run> runs;
  for (size_t i = 0; i < out.size();) {
    size_t j = i;
    while (j < out.size() && out.mask[j] == out.mask[i])
      ++j;
    runs.push_back(run{out.text.substr(i, j - i), out.mask[i] != 0});
    i = j;
  }
  return runs;
}

std::string join_runs(const std::vector<run>& runs) {
  std::string out;
  for (const auto& r : runs)
    out += r.text;
  return out;
}

} // namespace tessera::jinja
