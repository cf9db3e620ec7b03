#pragma once
/// @file
/// A byte-level pushdown grammar: a set of rules, each a deterministic
/// automaton over bytes whose edges may also call another rule (a
/// recursive transition network). Built with grammar_builder (an NFA with
/// epsilon edges per rule), then finalised: each rule determinised, the
/// shortest completion of every node computed, and rules that could recurse
/// without consuming a byte refused.
///
///   builder (NFA per rule) --finalize--> grammar (DFA per rule, immutable)
///
/// Immutable after finalize; share it as shared_ptr<const grammar> between
/// threads.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tessera::engine::grammar {

/// What went wrong compiling a schema or a grammar: the JSON pointer of the
/// schema part at fault (e.g. "/properties/age"), the keyword (e.g.
/// "minimum"), and a sentence.
struct grammar_error {
  std::string pointer;
  std::string keyword;
  std::string message;
  /// "<message> (keyword '<keyword>' at '<pointer>')".
  [[nodiscard]] std::string text() const;
};

/// A byte edge of a finalised node: bytes lo..hi go to node `to`.
struct byte_edge {
  uint8_t lo = 0;
  uint8_t hi = 0;
  uint32_t to = 0;
};

/// A call edge: run rule `rule` from its start, then continue at `ret`.
struct call_edge {
  uint32_t rule = 0;
  uint32_t ret = 0;
};

/// A finalised node. Edge indexes are into grammar::byte_edges() /
/// call_edges(); byte edges are sorted and disjoint.
struct grammar_node {
  uint32_t bytes_begin = 0;
  uint32_t bytes_end = 0;
  uint32_t calls_begin = 0;
  uint32_t calls_end = 0;
  /// The rule may end here (return to its caller, or end the document).
  bool accepting = false;
  /// Fewest bytes from here to the end of this node's rule.
  uint32_t min_bytes_to_end = 0;
};

/// Sentinel for "no node".
constexpr uint32_t no_node = 0xFFFFFFFFu;

/// A finalised grammar. Node ids are global across rules.
class grammar {
public:
  [[nodiscard]] const std::vector<grammar_node>& nodes() const { return nodes_; }
  [[nodiscard]] const std::vector<byte_edge>& byte_edges() const { return bytes_; }
  [[nodiscard]] const std::vector<call_edge>& call_edges() const { return calls_; }
  /// The start node of each rule.
  [[nodiscard]] const std::vector<uint32_t>& rule_starts() const { return rule_starts_; }
  [[nodiscard]] uint32_t root_rule() const { return root_; }
  /// A hash of the whole grammar; serialised matcher states carry it.
  [[nodiscard]] uint64_t fingerprint() const { return fingerprint_; }

  /// The node reached from `node` on `byte`, or no_node.
  [[nodiscard]] uint32_t step(uint32_t node, uint8_t byte) const {
    const grammar_node& n = nodes_[node];
    uint32_t lo = n.bytes_begin;
    uint32_t hi = n.bytes_end;
    while (lo < hi) {
      uint32_t mid = (lo + hi) / 2;
      const byte_edge& e = bytes_[mid];
      if (byte < e.lo)
        hi = mid;
      else if (byte > e.hi)
        lo = mid + 1;
      else
        return e.to;
    }
    return no_node;
  }

private:
  friend class grammar_builder;
  std::vector<grammar_node> nodes_;
  std::vector<byte_edge> bytes_;
  std::vector<call_edge> calls_;
  std::vector<uint32_t> rule_starts_;
  uint32_t root_ = 0;
  uint64_t fingerprint_ = 0;
};

/// Limits on what finalize() builds. Default: enough for schemas an API
/// accepts, small enough that a hostile schema cannot exhaust memory.
struct grammar_limits {
  /// Most nodes after determinisation, all rules together. Default: 2'000'000.
  size_t max_nodes = 2'000'000;
};

/// Builds a grammar: rules of NFA nodes with byte, epsilon and call edges.
/// Not thread-safe; use once.
class grammar_builder {
public:
  /// A new rule with a fresh start node; returns the rule id.
  uint32_t add_rule();
  [[nodiscard]] uint32_t rule_start(uint32_t rule) const { return rule_start_[rule]; }
  /// A new node of `rule`.
  uint32_t add_node(uint32_t rule);
  /// from --[lo..hi]--> to (same rule).
  void add_bytes(uint32_t from, uint8_t lo, uint8_t hi, uint32_t to);
  /// from --literal--> to through fresh nodes; `text` may be empty.
  void add_literal(uint32_t from, std::string_view text, uint32_t to);
  void add_epsilon(uint32_t from, uint32_t to);
  /// from --call rule--> to.
  void add_call(uint32_t from, uint32_t rule, uint32_t to);
  void set_accepting(uint32_t node);
  [[nodiscard]] uint32_t rule_of(uint32_t node) const { return nodes_[node].rule; }
  [[nodiscard]] size_t node_count() const { return nodes_.size(); }

  /// Determinises every rule and checks the grammar: every rule must match
  /// some non-empty input, and no rule may reach itself through calls
  /// without consuming a byte. `root` is the document rule.
  [[nodiscard]] std::shared_ptr<const grammar> finalize(uint32_t root, const grammar_limits& limits,
                                                        grammar_error& error) const;

private:
  struct edge {
    enum class kind : uint8_t { bytes, epsilon, call } k = kind::bytes;
    uint8_t lo = 0;
    uint8_t hi = 0;
    uint32_t rule = 0;
    uint32_t to = 0;
  };
  struct node {
    uint32_t rule = 0;
    bool accepting = false;
    std::vector<edge> edges;
  };
  std::vector<node> nodes_;
  std::vector<uint32_t> rule_start_;
};

} // namespace tessera::engine::grammar
