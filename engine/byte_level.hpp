#pragma once
/// @file
/// GPT-2's reversible byte <-> printable-character mapping used by
/// byte-level BPE vocabularies ("Ġ" for a space, "Ċ" for a newline).

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace tessera::engine {

/// The UTF-8 text of the character that stands for each byte value
/// (GPT-2 `bytes_to_unicode`). Printable Latin-1 bytes map to themselves,
/// the rest to U+0100 onward in byte order.
[[nodiscard]] const std::array<std::string, 256>& byte_level_chars();

/// Maps raw bytes to their byte-level characters ("a b" -> "aĠb").
[[nodiscard]] std::string to_byte_level(std::string_view bytes);

/// Maps a byte-level token back to raw bytes ("Ġthe" -> " the").
/// Characters outside the mapping are copied through as their UTF-8.
[[nodiscard]] std::string from_byte_level(std::string_view token);

} // namespace tessera::engine
