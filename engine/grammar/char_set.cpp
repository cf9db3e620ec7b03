#include "engine/grammar/char_set.hpp"

#include <algorithm>

namespace tessera::engine::grammar {

namespace {

constexpr uint32_t surrogate_lo = 0xD800;
constexpr uint32_t surrogate_hi = 0xDFFF;

size_t encode_utf8(uint32_t c, uint8_t* out) {
  if (c < 0x80) {
    out[0] = static_cast<uint8_t>(c);
    return 1;
  }
  if (c < 0x800) {
    out[0] = static_cast<uint8_t>(0xC0 | (c >> 6));
    out[1] = static_cast<uint8_t>(0x80 | (c & 0x3F));
    return 2;
  }
  if (c < 0x10000) {
    out[0] = static_cast<uint8_t>(0xE0 | (c >> 12));
    out[1] = static_cast<uint8_t>(0x80 | ((c >> 6) & 0x3F));
    out[2] = static_cast<uint8_t>(0x80 | (c & 0x3F));
    return 3;
  }
  out[0] = static_cast<uint8_t>(0xF0 | (c >> 18));
  out[1] = static_cast<uint8_t>(0x80 | ((c >> 12) & 0x3F));
  out[2] = static_cast<uint8_t>(0x80 | ((c >> 6) & 0x3F));
  out[3] = static_cast<uint8_t>(0x80 | (c & 0x3F));
  return 4;
}

// The classic split (RE2, Rust's utf8-ranges): cut [lo, hi] until both ends
// encode to the same length and every byte position is a plain range.
void split_utf8(uint32_t lo, uint32_t hi,
                const std::function<void(const byte_range*, size_t)>& emit) {
  if (lo > hi)
    return;
  for (uint32_t max : {0x7Fu, 0x7FFu, 0xFFFFu}) {
    if (lo <= max && max < hi) {
      split_utf8(lo, max, emit);
      split_utf8(max + 1, hi, emit);
      return;
    }
  }
  if (hi < 0x80) {
    byte_range r{static_cast<uint8_t>(lo), static_cast<uint8_t>(hi)};
    emit(&r, 1);
    return;
  }
  for (uint32_t i = 1; i < 4; ++i) {
    uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split_utf8(lo, lo | m, emit);
        split_utf8((lo | m) + 1, hi, emit);
        return;
      }
      if ((hi & m) != m) {
        split_utf8(lo, (hi & ~m) - 1, emit);
        split_utf8(hi & ~m, hi, emit);
        return;
      }
    }
  }
  uint8_t a[4];
  uint8_t b[4];
  size_t n = encode_utf8(lo, a);
  encode_utf8(hi, b);
  byte_range seq[4];
  for (size_t i = 0; i < n; ++i)
    seq[i] = {a[i], b[i]};
  emit(seq, n);
}

} // namespace

char_set char_set::range(uint32_t lo, uint32_t hi) {
  char_set s;
  s.add(lo, hi);
  return s;
}

char_set char_set::any() { return range(0, max_code_point); }

void char_set::add(uint32_t lo, uint32_t hi) {
  hi = std::min(hi, max_code_point);
  if (lo > hi)
    return;
  // Cut out the surrogates.
  if (lo <= surrogate_hi && hi >= surrogate_lo) {
    if (lo < surrogate_lo)
      ranges_.push_back({lo, surrogate_lo - 1});
    if (hi > surrogate_hi)
      ranges_.push_back({surrogate_hi + 1, hi});
  } else {
    ranges_.push_back({lo, hi});
  }
  normalise();
}

void char_set::add(const char_set& other) {
  ranges_.insert(ranges_.end(), other.ranges_.begin(), other.ranges_.end());
  normalise();
}

void char_set::normalise() {
  std::sort(ranges_.begin(), ranges_.end());
  std::vector<code_range> out;
  for (const auto& r : ranges_) {
    if (!out.empty() && r.lo <= out.back().hi + 1)
      out.back().hi = std::max(out.back().hi, r.hi);
    else
      out.push_back(r);
  }
  ranges_ = std::move(out);
}

char_set char_set::complement() const {
  char_set out;
  uint32_t next = 0;
  for (const auto& r : ranges_) {
    if (r.lo > next)
      out.ranges_.push_back({next, r.lo - 1});
    next = r.hi + 1;
  }
  if (next <= max_code_point)
    out.ranges_.push_back({next, max_code_point});
  // Re-add through add() to drop the surrogates.
  char_set clean;
  for (const auto& r : out.ranges_)
    clean.add(r.lo, r.hi);
  return clean;
}

char_set char_set::intersect(const char_set& other) const {
  char_set out;
  size_t i = 0;
  size_t j = 0;
  while (i < ranges_.size() && j < other.ranges_.size()) {
    uint32_t lo = std::max(ranges_[i].lo, other.ranges_[j].lo);
    uint32_t hi = std::min(ranges_[i].hi, other.ranges_[j].hi);
    if (lo <= hi)
      out.ranges_.push_back({lo, hi});
    if (ranges_[i].hi < other.ranges_[j].hi)
      ++i;
    else
      ++j;
  }
  return out;
}

bool char_set::contains(uint32_t c) const {
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), c,
                             [](uint32_t v, const code_range& r) { return v < r.lo; });
  return it != ranges_.begin() && std::prev(it)->hi >= c;
}

void utf8_sequences(const char_set& set,
                    const std::function<void(const byte_range*, size_t)>& emit) {
  for (const auto& r : set.ranges())
    split_utf8(r.lo, r.hi, emit);
}

} // namespace tessera::engine::grammar
