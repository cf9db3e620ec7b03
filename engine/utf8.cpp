#include "engine/utf8.hpp"

#include <cstdint>

namespace tessera::engine {

namespace {

/// How a lead byte constrains the bytes after it (Unicode table 3-7).
struct utf8_lead {
  int length = 0;          // 0: not a lead byte
  uint8_t second_lo = 0x80; // range of the first continuation byte
  uint8_t second_hi = 0xBF;
};

utf8_lead classify(uint8_t b) {
  if (b < 0x80)
    return {1};
  if (b >= 0xC2 && b <= 0xDF)
    return {2};
  if (b == 0xE0)
    return {3, 0xA0, 0xBF}; // no overlongs
  if (b == 0xED)
    return {3, 0x80, 0x9F}; // no surrogates
  if (b >= 0xE1 && b <= 0xEF)
    return {3};
  if (b == 0xF0)
    return {4, 0x90, 0xBF}; // no overlongs
  if (b == 0xF4)
    return {4, 0x80, 0x8F}; // nothing above U+10FFFF
  if (b >= 0xF1 && b <= 0xF3)
    return {4};
  return {}; // 0x80..0xC1, 0xF5..0xFF
}

enum class scan_result { complete, invalid, incomplete };

/// Inspects the character starting at `bytes[i]`; sets `len` to its length
/// (complete), to the length of the maximal ill-formed subpart (invalid) or
/// to the bytes present (incomplete).
scan_result scan_one(std::string_view bytes, size_t i, size_t& len) {
  auto lead = classify(static_cast<uint8_t>(bytes[i]));
  if (lead.length == 0) {
    len = 1;
    return scan_result::invalid;
  }
  for (int k = 1; k < lead.length; ++k) {
    if (i + k >= bytes.size()) {
      len = static_cast<size_t>(k);
      return scan_result::incomplete;
    }
    auto c = static_cast<uint8_t>(bytes[i + k]);
    uint8_t lo = k == 1 ? lead.second_lo : 0x80;
    uint8_t hi = k == 1 ? lead.second_hi : 0xBF;
    if (c < lo || c > hi) {
      len = static_cast<size_t>(k);
      return scan_result::invalid;
    }
  }
  len = static_cast<size_t>(lead.length);
  return scan_result::complete;
}

} // namespace

size_t utf8_append_valid(std::string_view bytes, std::string& out, bool final) {
  size_t i = 0;
  while (i < bytes.size()) {
    // Fast path for ASCII runs.
    if (static_cast<uint8_t>(bytes[i]) < 0x80) {
      size_t j = i + 1;
      while (j < bytes.size() && static_cast<uint8_t>(bytes[j]) < 0x80)
        ++j;
      out.append(bytes.substr(i, j - i));
      i = j;
      continue;
    }
    size_t len = 0;
    switch (scan_one(bytes, i, len)) {
      case scan_result::complete:
        out.append(bytes.substr(i, len));
        break;
      case scan_result::invalid:
        out.append(utf8_replacement);
        break;
      case scan_result::incomplete:
        if (!final)
          return i;
        out.append(utf8_replacement);
        break;
    }
    i += len;
  }
  return i;
}

std::string utf8_sanitize(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  utf8_append_valid(bytes, out, true);
  return out;
}

bool utf8_is_valid(std::string_view bytes) {
  size_t i = 0;
  while (i < bytes.size()) {
    size_t len = 0;
    if (scan_one(bytes, i, len) != scan_result::complete)
      return false;
    i += len;
  }
  return true;
}

size_t utf8_incomplete_tail(std::string_view bytes) {
  // Only the last 3 bytes can start an incomplete character.
  size_t from = bytes.size() > 3 ? bytes.size() - 3 : 0;
  for (size_t i = from; i < bytes.size(); ++i) {
    size_t len = 0;
    if (scan_one(bytes, i, len) == scan_result::incomplete)
      return bytes.size() - i;
  }
  return 0;
}

} // namespace tessera::engine
