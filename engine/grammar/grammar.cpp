#include "engine/grammar/grammar.hpp"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <stdexcept>

namespace tessera::engine::grammar {

std::string grammar_error::text() const {
  return message + " (keyword '" + keyword + "' at '" + (pointer.empty() ? "#" : "#" + pointer) +
         "')";
}

uint32_t grammar_builder::add_rule() {
  auto rule = static_cast<uint32_t>(rule_start_.size());
  rule_start_.push_back(0);
  rule_start_[rule] = add_node(rule);
  return rule;
}

uint32_t grammar_builder::add_node(uint32_t rule) {
  nodes_.push_back(node{rule, false, {}});
  return static_cast<uint32_t>(nodes_.size() - 1);
}

void grammar_builder::add_bytes(uint32_t from, uint8_t lo, uint8_t hi, uint32_t to) {
  nodes_[from].edges.push_back({edge::kind::bytes, lo, hi, 0, to});
}

void grammar_builder::add_literal(uint32_t from, std::string_view text, uint32_t to) {
  if (text.empty()) {
    add_epsilon(from, to);
    return;
  }
  uint32_t cur = from;
  for (size_t i = 0; i < text.size(); ++i) {
    uint32_t next = i + 1 == text.size() ? to : add_node(nodes_[from].rule);
    auto b = static_cast<uint8_t>(text[i]);
    add_bytes(cur, b, b, next);
    cur = next;
  }
}

void grammar_builder::add_epsilon(uint32_t from, uint32_t to) {
  nodes_[from].edges.push_back({edge::kind::epsilon, 0, 0, 0, to});
}

void grammar_builder::add_call(uint32_t from, uint32_t rule, uint32_t to) {
  nodes_[from].edges.push_back({edge::kind::call, 0, 0, rule, to});
}

void grammar_builder::set_accepting(uint32_t n) { nodes_[n].accepting = true; }

namespace {

constexpr uint32_t unreachable = std::numeric_limits<uint32_t>::max();

uint64_t fnv(uint64_t h, uint64_t v) {
  for (int i = 0; i < 8; ++i) {
    h ^= (v >> (8 * i)) & 0xFF;
    h *= 1099511628211ull;
  }
  return h;
}

} // namespace

std::shared_ptr<const grammar> grammar_builder::finalize(uint32_t root, const grammar_limits& limits,
                                                         grammar_error& error) const {
  auto g = std::make_shared<grammar>();
  std::vector<uint32_t> mark(nodes_.size(), 0);
  uint32_t epoch = 0;

  auto closure = [&](std::vector<uint32_t> set) {
    ++epoch;
    std::vector<uint32_t> stack = set;
    for (uint32_t n : set)
      mark[n] = epoch;
    while (!stack.empty()) {
      uint32_t n = stack.back();
      stack.pop_back();
      for (const edge& e : nodes_[n].edges) {
        if (e.k == edge::kind::epsilon && mark[e.to] != epoch) {
          mark[e.to] = epoch;
          set.push_back(e.to);
          stack.push_back(e.to);
        }
      }
    }
    std::sort(set.begin(), set.end());
    return set;
  };

  // Per rule, the subset construction. DFA node ids are global.
  struct pending_node {
    std::vector<byte_edge> bytes;
    std::vector<call_edge> calls;
    bool accepting = false;
  };
  std::vector<pending_node> out;
  g->rule_starts_.resize(rule_start_.size());
  for (uint32_t rule = 0; rule < rule_start_.size(); ++rule) {
    std::map<std::vector<uint32_t>, uint32_t> ids;
    std::vector<std::vector<uint32_t>> queue;
    auto intern = [&](std::vector<uint32_t> set) -> uint32_t {
      auto [it, fresh] = ids.emplace(std::move(set), static_cast<uint32_t>(out.size()));
      if (fresh) {
        out.emplace_back();
        queue.push_back(it->first);
      }
      return it->second;
    };
    g->rule_starts_[rule] = intern(closure({rule_start_[rule]}));
    for (size_t qi = 0; qi < queue.size(); ++qi) {
      if (out.size() > limits.max_nodes) {
        error = {"", "", "the schema compiles to more than " + std::to_string(limits.max_nodes) +
                             " automaton states; simplify it (smaller maxLength/maxItems/pattern)"};
        return nullptr;
      }
      std::vector<uint32_t> set = queue[qi];
      uint32_t id = ids.at(set);
      pending_node pn;
      // Elementary byte intervals from every edge boundary.
      std::vector<int> cuts{0, 256};
      std::map<uint32_t, std::vector<uint32_t>> call_targets;
      for (uint32_t n : set) {
        pn.accepting = pn.accepting || nodes_[n].accepting;
        for (const edge& e : nodes_[n].edges) {
          if (e.k == edge::kind::bytes) {
            cuts.push_back(e.lo);
            cuts.push_back(e.hi + 1);
          } else if (e.k == edge::kind::call) {
            call_targets[e.rule].push_back(e.to);
          }
        }
      }
      std::sort(cuts.begin(), cuts.end());
      cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
      for (size_t c = 0; c + 1 < cuts.size(); ++c) {
        int lo = cuts[c];
        int hi = cuts[c + 1] - 1;
        std::vector<uint32_t> target;
        for (uint32_t n : set)
          for (const edge& e : nodes_[n].edges)
            if (e.k == edge::kind::bytes && e.lo <= lo && hi <= e.hi)
              target.push_back(e.to);
        if (target.empty())
          continue;
        std::sort(target.begin(), target.end());
        target.erase(std::unique(target.begin(), target.end()), target.end());
        uint32_t to = intern(closure(std::move(target)));
        if (!pn.bytes.empty() && pn.bytes.back().to == to && pn.bytes.back().hi + 1 == lo)
          pn.bytes.back().hi = static_cast<uint8_t>(hi);
        else
          pn.bytes.push_back({static_cast<uint8_t>(lo), static_cast<uint8_t>(hi), to});
      }
      for (auto& [callee, rets] : call_targets) {
        std::sort(rets.begin(), rets.end());
        rets.erase(std::unique(rets.begin(), rets.end()), rets.end());
        pn.calls.push_back({callee, intern(closure(rets))});
      }
      out[id] = std::move(pn);
    }
  }

  // Shortest completions: relax until stable (reverse order converges fast,
  // the subset construction numbers nodes breadth-first from each start).
  std::vector<uint32_t> dist(out.size(), unreachable);
  auto min_len = [&](uint32_t rule) { return dist[g->rule_starts_[rule]]; };
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = out.size(); i-- > 0;) {
      const pending_node& n = out[i];
      uint64_t best = n.accepting ? 0 : unreachable;
      for (const byte_edge& e : n.bytes)
        best = std::min<uint64_t>(best, 1ull + dist[e.to]);
      for (const call_edge& c : n.calls)
        best = std::min<uint64_t>(best, uint64_t{min_len(c.rule)} + dist[c.ret]);
      auto b = static_cast<uint32_t>(std::min<uint64_t>(best, unreachable));
      if (b < dist[i]) {
        dist[i] = b;
        changed = true;
      }
    }
  }
  // Flatten, dropping edges into dead ends (nodes with no way to finish), so
  // a matcher never enters a state it cannot complete.
  for (size_t i = 0; i < out.size(); ++i) {
    const pending_node& pn = out[i];
    grammar_node gn;
    gn.bytes_begin = static_cast<uint32_t>(g->bytes_.size());
    for (const byte_edge& e : pn.bytes)
      if (dist[e.to] != unreachable)
        g->bytes_.push_back(e);
    gn.bytes_end = static_cast<uint32_t>(g->bytes_.size());
    gn.calls_begin = static_cast<uint32_t>(g->calls_.size());
    for (const call_edge& c : pn.calls)
      if (min_len(c.rule) != unreachable && dist[c.ret] != unreachable)
        g->calls_.push_back(c);
    gn.calls_end = static_cast<uint32_t>(g->calls_.size());
    gn.accepting = pn.accepting;
    gn.min_bytes_to_end = dist[i];
    g->nodes_.push_back(gn);
  }
  g->root_ = root;
  auto& nodes = g->nodes_;
  {
    uint32_t rule = root;
    if (min_len(rule) == unreachable) {
      error = {"", "", "part of the schema has no finite JSON instance (a $ref recursion "
                       "without a way out, or contradictory bounds)"};
      return nullptr;
    }
  }
  for (uint32_t rule = 0; rule < rule_start_.size(); ++rule) {
    if (min_len(rule) == 0) {
      error = {"", "", "internal: a grammar rule matches the empty input"};
      return nullptr;
    }
  }
  // Recursion without consuming a byte: rule -> rule called at its start.
  std::vector<int> state(rule_start_.size(), 0);
  std::function<bool(uint32_t)> cyclic = [&](uint32_t r) {
    if (state[r] == 1)
      return true;
    if (state[r] == 2)
      return false;
    state[r] = 1;
    const grammar_node& s = nodes[g->rule_starts_[r]];
    for (uint32_t e = s.calls_begin; e < s.calls_end; ++e)
      if (cyclic(g->calls_[e].rule))
        return true;
    state[r] = 2;
    return false;
  };
  for (uint32_t r = 0; r < rule_start_.size(); ++r) {
    if (cyclic(r)) {
      error = {"", "$ref", "the schema refers to itself without any JSON text in between "
                           "(left recursion through $ref/anyOf)"};
      return nullptr;
    }
  }

  uint64_t h = 14695981039346656037ull;
  for (const auto& n : nodes)
    h = fnv(fnv(fnv(h, n.bytes_begin), n.calls_begin), n.accepting);
  for (const auto& e : g->bytes_)
    h = fnv(h, (uint64_t{e.lo} << 40) | (uint64_t{e.hi} << 32) | e.to);
  for (const auto& c : g->calls_)
    h = fnv(h, (uint64_t{c.rule} << 32) | c.ret);
  h = fnv(h, root);
  g->fingerprint_ = h;
  return g;
}

} // namespace tessera::engine::grammar
