#include "engine/grammar/regex.hpp"
#include "common/hex.hpp"

#include <algorithm>
#include <map>
#include <memory>

namespace tessera::engine::grammar {

uint32_t decode_utf8_at(std::string_view s, size_t& i) {
  auto b = static_cast<uint8_t>(s[i]);
  size_t n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
  if (n == 0 || i + n > s.size()) {
    ++i;
    return b;
  }
  uint32_t c = n == 1 ? b : n == 2 ? (b & 0x1F) : n == 3 ? (b & 0x0F) : (b & 0x07);
  for (size_t k = 1; k < n; ++k) {
    auto cb = static_cast<uint8_t>(s[i + k]);
    if ((cb & 0xC0) != 0x80) {
      ++i;
      return b;
    }
    c = (c << 6) | (cb & 0x3F);
  }
  i += n;
  return c;
}

namespace {

constexpr size_t max_regex_nodes = 200'000;
constexpr int max_repeat = 1000;

struct re_node {
  enum class kind { set, concat, alt, repeat } k = kind::set;
  char_set set;
  std::vector<re_node> kids;
  int min = 0;
  int max = 0; // -1: unbounded
};

char_set digit_set() { return char_set::range('0', '9'); }
char_set word_set() {
  char_set s = char_set::range('a', 'z');
  s.add('A', 'Z');
  s.add('0', '9');
  s.add('_', '_');
  return s;
}
char_set space_set() {
  char_set s = char_set::range('\t', '\r');
  s.add(' ', ' ');
  s.add(0xA0, 0xA0);
  s.add(0x1680, 0x1680);
  s.add(0x2000, 0x200A);
  s.add(0x2028, 0x2029);
  s.add(0x202F, 0x202F);
  s.add(0x205F, 0x205F);
  s.add(0x3000, 0x3000);
  return s;
}
char_set ascii_minus(const char_set& s) { return char_set::range(0, 0x7F).intersect(s.complement()); }
char_set dot_set() {
  char_set s = char_set::any();
  return s.intersect(char_set::range('\n', '\n').complement())
      .intersect(char_set::range('\r', '\r').complement())
      .intersect(char_set::range(0x2028, 0x2029).complement());
}

class parser {
public:
  explicit parser(std::string_view p) : p_(p) {}

  bool parse(re_node& out, std::string& error) {
    out = re_node{re_node::kind::alt, {}, {}, 0, 0};
    for (;;) {
      bool start_anchor = false;
      if (peek('^')) {
        ++i_;
        start_anchor = true;
      }
      re_node branch;
      bool end_anchor = false;
      if (!parse_concat(branch, true, end_anchor))
        break;
      re_node full{re_node::kind::concat, {}, {}, 0, 0};
      if (!start_anchor)
        full.kids.push_back(any_star());
      full.kids.push_back(std::move(branch));
      if (!end_anchor)
        full.kids.push_back(any_star());
      out.kids.push_back(std::move(full));
      if (i_ < p_.size() && p_[i_] == '|') {
        ++i_;
        continue;
      }
      break;
    }
    if (error_.empty() && i_ < p_.size())
      fail("unbalanced ')'");
    error = error_;
    return error_.empty();
  }

private:
  static re_node any_star() {
    re_node set{re_node::kind::set, char_set::any(), {}, 0, 0};
    re_node r{re_node::kind::repeat, {}, {}, 0, -1};
    r.kids.push_back(std::move(set));
    return r;
  }
  bool peek(char c) const { return i_ < p_.size() && p_[i_] == c; }
  bool fail(const std::string& what) {
    if (error_.empty())
      error_ = "unsupported or invalid regex: " + what + " at offset " + std::to_string(i_);
    return false;
  }

  bool parse_alt(re_node& out) {
    out = re_node{re_node::kind::alt, {}, {}, 0, 0};
    for (;;) {
      re_node branch;
      bool unused = false;
      if (!parse_concat(branch, false, unused))
        return false;
      out.kids.push_back(std::move(branch));
      if (peek('|')) {
        ++i_;
        continue;
      }
      return true;
    }
  }

  bool parse_concat(re_node& out, bool top, bool& end_anchor) {
    out = re_node{re_node::kind::concat, {}, {}, 0, 0};
    while (i_ < p_.size() && p_[i_] != '|' && p_[i_] != ')') {
      if (p_[i_] == '$') {
        ++i_;
        if (top && (i_ == p_.size() || p_[i_] == '|')) {
          end_anchor = true;
          return true;
        }
        --i_;
        return fail("'$' anchor not at the end of a top-level alternative");
      }
      if (p_[i_] == '^')
        return fail("'^' anchor not at the start of a top-level alternative");
      re_node atom;
      if (!parse_atom(atom) || !parse_quantifiers(atom))
        return false;
      out.kids.push_back(std::move(atom));
    }
    return error_.empty();
  }

