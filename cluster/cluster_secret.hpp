#pragma once
/// @file
/// The cluster secret: the shared key every node of a multi-node cluster
/// proves it holds before it may join (transport_options::cluster_secret).
///
/// Make one per cluster and copy it to every host, readable by the
/// service's user only:
///
///   umask 077; head -c 32 /dev/urandom | base64 > cluster.secret
///
/// It is named in the cluster TOML (`cluster_secret_file`, relative to
/// the TOML's folder) or by `tessera node --cluster-secret-file FILE`.

#include <filesystem>
#include <string>

#include <caf/expected.hpp>

namespace tessera::cluster {

/// Shortest secret accepted, bytes (after trailing whitespace is cut).
inline constexpr size_t min_cluster_secret_bytes = 16;
/// Longest secret file read, bytes.
inline constexpr size_t max_cluster_secret_bytes = 4096;

/// Reads the secret in `file`: its bytes with trailing whitespace (a final
/// newline) removed. Errors (caf::sec::invalid_argument) name the file
/// and the fix: missing or unreadable, readable or writable by group or
/// others (chmod 600), shorter than min_cluster_secret_bytes, longer than
/// max_cluster_secret_bytes, not a regular file.
[[nodiscard]] caf::expected<std::string> load_cluster_secret(const std::filesystem::path& file);

} // namespace tessera::cluster
