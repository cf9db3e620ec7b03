#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <string_view>

#include "engine/jinja/ast.hpp"
#include "engine/jinja/builtins.hpp"
#include "engine/jinja/lexer.hpp"

namespace tessera::jinja {

namespace {

using tt = token::type;

class parser {
public:
  explicit parser(std::vector<token> toks) : t_(std::move(toks)) {}

  body parse_all() {
    body b = parse_body({});
    if (peek().t != tt::eof)
      error("unexpected '{% " + peek_block_name() + " %}'");
    return b;
  }

private:
  const token& peek(size_t k = 0) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  const token& next() { return t_[i_ < t_.size() - 1 ? i_++ : i_]; }
  [[noreturn]] void error(const std::string& msg, const token* at = nullptr) const {
    jinja_error e{msg};
    locate(e, (at != nullptr ? *at : peek()).pos);
    throw e;
  }
  static std::string describe(const token& t) {
    switch (t.t) {
      case tt::eof: return "end of template";
      case tt::block_end: return "'%}'";
      case tt::var_end: return "'}}'";
      case tt::string: return "string '" + t.s + "'";
      default: return "'" + t.s + "'";
    }
  }
  bool at_op(std::string_view op) const { return peek().t == tt::op && peek().s == op; }
  bool at_name(std::string_view n) const { return peek().t == tt::name && peek().s == n; }
  void expect_op(std::string_view op) {
    if (!at_op(op))
      error("expected '" + std::string{op} + "', got " + describe(peek()));
    next();
  }
  std::string expect_name() {
    if (peek().t != tt::name)
      error("expected a name, got " + describe(peek()));
    return next().s;
  }
  void expect_block_end() {
    if (peek().t != tt::block_end)
      error("expected '%}', got " + describe(peek()));
    next();
  }
  std::string peek_block_name() const {
    return peek().t == tt::block_begin && peek(1).t == tt::name ? peek(1).s : describe(peek());
  }

  /// Statements up to a `{% name %}` in `ends` (not consumed) or the end.
  body parse_body(std::initializer_list<std::string_view> ends) {
    body b;
    while (true) {
      const token& t = peek();
      if (t.t == tt::eof) {
        if (ends.size() != 0)
          error("missing '{% " + std::string{*(ends.end() - 1)} + " %}'");
        return b;
      }
      if (t.t == tt::text) {
        auto s = std::make_unique<stmt>();
        s->k = stmt::kind::text;
        s->pos = t.pos;
        s->text = next().s;
        b.push_back(std::move(s));
      } else if (t.t == tt::var_begin) {
        auto s = std::make_unique<stmt>();
        s->k = stmt::kind::output;
        s->pos = next().pos;
        s->e = parse_expression();
        if (peek().t != tt::var_end)
          error("expected '}}', got " + describe(peek()));
        next();
        b.push_back(std::move(s));
      } else if (t.t == tt::block_begin) {
        if (peek(1).t == tt::name)
          for (auto e : ends)
            if (peek(1).s == e)
              return b;
        b.push_back(parse_statement());
      } else {
        error("unexpected " + describe(t));
      }
    }
  }

  /// Consumes `{% name` ... checks it is `name`.
  void open_tag(std::string_view name) {
    next(); // block_begin
    if (!at_name(name))
      error("expected '{% " + std::string{name} + " %}'");
    next();
  }

