#pragma once
/// @file
/// Opening the disk tier so that what is on disk never keeps the store
/// from starting: the disk tier is a cache, and losing it costs only
/// recomputation.
///
///   open(dir) ──ok──> opened
///      │
///      ├─ dir unusable for reasons outside it (read-only, full disk,
///      │  locked by another process, not a directory)
///      │     └──> disabled: host tier only, dir untouched, logged as error
///      │
///      └─ anything else (corrupt WAL, MANIFEST, CURRENT, OPTIONS, order
///         index that does not load)
///            └──> rename dir to <dir>.corrupt-<UTC time>, keep the newest
///                 `keep_corrupt_dirs` of those, open a fresh dir
///                   ├─ ok ──> reset (cold), logged as a warning
///                   └─ fails ──> disabled, logged as error
///
/// Bad options (kvstore_errc::bad_config) are still errors: they are the
/// operator's to fix, and nothing on disk explains them.

#include <cstddef>
#include <filesystem>
#include <memory>
#include <string>

#include <caf/expected.hpp>

#include "kvstore/rocksdb_tier.hpp"

namespace tessera::kvstore {

/// What opening a disk tier found and did.
struct disk_open_report {
  /// The outcome.
  enum class outcome : uint8_t {
    /// No disk tier was configured.
    none,
    /// Opened what was there (or a new, empty store).
    opened,
    /// The directory could not be opened; it was moved aside and the tier
    /// started cold in a fresh one.
    reset,
    /// The tier is off: the store runs on host memory only.
    disabled,
  };
  outcome result = outcome::none;
  /// The configured directory.
  std::filesystem::path dir;
  /// What was wrong, in RocksDB's or the file system's words; empty when
  /// opened. For a reset that then could not open the fresh directory,
  /// both reasons.
  std::string reason;
  /// Where the unusable directory went (reset, or disabled after a move).
  std::filesystem::path moved_to;
};

/// "none", "opened", "reset" or "disabled".
const char* to_string(disk_open_report::outcome x);

/// A disk tier and how it was opened; `tier` is null when disabled.
struct disk_open_result {
  std::unique_ptr<rocksdb_tier> tier;
  disk_open_report report;
};

/// Opens the disk tier in `opts.dir` as the file comment says, logging a
/// warning for a reset and an error for a disabled tier (one line each,
/// naming the directory and the reason). `keep_corrupt_dirs` bounds the
/// <dir>.corrupt-* directories kept beside `opts.dir` (oldest deleted);
/// 0 deletes the moved directory at once. Errors: kvstore_errc::bad_config
/// only.
[[nodiscard]] caf::expected<disk_open_result>
open_disk_tier(rocksdb_tier_options opts, event_log* events, size_t keep_corrupt_dirs = 3);

/// The name of the directory `dir` is moved to at `utc_seconds` (Unix
/// time): `<dir>.corrupt-YYYYMMDDTHHMMSSZ`. Names sort by time.
[[nodiscard]] std::filesystem::path corrupt_dir_name(const std::filesystem::path& dir, int64_t utc_seconds);

} // namespace tessera::kvstore
