#pragma once
/// @file
/// The built-in demo model: a random-weight `small` model written once to
/// the user's cache folder, used when no --model is given.

#include <filesystem>

#include <caf/expected.hpp>

namespace tessera::cli {

/// Returns the demo model's folder, writing it first if it is missing
/// ($XDG_CACHE_HOME/tessera/demo-small-bf16, or ~/.cache/..., or /tmp/...).
/// Prints progress to stderr while writing.
[[nodiscard]] caf::expected<std::filesystem::path> ensure_demo_model();

} // namespace tessera::cli