  std::unique_ptr<stmt> parse_statement() {
    const token& begin = next();
    auto s = std::make_unique<stmt>();
    s->pos = begin.pos;
    const token& kw = peek();
    if (kw.t != tt::name)
      error("expected a statement name after '{%', got " + describe(kw));
    const std::string name = next().s;
    if (name == "if") {
      s->k = stmt::kind::if_;
      auto cond = parse_expression();
      expect_block_end();
      auto blk = parse_body({"elif", "else", "endif"});
      s->branches.emplace_back(std::move(cond), std::move(blk));
      while (true) {
        next();
        const std::string which = next().s;
        if (which == "elif") {
          auto c = parse_expression();
          expect_block_end();
          auto bb = parse_body({"elif", "else", "endif"});
          s->branches.emplace_back(std::move(c), std::move(bb));
        } else if (which == "else") {
          expect_block_end();
          auto bb = parse_body({"endif"});
          s->branches.emplace_back(nullptr, std::move(bb));
          open_tag("endif");
          expect_block_end();
          break;
        } else {
          expect_block_end();
          break;
        }
      }
    } else if (name == "for") {
      s->k = stmt::kind::for_;
      s->targets.push_back(expect_name());
      while (at_op(",")) {
        next();
        s->targets.push_back(expect_name());
      }
      if (!at_name("in"))
        error("expected 'in' in a for statement, got " + describe(peek()));
      next();
      s->e = parse_or_expr(/*allow_cond=*/false);
      if (at_name("if")) {
        next();
        s->filter = parse_or_expr(false);
      }
      if (at_name("recursive"))
        error("unsupported construct 'for ... recursive'");
      expect_block_end();
      ++loop_depth_;
      s->block = parse_body({"else", "endfor"});
      --loop_depth_;
      next();
      if (next().s == "else") {
        expect_block_end();
        s->else_block = parse_body({"endfor"});
        open_tag("endfor");
      }
      expect_block_end();
    } else if (name == "set") {
      s->k = stmt::kind::set;
      auto first = expect_name();
      if (at_op(".")) {
        next();
        s->ns = first;
        s->attr = expect_name();
      } else {
        s->targets.push_back(first);
        while (at_op(",")) {
          next();
          s->targets.push_back(expect_name());
        }
      }
      if (at_op("=")) {
        next();
        s->e = parse_tuple_or_expression();
        expect_block_end();
      } else {
        if (!s->ns.empty() || s->targets.size() != 1)
          error("a block set takes one name");
        expect_block_end();
        s->block = parse_body({"endset"});
        open_tag("endset");
        expect_block_end();
      }
    } else if (name == "macro") {
      s->k = stmt::kind::macro;
      s->name = expect_name();
      expect_op("(");
      while (!at_op(")")) {
        auto p = expect_name();
        expr_ptr def;
        if (at_op("=")) {
          next();
          def = parse_expression();
        }
        s->params.emplace_back(p, std::move(def));
        if (!at_op(","))
          break;
        next();
      }
      expect_op(")");
      expect_block_end();
      s->block = parse_body({"endmacro"});
      open_tag("endmacro");
      expect_block_end();
    } else if (name == "break" || name == "continue") {
      s->k = name == "break" ? stmt::kind::break_ : stmt::kind::continue_;
      if (loop_depth_ == 0)
        error("'" + name + "' outside a for loop", &kw);
      expect_block_end();
    } else if (name == "generation") {
      s->k = stmt::kind::generation;
      expect_block_end();
      s->block = parse_body({"endgeneration"});
      open_tag("endgeneration");
      expect_block_end();
    } else {
      error("unsupported construct '{% " + name + " %}'", &kw);
    }
    return s;
  }

  expr_ptr make(expr::kind k, position p) {
    auto e = std::make_unique<expr>();
    e->k = k;
    e->pos = p;
    return e;
  }

  /// `a, b` (a tuple) or one expression: the right side of set.
  expr_ptr parse_tuple_or_expression() {
    auto first = parse_expression();
    if (!at_op(","))
      return first;
    auto t = make(expr::kind::tuple, first->pos);
    t->args.push_back(std::move(first));
    while (at_op(",")) {
      next();
      t->args.push_back(parse_expression());
    }
    return t;
  }

  expr_ptr parse_expression() { return parse_or_expr(true); }

  expr_ptr parse_or_expr(bool allow_cond) {
    auto e = parse_or();
    if (allow_cond && at_name("if")) {
      auto c = make(expr::kind::cond, e->pos);
      next();
      c->args.push_back(std::move(e));
      c->args.push_back(parse_or());
      if (at_name("else")) {
        next();
        c->args.push_back(parse_or_expr(true));
      } else {
        c->args.push_back(nullptr);
      }
      return c;
    }
    return e;
  }

  expr_ptr binary(std::string op, expr_ptr l, expr_ptr r) {
    auto b = make(expr::kind::binary, l->pos);
    b->name = std::move(op);
    b->args.push_back(std::move(l));
    b->args.push_back(std::move(r));
    return b;
  }