  bool parse_number(int& v) {
    size_t start = i_;
    long long n = 0;
    while (i_ < p_.size() && p_[i_] >= '0' && p_[i_] <= '9') {
      n = n * 10 + (p_[i_] - '0');
      if (n > 1'000'000)
        n = 1'000'000;
      ++i_;
    }
    v = static_cast<int>(n);
    return i_ > start;
  }

  bool parse_quantifiers(re_node& atom) {
    for (;;) {
      if (i_ >= p_.size())
        return true;
      int mn = 0;
      int mx = 0;
      char c = p_[i_];
      if (c == '*') {
        mn = 0, mx = -1, ++i_;
      } else if (c == '+') {
        mn = 1, mx = -1, ++i_;
      } else if (c == '?') {
        mn = 0, mx = 1, ++i_;
      } else if (c == '{') {
        size_t save = i_;
        ++i_;
        if (!parse_number(mn)) {
          i_ = save; // a literal '{' (ECMA-262 Annex B)
          return true;
        }
        mx = mn;
        if (peek(',')) {
          ++i_;
          mx = -1;
          if (i_ < p_.size() && p_[i_] != '}' && !parse_number(mx))
            return fail("bad {m,n} quantifier");
        }
        if (!peek('}'))
          return fail("bad {m,n} quantifier");
        ++i_;
        if (mx != -1 && mx < mn)
          return fail("quantifier {m,n} with n < m");
        if (mn > max_repeat || mx > max_repeat)
          return fail("repetition count above " + std::to_string(max_repeat));
      } else {
        return true;
      }
      if (peek('?'))
        ++i_; // lazy: same language
      re_node r{re_node::kind::repeat, {}, {}, mn, mx};
      r.kids.push_back(std::move(atom));
      atom = std::move(r);
    }
  }

  bool parse_hex(size_t digits, uint32_t& v) {
    v = 0;
    for (size_t k = 0; k < digits; ++k, ++i_) {
      if (i_ >= p_.size())
        return fail("truncated hex escape");
      char c = p_[i_];
      const int d = hex_digit_value(c);
      if (d < 0)
        return fail("bad hex digit");
      v = v * 16 + static_cast<uint32_t>(d);
    }
    return true;
  }

  // After a backslash: a set (class escapes) or one character.
  bool parse_escape(char_set& out, bool in_class) {
    if (i_ >= p_.size())
      return fail("trailing backslash");
    char c = p_[i_++];
    switch (c) {
    case 'd': out = digit_set(); return true;
    case 'D': out = ascii_minus(digit_set()); return true;
    case 'w': out = word_set(); return true;
    case 'W': out = ascii_minus(word_set()); return true;
    case 's': out = space_set(); return true;
    case 'S': out = ascii_minus(space_set()); return true;
    case 't': out = char_set::single('\t'); return true;
    case 'n': out = char_set::single('\n'); return true;
    case 'r': out = char_set::single('\r'); return true;
    case 'f': out = char_set::single('\f'); return true;
    case 'v': out = char_set::single('\v'); return true;
    case '0': out = char_set::single(0); return true;
    case 'x': {
      uint32_t v = 0;
      if (!parse_hex(2, v))
        return false;
      out = char_set::single(v);
      return true;
    }
    case 'u': {
      uint32_t v = 0;
      if (!parse_hex(4, v))
        return false;
      if (v >= 0xD800 && v <= 0xDFFF)
        return fail("surrogate \\u escape");
      out = char_set::single(v);
      return true;
    }
    case 'b':
      if (in_class) {
        out = char_set::single('\b');
        return true;
      }
      --i_;
      return fail("word boundary \\b");
    default:
      if ((c >= '1' && c <= '9') || c == 'k') {
        --i_;
        return fail("backreference");
      }
      if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
        --i_;
        return fail(std::string("escape \\") + c);
      }
      --i_;
      out = char_set::single(decode_utf8_at(p_, i_));
      return true;
    }
  }

