#include "engine/grammar/matcher.hpp"

#include <cstring>

namespace tessera::engine::grammar {

namespace {

constexpr uint32_t state_magic = 0x314D4754; // "TGM1"
constexpr uint32_t max_serialized_stacks = 4096;

void put32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

bool get32(std::string_view in, size_t& pos, uint32_t& v) {
  if (pos + 4 > in.size())
    return false;
  v = 0;
  for (int i = 0; i < 4; ++i)
    v |= uint32_t{static_cast<uint8_t>(in[pos + i])} << (8 * i);
  pos += 4;
  return true;
}

} // namespace

grammar_matcher::grammar_matcher(std::shared_ptr<const grammar> g, uint32_t max_depth)
    : g_(std::move(g)), max_depth_(max_depth) {
  stack_ops ops(*g_, frames_, max_depth_);
  uint32_t root = ops.push({g_->rule_starts()[g_->root_rule()], no_node, 0});
  ops.close(root, state_);
  compact();
}

bool grammar_matcher::accept_byte(uint8_t byte) {
  stack_ops ops(*g_, frames_, max_depth_);
  size_t mark = frames_.size();
  stack_tops next;
  ops.step(state_, byte, next);
  if (next.tops.empty() && !next.ended) {
    frames_.resize(mark);
    return false;
  }
  state_ = std::move(next);
  compact();
  return true;
}

bool grammar_matcher::accept_bytes(std::string_view bytes) {
  grammar_matcher copy = *this;
  for (char c : bytes)
    if (!copy.accept_byte(static_cast<uint8_t>(c)))
      return false;
  *this = std::move(copy);
  return true;
}

uint32_t grammar_matcher::min_bytes_to_end() const {
  auto& frames = const_cast<std::vector<stack_frame>&>(frames_);
  stack_ops ops(*g_, frames, max_depth_);
  return ops.distance(state_);
}

void grammar_matcher::compact() {
  std::vector<uint32_t> remap(frames_.size(), no_node);
  std::vector<stack_frame> out;
  std::vector<uint32_t> chain;
  for (uint32_t& t : state_.tops) {
    chain.clear();
    for (uint32_t f = t; f != no_node && remap[f] == no_node; f = frames_[f].parent)
      chain.push_back(f);
    for (size_t i = chain.size(); i-- > 0;) {
      stack_frame f = frames_[chain[i]];
      if (f.parent != no_node)
        f.parent = remap[f.parent];
      out.push_back(f);
      remap[chain[i]] = static_cast<uint32_t>(out.size() - 1);
    }
    t = remap[t];
  }
  frames_ = std::move(out);
}

std::string grammar_matcher::serialize() const {
  std::string out;
  put32(out, state_magic);
  uint64_t fp = g_->fingerprint();
  put32(out, static_cast<uint32_t>(fp));
  put32(out, static_cast<uint32_t>(fp >> 32));
  put32(out, state_.ended ? 1 : 0);
  put32(out, static_cast<uint32_t>(state_.tops.size()));
  std::vector<uint32_t> chain;
  for (uint32_t t : state_.tops) {
    chain.clear();
    for (uint32_t f = t; f != no_node; f = frames_[f].parent)
      chain.push_back(frames_[f].node);
    put32(out, static_cast<uint32_t>(chain.size()));
    for (size_t i = chain.size(); i-- > 0;)
      put32(out, chain[i]);
  }
  return out;
}

std::optional<grammar_matcher> grammar_matcher::deserialize(std::shared_ptr<const grammar> g,
                                                            std::string_view bytes,
                                                            std::string& error,
                                                            uint32_t max_depth) {
  size_t pos = 0;
  uint32_t magic = 0, fp_lo = 0, fp_hi = 0, ended = 0, count = 0;
  if (!get32(bytes, pos, magic) || magic != state_magic) {
    error = "not a grammar matcher state (bad magic)";
    return std::nullopt;
  }
  if (!get32(bytes, pos, fp_lo) || !get32(bytes, pos, fp_hi) || !get32(bytes, pos, ended) ||
      !get32(bytes, pos, count)) {
    error = "truncated grammar matcher state";
    return std::nullopt;
  }
  if ((uint64_t{fp_hi} << 32 | fp_lo) != g->fingerprint()) {
    error = "the matcher state belongs to a different grammar";
    return std::nullopt;
  }
  if (ended > 1 || count > max_serialized_stacks) {
    error = "corrupt grammar matcher state (flags or stack count)";
    return std::nullopt;
  }
  grammar_matcher m(g, max_depth);
  m.frames_.clear();
  m.state_ = {};
  m.state_.ended = ended == 1;
  const auto& nodes = g->nodes();
  for (uint32_t s = 0; s < count; ++s) {
    uint32_t len = 0;
    if (!get32(bytes, pos, len)) {
      error = "truncated grammar matcher state";
      return std::nullopt;
    }
    if (len == 0 || len > max_depth) {
      error = "corrupt grammar matcher state (stack depth " + std::to_string(len) + ")";
      return std::nullopt;
    }
    uint32_t parent = no_node;
    for (uint32_t d = 0; d < len; ++d) {
      uint32_t node = 0;
      if (!get32(bytes, pos, node)) {
        error = "truncated grammar matcher state";
        return std::nullopt;
      }
      if (node >= nodes.size()) {
        error = "corrupt grammar matcher state (node " + std::to_string(node) + " out of range)";
        return std::nullopt;
      }
      m.frames_.push_back({node, parent, d});
      parent = static_cast<uint32_t>(m.frames_.size() - 1);
    }
    const grammar_node& top = nodes[m.frames_[parent].node];
    if (top.bytes_begin == top.bytes_end) {
      error = "corrupt grammar matcher state (a stack top that accepts no byte)";
      return std::nullopt;
    }
    m.state_.tops.push_back(parent);
  }
  if (pos != bytes.size()) {
    error = "corrupt grammar matcher state (trailing bytes)";
    return std::nullopt;
  }
  if (m.state_.tops.empty() && !m.state_.ended) {
    error = "corrupt grammar matcher state (no stack and not ended)";
    return std::nullopt;
  }
  return m;
}

} // namespace tessera::engine::grammar