  expr_ptr parse_or() {
    auto l = parse_and();
    while (at_name("or")) {
      next();
      l = binary("or", std::move(l), parse_and());
    }
    return l;
  }
  expr_ptr parse_and() {
    auto l = parse_not();
    while (at_name("and")) {
      next();
      l = binary("and", std::move(l), parse_not());
    }
    return l;
  }
  expr_ptr parse_not() {
    if (at_name("not")) {
      auto u = make(expr::kind::unary, next().pos);
      u->name = "not";
      u->args.push_back(parse_not());
      return u;
    }
    return parse_compare();
  }
  expr_ptr parse_compare() {
    auto l = parse_math1();
    while (true) {
      if (peek().t == tt::op
          && (peek().s == "==" || peek().s == "!=" || peek().s == "<" || peek().s == "<="
              || peek().s == ">" || peek().s == ">=")) {
        auto op = next().s;
        l = binary(op, std::move(l), parse_math1());
      } else if (at_name("in")) {
        next();
        l = binary("in", std::move(l), parse_math1());
      } else if (at_name("not") && peek(1).t == tt::name && peek(1).s == "in") {
        next();
        next();
        l = binary("not in", std::move(l), parse_math1());
      } else {
        return l;
      }
    }
  }
  expr_ptr parse_math1() {
    auto l = parse_concat();
    while (at_op("+") || at_op("-")) {
      auto op = next().s;
      l = binary(op, std::move(l), parse_concat());
    }
    return l;
  }
  expr_ptr parse_concat() {
    auto l = parse_math2();
    while (at_op("~")) {
      next();
      l = binary("~", std::move(l), parse_math2());
    }
    return l;
  }
  expr_ptr parse_math2() {
    auto l = parse_pow();
    while (at_op("*") || at_op("/") || at_op("//") || at_op("%")) {
      auto op = next().s;
      l = binary(op, std::move(l), parse_pow());
    }
    return l;
  }
  expr_ptr parse_pow() {
    auto l = parse_unary(true);
    while (at_op("**")) {
      next();
      l = binary("**", std::move(l), parse_unary(true));
    }
    return l;
  }
  expr_ptr parse_unary(bool with_filter) {
    if (at_op("-") || at_op("+")) {
      auto u = make(expr::kind::unary, peek().pos);
      u->name = next().s;
      u->args.push_back(parse_unary(false));
      return with_filter ? parse_filters(std::move(u)) : std::move(u);
    }
    auto p = parse_postfix(parse_primary());
    return with_filter ? parse_filters(std::move(p)) : std::move(p);
  }

  expr_ptr parse_primary() {
    const token& t = peek();
    switch (t.t) {
      case tt::name: {
        next();
        if (t.s == "true" || t.s == "True")
          return literal(value{true}, t.pos);
        if (t.s == "false" || t.s == "False")
          return literal(value{false}, t.pos);
        if (t.s == "none" || t.s == "None")
          return literal(value::none(), t.pos);
        auto n = make(expr::kind::name, t.pos);
        n->name = t.s;
        return n;
      }
      case tt::string: {
        // Adjacent string literals concatenate, as in Python.
        std::string s = next().s;
        while (peek().t == tt::string)
          s += next().s;
        return literal(value::str(std::move(s)), t.pos);
      }
      case tt::integer: {
        next();
        errno = 0;
        auto v = std::strtoll(t.s.c_str(), nullptr, 10);
        if (errno == ERANGE)
          error("integer literal out of range", &t);
        return literal(value{int64_t{v}}, t.pos);
      }
      case tt::floating: next(); return literal(value{std::strtod(t.s.c_str(), nullptr)}, t.pos);
      case tt::op:
        if (t.s == "(") {
          next();
          if (at_op(")")) {
            next();
            return make(expr::kind::tuple, t.pos);
          }
          auto e = parse_expression();
          if (at_op(",")) {
            auto tup = make(expr::kind::tuple, t.pos);
            tup->args.push_back(std::move(e));
            while (at_op(",")) {
              next();
              if (at_op(")"))
                break;
              tup->args.push_back(parse_expression());
            }
            e = std::move(tup);
          }
          expect_op(")");
          return e;
        }
        if (t.s == "[") {
          next();
          auto l = make(expr::kind::list, t.pos);
          while (!at_op("]")) {
            l->args.push_back(parse_expression());
            if (!at_op(","))
              break;
            next();
          }
          expect_op("]");
          return l;
        }
        if (t.s == "{") {
          next();
          auto d = make(expr::kind::dict, t.pos);
          while (!at_op("}")) {
            d->args.push_back(parse_expression());
            expect_op(":");
            d->args.push_back(parse_expression());
            if (!at_op(","))
              break;
            next();
          }
          expect_op("}");
          return d;
        }
        break;
      default: break;
    }
    error("unexpected " + describe(t) + " in an expression");
  }

  expr_ptr literal(value v, position p) {
    auto e = make(expr::kind::literal, p);
    e->lit = std::move(v);
    return e;
  }