  bool parse_class(char_set& out) {
    bool negate = false;
    if (peek('^')) {
      negate = true;
      ++i_;
    }
    char_set set;
    bool first = true;
    while (i_ < p_.size() && (p_[i_] != ']' || (first && false))) {
      first = false;
      char_set item;
      bool single = true;
      uint32_t lo = 0;
      if (p_[i_] == '\\') {
        ++i_;
        if (!parse_escape(item, true))
          return false;
        single = item.ranges().size() == 1 && item.ranges()[0].lo == item.ranges()[0].hi;
        lo = single ? item.ranges()[0].lo : 0;
      } else {
        lo = decode_utf8_at(p_, i_);
        item = char_set::single(lo);
      }
      if (single && i_ + 1 < p_.size() && p_[i_] == '-' && p_[i_ + 1] != ']') {
        ++i_;
        uint32_t hi = 0;
        if (p_[i_] == '\\') {
          ++i_;
          char_set h;
          if (!parse_escape(h, true))
            return false;
          if (h.ranges().size() != 1 || h.ranges()[0].lo != h.ranges()[0].hi)
            return fail("class escape as a range end");
          hi = h.ranges()[0].lo;
        } else {
          hi = decode_utf8_at(p_, i_);
        }
        if (hi < lo)
          return fail("character range out of order");
        item = char_set::range(lo, hi);
      }
      set.add(item);
    }
    if (!peek(']'))
      return fail("unterminated character class");
    ++i_;
    out = negate ? set.complement() : set;
    return true;
  }

  bool parse_atom(re_node& out) {
    char c = p_[i_];
    out = re_node{re_node::kind::set, {}, {}, 0, 0};
    if (c == '(') {
      ++i_;
      if (peek('?')) {
        ++i_;
        if (peek(':')) {
          ++i_;
        } else if (peek('<') && i_ + 1 < p_.size() && p_[i_ + 1] != '=' && p_[i_ + 1] != '!') {
          while (i_ < p_.size() && p_[i_] != '>')
            ++i_;
          if (!peek('>'))
            return fail("unterminated group name");
          ++i_;
        } else {
          return fail("lookaround or group flag '(?'");
        }
      }
      if (!parse_alt(out))
        return false;
      if (!peek(')'))
        return fail("missing ')'");
      ++i_;
      return true;
    }
    if (c == '[') {
      ++i_;
      return parse_class(out.set);
    }
    if (c == '.') {
      ++i_;
      out.set = dot_set();
      return true;
    }
    if (c == '\\') {
      ++i_;
      return parse_escape(out.set, false);
    }
    if (c == '*' || c == '+' || c == '?')
      return fail(std::string("quantifier '") + c + "' without an operand");
    if (c == ']' || c == '}') {
      ++i_;
      out.set = char_set::single(static_cast<uint8_t>(c));
      return true;
    }
    out.set = char_set::single(decode_utf8_at(p_, i_));
    return true;
  }

