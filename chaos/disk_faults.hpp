#pragma once
/// @file
/// Disk I/O errors for a node's kv store, made real: before the nodes
/// start, the harness mounts a small tmpfs of its own on the directory of
/// each such node's disk tier (kvstore_disk_dir/<node id>, where its
/// RocksDB lives); a `disk-full` event fills that tmpfs with a file until
/// the kernel answers ENOSPC, so every write the store makes from then on
/// fails as on a full disk; `disk-heal` deletes the file. After the run
/// the tmpfs is unmounted (lazily: a node still exiting keeps its files).
///
/// Mounting needs CAP_SYS_ADMIN (root, outside a restricted container);
/// without it mount() fails and the run is refused naming that.

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <caf/expected.hpp>

namespace tessera::chaos {

class disk_faults {
public:
  /// Mounts a tmpfs of `bytes` on each of `dirs` (made when missing).
  /// Errors: a directory that cannot be made, or mount() refused (the
  /// message says why and what it needs); nothing stays mounted then.
  [[nodiscard]] static caf::expected<std::unique_ptr<disk_faults>> mount(const std::vector<std::filesystem::path>& dirs,
                                                                         uint64_t bytes);
  /// Unmounts every tmpfs (MNT_DETACH).
  ~disk_faults();
  disk_faults(const disk_faults&) = delete;
  disk_faults& operator=(const disk_faults&) = delete;

  /// Fills the tmpfs on `dir` (one of the mounted ones) until ENOSPC. ""
  /// when it is full, else why not.
  [[nodiscard]] std::string fill(const std::filesystem::path& dir);
  /// Deletes what fill() wrote. "" when done, else why not.
  [[nodiscard]] std::string heal(const std::filesystem::path& dir);

private:
  disk_faults() = default;
  std::vector<std::filesystem::path> mounted_;
};

} // namespace tessera::chaos
