#pragma once
/// @file
/// A real etcd (Debian's /usr/bin/etcd) for tests: on loopback, free
/// ports, a data dir of its own, killed with the object. Tests skip
/// (GTEST_SKIP) where the binary is missing.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include <caf/expected.hpp>

#include "common/child_process.hpp"

namespace tessera::test {

/// Where Debian's etcd-server puts the binary.
inline constexpr const char* etcd_binary = "/usr/bin/etcd";

/// Whether etcd_binary exists.
[[nodiscard]] bool have_etcd();

/// A running etcd.
class etcd_server {
public:
  /// Starts etcd with its data under `data_dir` (created) on a client port
  /// of `client_port` (0: a free one) and waits until it answers (15 s).
  [[nodiscard]] static caf::expected<std::unique_ptr<etcd_server>> start(const std::filesystem::path& data_dir,
                                                                         uint16_t client_port = 0);
  ~etcd_server();

  /// "http://127.0.0.1:<port>".
  [[nodiscard]] std::string url() const;
  [[nodiscard]] uint16_t port() const { return port_; }
  /// SIGKILLs it (the data dir stays, so start() on it again resumes).
  void kill();

private:
  etcd_server() = default;
  std::optional<child_process> proc_;
  uint16_t port_ = 0;
};

} // namespace tessera::test