  std::string_view p_;
  size_t i_ = 0;
  std::string error_;
};

// Thompson NFA over char sets.
struct nfa {
  struct edge {
    bool epsilon = false;
    char_set set;
    uint32_t to = 0;
  };
  std::vector<std::vector<edge>> edges;
  uint32_t add() {
    edges.emplace_back();
    return static_cast<uint32_t>(edges.size() - 1);
  }
};

bool build(nfa& n, const re_node& r, uint32_t in, uint32_t out) {
  if (n.edges.size() > max_regex_nodes)
    return false;
  switch (r.k) {
  case re_node::kind::set:
    n.edges[in].push_back({false, r.set, out});
    return true;
  case re_node::kind::alt:
    for (const auto& k : r.kids)
      if (!build(n, k, in, out))
        return false;
    return true;
  case re_node::kind::concat: {
    uint32_t cur = in;
    for (size_t k = 0; k < r.kids.size(); ++k) {
      uint32_t next = k + 1 == r.kids.size() ? out : n.add();
      if (!build(n, r.kids[k], cur, next))
        return false;
      cur = next;
    }
    if (r.kids.empty())
      n.edges[in].push_back({true, {}, out});
    return true;
  }
  case re_node::kind::repeat: {
    uint32_t cur = in;
    for (int k = 0; k < r.min; ++k) {
      uint32_t next = n.add();
      if (!build(n, r.kids[0], cur, next))
        return false;
      cur = next;
    }
    if (r.max == -1) {
      uint32_t loop = n.add();
      uint32_t back = n.add();
      n.edges[cur].push_back({true, {}, loop});
      if (!build(n, r.kids[0], loop, back))
        return false;
      n.edges[back].push_back({true, {}, loop});
      n.edges[loop].push_back({true, {}, out});
      return true;
    }
    for (int k = r.min; k < r.max; ++k) {
      n.edges[cur].push_back({true, {}, out});
      uint32_t next = k + 1 == r.max ? out : n.add();
      if (!build(n, r.kids[0], cur, next))
        return false;
      cur = next;
    }
    n.edges[cur].push_back({true, {}, out});
    return true;
  }
  }
  return true;
}

char_dfa determinise(const nfa& n, uint32_t start, uint32_t accept, std::string& error) {
  auto closure = [&](std::vector<uint32_t> set) {
    std::vector<bool> seen(n.edges.size(), false);
    std::vector<uint32_t> stack = set;
    for (uint32_t s : set)
      seen[s] = true;
    while (!stack.empty()) {
      uint32_t s = stack.back();
      stack.pop_back();
      for (const auto& e : n.edges[s])
        if (e.epsilon && !seen[e.to]) {
          seen[e.to] = true;
          set.push_back(e.to);
          stack.push_back(e.to);
        }
    }
    std::sort(set.begin(), set.end());
    return set;
  };
  char_dfa d;
  std::map<std::vector<uint32_t>, uint32_t> ids;
  std::vector<std::vector<uint32_t>> queue;
  auto intern = [&](std::vector<uint32_t> set) {
    auto [it, fresh] = ids.emplace(std::move(set), static_cast<uint32_t>(queue.size()));
    if (fresh) {
      queue.push_back(it->first);
      d.edges.emplace_back();
      d.accepting.push_back(std::binary_search(it->first.begin(), it->first.end(), accept));
    }
    return it->second;
  };
  d.start = intern(closure({start}));
  for (size_t qi = 0; qi < queue.size(); ++qi) {
    if (queue.size() > 20'000) {
      error = "the pattern's automaton has more than 20000 states";
      return {};
    }
    std::vector<uint32_t> set = queue[qi];
    std::vector<uint32_t> cuts{0, max_code_point + 1};
    for (uint32_t s : set)
      for (const auto& e : n.edges[s])
        if (!e.epsilon)
          for (const auto& r : e.set.ranges()) {
            cuts.push_back(r.lo);
            cuts.push_back(r.hi + 1);
          }
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    std::map<uint32_t, char_set> by_target;
    for (size_t c = 0; c + 1 < cuts.size(); ++c) {
      std::vector<uint32_t> target;
      for (uint32_t s : set)
        for (const auto& e : n.edges[s])
          if (!e.epsilon && e.set.contains(cuts[c]))
            target.push_back(e.to);
      if (target.empty())
        continue;
      std::sort(target.begin(), target.end());
      target.erase(std::unique(target.begin(), target.end()), target.end());
      uint32_t to = intern(closure(std::move(target)));
      by_target[to].add(cuts[c], cuts[c + 1] - 1);
    }
    for (auto& [to, cs] : by_target)
      if (!cs.empty())
        d.edges[qi].push_back({std::move(cs), to});
  }
  return d;
}

} // namespace

bool compile_pattern(std::string_view pattern, char_dfa& out, std::string& error) {
  re_node ast;
  parser p(pattern);
  if (!p.parse(ast, error))
    return false;
  nfa n;
  uint32_t start = n.add();
  uint32_t accept = n.add();
  if (!build(n, ast, start, accept)) {
    error = "the pattern's automaton is too large (more than " + std::to_string(max_regex_nodes) +
            " states)";
    return false;
  }
  out = determinise(n, start, accept, error);
  return error.empty();
}

char_dfa any_string_dfa() {
  char_dfa d;
  d.edges.push_back({{char_set::any(), 0}});
  d.accepting.push_back(true);
  return d;
}

char_dfa any_string_except(const std::vector<std::string>& excluded) {
  // A trie of the excluded strings; leaving it at any point goes to a sink
  // that accepts everything.
  char_dfa d;
  d.edges.emplace_back(); // 0: root
  d.accepting.push_back(true);
  d.edges.emplace_back(); // 1: sink
  d.accepting.push_back(true);
  d.edges[1].push_back({char_set::any(), 1});
  std::vector<std::map<uint32_t, uint32_t>> kids(2);
  for (const auto& s : excluded) {
    uint32_t cur = 0;
    for (size_t i = 0; i < s.size();) {
      uint32_t c = decode_utf8_at(s, i);
      auto it = kids[cur].find(c);
      if (it == kids[cur].end()) {
        auto id = static_cast<uint32_t>(d.edges.size());
        d.edges.emplace_back();
        d.accepting.push_back(true);
        kids.emplace_back();
        kids[cur][c] = id;
        cur = id;
      } else {
        cur = it->second;
      }
    }
    d.accepting[cur] = false;
  }
  for (uint32_t s = 0; s < kids.size(); ++s) {
    if (s == 1)
      continue;
    char_set rest = char_set::any();
    for (auto [c, to] : kids[s]) {
      d.edges[s].push_back({char_set::single(c), to});
      rest = rest.intersect(char_set::single(c).complement());
    }
    if (!rest.empty())
      d.edges[s].push_back({rest, 1});
  }
  return d;
}

} // namespace tessera::engine::grammar
