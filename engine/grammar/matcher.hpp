#pragma once
/// @file
/// The state of one constrained generation: where in the grammar the bytes
/// so far have led (a set of pushdown stacks). Copy it to roll back; ship
/// it between workers with serialize()/deserialize().

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/grammar/grammar.hpp"
#include "engine/grammar/pda_stack.hpp"

namespace tessera::engine::grammar {

/// Deepest nesting a matcher follows (JSON arrays/objects inside each
/// other count one per level and one per called rule). Deeper calls are
/// not taken, so a model cannot grow the state without bound.
constexpr uint32_t default_max_stack_depth = 512;

/// Matches bytes against a grammar. A value type: copying is cheap (the
/// stacks are a few frames) and copies are independent. Not thread-safe;
/// the grammar it points to is shared and immutable.
class grammar_matcher {
public:
  /// At the start of a document of `g`.
  explicit grammar_matcher(std::shared_ptr<const grammar> g,
                           uint32_t max_depth = default_max_stack_depth);

  /// Advances by one byte. Returns false (and changes nothing) if the
  /// grammar does not allow it here.
  bool accept_byte(uint8_t byte);
  /// Advances by all of `bytes`, or returns false and changes nothing.
  bool accept_bytes(std::string_view bytes);
  /// The bytes so far are a complete document.
  [[nodiscard]] bool can_end() const { return state_.ended; }
  /// No more bytes are allowed (the document is complete and closed).
  [[nodiscard]] bool finished() const { return state_.tops.empty(); }
  /// Fewest bytes that complete the document from here (0 if can_end()).
  [[nodiscard]] uint32_t min_bytes_to_end() const;

  /// The state as bytes: the grammar's fingerprint, then each stack's
  /// nodes. A few dozen bytes for typical JSON.
  [[nodiscard]] std::string serialize() const;
  /// The matcher serialize() wrote, for the same grammar. A state from
  /// another grammar, truncated, or with node ids out of range is refused
  /// with `error` naming what is wrong.
  [[nodiscard]] static std::optional<grammar_matcher>
  deserialize(std::shared_ptr<const grammar> g, std::string_view bytes, std::string& error,
              uint32_t max_depth = default_max_stack_depth);

  [[nodiscard]] const grammar& grammar_ref() const { return *g_; }
  [[nodiscard]] const std::shared_ptr<const grammar>& grammar_ptr() const { return g_; }
  /// The stacks (for token_masker).
  [[nodiscard]] const std::vector<stack_frame>& frames() const { return frames_; }
  [[nodiscard]] const stack_tops& tops() const { return state_; }
  [[nodiscard]] uint32_t max_depth() const { return max_depth_; }

private:
  void compact();

  std::shared_ptr<const grammar> g_;
  uint32_t max_depth_;
  std::vector<stack_frame> frames_;
  stack_tops state_;
};

} // namespace tessera::engine::grammar
