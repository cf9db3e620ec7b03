#include "engine/byte_level.hpp"

#include <unordered_map>

namespace tessera::engine {

namespace {

std::string encode_code_point(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    s.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return s;
}

std::array<uint32_t, 256> make_code_points() {
  std::array<uint32_t, 256> cps{};
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    cps[b] = printable ? b : next++;
  }
  return cps;
}

/// Code point -> byte, for the 256 code points of the mapping.
const std::unordered_map<uint32_t, uint8_t>& code_point_to_byte() {
  static const auto table = [] {
    std::unordered_map<uint32_t, uint8_t> m;
    auto cps = make_code_points();
    for (uint32_t b = 0; b < 256; ++b)
      m.emplace(cps[b], static_cast<uint8_t>(b));
    return m;
  }();
  return table;
}

} // namespace

const std::array<std::string, 256>& byte_level_chars() {
  static const auto table = [] {
    std::array<std::string, 256> t;
    auto cps = make_code_points();
    for (size_t b = 0; b < 256; ++b)
      t[b] = encode_code_point(cps[b]);
    return t;
  }();
  return table;
}

std::string to_byte_level(std::string_view bytes) {
  const auto& chars = byte_level_chars();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes)
    out += chars[static_cast<uint8_t>(c)];
  return out;
}

std::string from_byte_level(std::string_view token) {
  const auto& table = code_point_to_byte();
  std::string out;
  out.reserve(token.size());
  size_t i = 0;
  while (i < token.size()) {
    auto b0 = static_cast<uint8_t>(token[i]);
    // Every mapped character is 1 or 2 UTF-8 bytes (U+0021..U+0143).
    size_t len = b0 < 0x80 ? 1 : (b0 & 0xE0) == 0xC0 ? 2 : (b0 & 0xF0) == 0xE0 ? 3 : 4;
    if (i + len > token.size())
      len = token.size() - i;
    uint32_t cp = 0;
    if (len == 1) {
      cp = b0;
    } else if (len == 2) {
      cp = ((b0 & 0x1Fu) << 6) | (static_cast<uint8_t>(token[i + 1]) & 0x3Fu);
    } else {
      cp = 0xFFFFFFFF; // never in the table
    }
    if (auto it = table.find(cp); it != table.end())
      out.push_back(static_cast<char>(it->second));
    else
      out.append(token.substr(i, len));
    i += len;
  }
  return out;
}

} // namespace tessera::engine
