#pragma once
/// @file
/// Running the tessera binary from a test (TESSERA_BINARY_DIR/cli/tessera).

#include <string>

namespace tessera::test {

/// What a run printed and how it ended.
struct run_result {
  int exit_code = -1;
  std::string out; // stdout and stderr together
};

/// The path of the tessera binary under test.
[[nodiscard]] std::string tessera_binary();

/// Runs `tessera <args>` through the shell (args are not quoted) and waits.
[[nodiscard]] run_result run_tessera(const std::string& args);

} // namespace tessera::test
