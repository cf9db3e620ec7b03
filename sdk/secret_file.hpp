#pragma once
/// @file
/// Internal to sdk/: reading the cluster secret file as the nodes read it
/// (cluster/cluster_secret.cpp), without linking server code.

#include <filesystem>
#include <string>

namespace tessera::sdk::detail {

/// The secret in `file`: its bytes without trailing whitespace. Throws
/// sdk::error(bad_request) naming the file and the fix: missing or
/// unreadable, group- or world-accessible (chmod 600), not a regular file,
/// shorter than 16 or longer than 4096 bytes.
[[nodiscard]] std::string read_secret_file(const std::filesystem::path& file);

} // namespace tessera::sdk::detail
