#pragma once
/// @file
/// Reads a whole (small) file into memory, with errors that name the file.

#include <filesystem>
#include <string>

#include <caf/expected.hpp>

namespace tessera::engine {

/// The contents of `file`. Fails with engine_errc::io_error naming the
/// file when it cannot be opened or read.
[[nodiscard]] caf::expected<std::string> read_file_text(const std::filesystem::path& file);

} // namespace tessera::engine
