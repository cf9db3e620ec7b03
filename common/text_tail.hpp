#pragma once
/// @file
/// The end of a text or of a log file, for error messages that show what
/// a process said last (a node that did not start, a job that failed).

#include <cstddef>
#include <filesystem>
#include <string>

namespace tessera {

/// The last `lines` lines of `text`, each indented by two spaces.
[[nodiscard]] std::string tail_lines(const std::string& text, size_t lines);

/// The last `lines` lines of the file at `file` (of at most its last
/// 64 KiB), indented as tail_lines does; empty if it cannot be read.
[[nodiscard]] std::string file_tail(const std::filesystem::path& file, size_t lines);

} // namespace tessera
