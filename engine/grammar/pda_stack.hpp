#pragma once
/// @file
/// The pushdown stacks a matcher holds, as a persistent arena of frames
/// (each frame: a grammar node and the frame below it), so that many
/// stacks share their bottoms and a step pushes one or two frames instead
/// of copying a stack. Used by grammar_matcher (accepting bytes) and
/// token_masker (walking the vocabulary trie); internal to the grammar
/// library.

#include <algorithm>
#include <cstdint>
#include <vector>

#include "engine/grammar/grammar.hpp"

namespace tessera::engine::grammar {

/// One stack frame. The top frame's node is where the matcher is; lower
/// frames' nodes are where their rule continues once the rule above ends.
struct stack_frame {
  uint32_t node = 0;
  uint32_t parent = no_node; // index of the frame below, or no_node
  uint32_t depth = 0;        // frames below this one
};

/// A set of stacks (their top frames, each top at a node with byte edges)
/// plus whether some stack has finished the document.
struct stack_tops {
  std::vector<uint32_t> tops;
  bool ended = false;
};

/// Operations on an arena of frames over one grammar. Cheap to construct.
class stack_ops {
public:
  stack_ops(const grammar& g, std::vector<stack_frame>& arena, uint32_t max_depth)
      : g_(g), arena_(arena), max_depth_(max_depth) {}

  /// Expands frame `f` (calls pushed, finished rules popped) into `out`.
  void close(uint32_t f, stack_tops& out) {
    const grammar_node& n = g_.nodes()[arena_[f].node];
    if (n.bytes_begin != n.bytes_end)
      add_unique(f, out.tops);
    for (uint32_t e = n.calls_begin; e < n.calls_end; ++e) {
      if (arena_[f].depth + 1 >= max_depth_)
        break;
      const call_edge& c = g_.call_edges()[e];
      uint32_t ret = push({c.ret, arena_[f].parent, arena_[f].depth});
      uint32_t callee = push({g_.rule_starts()[c.rule], ret, arena_[f].depth + 1});
      close(callee, out);
    }
    if (n.accepting) {
      if (arena_[f].parent == no_node)
        out.ended = true;
      else
        close(arena_[f].parent, out);
    }
  }

  /// The stacks after `byte` from `in`, into `out` (cleared first).
  void step(const stack_tops& in, uint8_t byte, stack_tops& out) {
    out.tops.clear();
    out.ended = false;
    for (uint32_t t : in.tops) {
      uint32_t to = g_.step(arena_[t].node, byte);
      if (to != no_node)
        close(push({to, arena_[t].parent, arena_[t].depth}), out);
    }
  }

  /// Fewest bytes that finish the document from `tops` (0 if ended).
  [[nodiscard]] uint32_t distance(const stack_tops& s) const {
    if (s.ended)
      return 0;
    uint64_t best = no_node;
    for (uint32_t t : s.tops) {
      uint64_t sum = 0;
      for (uint32_t f = t; f != no_node; f = arena_[f].parent)
        sum += g_.nodes()[arena_[f].node].min_bytes_to_end;
      best = std::min(best, sum);
    }
    return static_cast<uint32_t>(std::min<uint64_t>(best, no_node));
  }

  uint32_t push(const stack_frame& f) {
    arena_.push_back(f);
    return static_cast<uint32_t>(arena_.size() - 1);
  }

private:
  bool same_stack(uint32_t a, uint32_t b) const {
    while (a != b) {
      if (a == no_node || b == no_node || arena_[a].node != arena_[b].node)
        return false;
      a = arena_[a].parent;
      b = arena_[b].parent;
    }
    return true;
  }
  void add_unique(uint32_t f, std::vector<uint32_t>& tops) const {
    for (uint32_t t : tops)
      if (same_stack(t, f))
        return;
    tops.push_back(f);
  }

  const grammar& g_;
  std::vector<stack_frame>& arena_;
  uint32_t max_depth_;
};

} // namespace tessera::engine::grammar
