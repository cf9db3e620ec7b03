#include "common/text_tail.hpp"

#include <algorithm>
#include <fstream>

namespace tessera {

std::string tail_lines(const std::string& text, size_t lines) {
  size_t start = text.size();
  size_t seen = 0;
  if (start > 0 && text[start - 1] == '\n')
    --start;
  while (start > 0 && seen < lines) {
    --start;
    if (text[start] == '\n' && ++seen == lines) {
      ++start;
      break;
    }
  }
  std::string out;
  size_t pos = start;
  while (pos < text.size()) {
    auto end = text.find('\n', pos);
    if (end == std::string::npos)
      end = text.size();
    out += "  " + text.substr(pos, end - pos) + "\n";
    pos = end + 1;
  }
  return out;
}

std::string file_tail(const std::filesystem::path& file, size_t lines) {
  constexpr std::streamoff window = 64 * 1024;
  std::ifstream in(file, std::ios::binary | std::ios::ate);
  if (!in)
    return {};
  const std::streamoff size = in.tellg();
  if (size <= 0) // empty, or a stream that cannot tell its size
    return {};
  const std::streamoff from = std::max<std::streamoff>(0, size - window);
  in.seekg(from);
  std::string text(static_cast<size_t>(size - from), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(std::max<std::streamsize>(0, in.gcount())));
  return tail_lines(text, lines);
}

} // namespace tessera
