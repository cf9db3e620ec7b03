#pragma once
/// @file
/// Process-wide logging set-up (spdlog). Libraries log through spdlog's
/// default logger; binaries call init_logging once at start.

#include <string_view>

namespace tessera {

/// Configures the default spdlog logger to write to stderr at `level`
/// ("trace", "debug", "info", "warn", "error", "off"). Unknown levels fall
/// back to "info". Not thread-safe; call before starting threads.
void init_logging(std::string_view level);

} // namespace tessera