  void parse_call_args(expr& call) {
    expect_op("(");
    while (!at_op(")")) {
      if (peek().t == tt::name && peek(1).t == tt::op && peek(1).s == "=") {
        auto k = next().s;
        next();
        call.kwargs.emplace_back(k, parse_expression());
      } else {
        if (at_op("*") || at_op("**"))
          error("unsupported construct '*args' in a call");
        call.args.push_back(parse_expression());
      }
      if (!at_op(","))
        break;
      next();
    }
    expect_op(")");
  }

  expr_ptr parse_postfix(expr_ptr e) {
    while (true) {
      if (at_op(".")) {
        next();
        auto a = make(expr::kind::attr, e->pos);
        if (peek().t == tt::integer) {
          // foo.0 is foo[0] in Jinja.
          a->k = expr::kind::item;
          a->args.push_back(std::move(e));
          a->args.push_back(literal(value{int64_t{std::strtoll(next().s.c_str(), nullptr, 10)}},
                                    a->pos));
        } else {
          a->name = expect_name();
          a->args.push_back(std::move(e));
        }
        e = std::move(a);
      } else if (at_op("[")) {
        const position p = next().pos;
        expr_ptr parts[3];
        bool is_slice = false;
        for (int k = 0; k < 3; ++k) {
          if (!at_op(":") && !at_op("]"))
            parts[k] = parse_expression();
          if (k < 2 && at_op(":")) {
            next();
            is_slice = true;
          } else {
            break;
          }
        }
        expect_op("]");
        auto s = make(is_slice ? expr::kind::slice : expr::kind::item, p);
        s->args.push_back(std::move(e));
        if (is_slice) {
          for (auto& part : parts)
            s->args.push_back(std::move(part));
        } else {
          if (!parts[0])
            error("empty subscript");
          s->args.push_back(std::move(parts[0]));
        }
        e = std::move(s);
      } else if (at_op("(")) {
        auto c = make(expr::kind::call, e->pos);
        c->args.push_back(std::move(e));
        parse_call_args(*c);
        e = std::move(c);
      } else {
        return e;
      }
    }
  }

  /// `| filter(args)` and `is [not] test args`, left to right.
  expr_ptr parse_filters(expr_ptr e) {
    while (true) {
      if (at_op("|")) {
        next();
        const token& nt = peek();
        auto f = make(expr::kind::filter, nt.pos);
        f->name = expect_name();
        if (!is_known_filter(f->name))
          error("unsupported filter '" + f->name + "'", &nt);
        f->args.push_back(std::move(e));
        if (at_op("("))
          parse_call_args(*f);
        e = parse_postfix(std::move(f));
      } else if (at_name("is")) {
        next();
        auto t = make(expr::kind::test, peek().pos);
        if (at_name("not")) {
          next();
          t->negated = true;
        }
        const token& nt = peek();
        t->name = peek().t == tt::op && (peek().s == "==" || peek().s == "!=" || peek().s == "<"
                                         || peek().s == ">" || peek().s == "<=" || peek().s == ">=")
                    ? next().s
                    : expect_name();
        if (t->name == "none" || t->name == "None")
          t->name = "none";
        if (t->name == "true" || t->name == "True")
          t->name = "true";
        if (t->name == "false" || t->name == "False")
          t->name = "false";
        if (!is_known_test(t->name))
          error("unsupported test '" + t->name + "'", &nt);
        t->args.push_back(std::move(e));
        if (at_op("(")) {
          parse_call_args(*t);
        } else if (peek().t == tt::string || peek().t == tt::integer || peek().t == tt::floating
                   || (peek().t == tt::name && !at_name("else") && !at_name("or")
                       && !at_name("and") && !at_name("is") && !at_name("in")
                       && !at_name("if") && !at_name("not"))
                   || at_op("[") || at_op("{")) {
          // `is equalto 'x'`, `is sameas false`: one argument without parentheses.
          t->args.push_back(parse_postfix(parse_primary()));
        }
        e = std::move(t);
      } else {
        return e;
      }
    }
  }

  std::vector<token> t_;
  size_t i_ = 0;
  int loop_depth_ = 0;
};

} // namespace

std::shared_ptr<const program> parse_program(std::string_view source) {
  auto toks = lex(source);
  auto p = std::make_shared<program>();
  p->root = parser(std::move(toks)).parse_all();
  return p;
}

} // namespace tessera::jinja
