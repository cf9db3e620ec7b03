#pragma once
/// @file
/// Tier G3: blocks in RocksDB on local disk, values in BlobDB blob files,
/// bounded in bytes, evicted oldest first (by insertion order). The only
/// file of the library that includes RocksDB headers is rocksdb_tier.cpp.
///
/// Layout (disk_codec.hpp): column family "blocks" maps the block key to a
/// versioned header (metadata, checksums) + payload; column family "order"
/// maps a big-endian insertion sequence number to the block key and its
/// charge. Each put or eviction writes both in one WriteBatch, so the two
/// never disagree. At open the "order" family is scanned (small values, no
/// blob reads) to rebuild the in-memory index and FIFO: a reopened store
/// serves what it had and keeps evicting oldest first.
///
/// Capacity accounting: each block is charged its encoded value size
/// (72-byte header + payload). RocksDB's own overhead is not counted: the
/// WAL, SST files of the keys and order index, and blob garbage not yet
/// collected can take the directory above capacity_bytes. A put evicts
/// oldest blocks, in the same batch, until the new one fits, so used_bytes()
/// never exceeds capacity_bytes().
///
/// Every read decodes and verifies the value (disk_codec::decode_value).
/// A value that fails (torn, corrupted, under the wrong key) or that RocksDB
/// reports as corrupt counts as a checksum failure, is deleted, and reads as
/// a miss. A read I/O error counts as an I/O error and reads as a miss (the
/// block is kept: the error may pass). A failed write or flush changes
/// nothing in the index and counts as an I/O error. RocksDB runs without
/// paranoid checks (a failed WAL write would otherwise make it read-only;
/// our own checksums guard every read), and the next write first recovers:
/// it asks RocksDB to resume, and where RocksDB cannot (it treats a failed
/// flush as fatal), closes and reopens the database and rebuilds the index
/// from what is on disk, reporting the difference as events. While the
/// database cannot be reopened, reads are misses counted as I/O errors.
///
/// Thread-safety: every member may be called from any thread. Writers
/// (put, dropping a corrupt block, reopening) are serialised by a write
/// mutex; the index has its own mutex, never held during I/O, so readers
/// do not wait for writes; a reader-writer lock over the database handle
/// lets reads run concurrently except during a reopen. Lock order: write
/// mutex, database lock, index mutex, then the event_log's.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "kvstore/block.hpp"
#include "kvstore/store_events.hpp"
#include "kvstore/store_stats.hpp"

namespace rocksdb {
class Env;
} // namespace rocksdb

namespace tessera::kvstore {

/// Options of a rocksdb_tier.
struct rocksdb_tier_options {
  /// Directory of the database; created (with parents) if missing.
  std::filesystem::path dir;
  /// Bytes of encoded values held at most. Default: 16 GiB.
  uint64_t capacity_bytes = uint64_t{16} << 30;
  /// Values at least this large go to blob files (BlobDB). Default: 4 KiB.
  uint64_t min_blob_size = 4096;
  /// Size at which a blob file is closed and a new one started.
  /// Default: 256 MiB.
  uint64_t blob_file_size = uint64_t{256} << 20;
  /// Relocate live blobs out of old blob files during compaction so deleted
  /// blocks' space is reclaimed. Default: true.
  bool enable_blob_garbage_collection = true;
  /// Fraction of the oldest blob files garbage collection considers.
  /// Default: 0.25.
  double blob_garbage_collection_age_cutoff = 0.25;
  /// Write a WAL: a crash, or a reopen after a fatal write error, loses no
  /// acknowledged spill. Off halves the bytes written per spill (measured
  /// here with 192 KiB blocks: ~260 MB/s spilled with the WAL, ~890 MB/s
  /// without); a crash then loses the blocks still in the memtable (up to
  /// 64 MiB), consistently with their order entries. Default: true.
  bool use_wal = true;
  /// fsync the WAL on every write (survives power loss). Default: false.
  bool sync_writes = false;
  /// Environment (file system) RocksDB uses; tests pass one that injects
  /// faults. Default: null, meaning rocksdb::Env::Default().
  std::shared_ptr<rocksdb::Env> env;
};

/// The RocksDB tier. Open with open(); closing is destruction.
class rocksdb_tier {
public:
  /// What put() did.
  enum class put_status : uint8_t {
    /// Written (possibly after evicting older blocks).
    stored,
    /// The key was already held; nothing written.
    already_present,
    /// The block alone exceeds the capacity; nothing written.
    too_large,
    /// RocksDB refused the write; nothing changed.
    io_error,
  };

  /// Opens (creating if needed) the store in `opts.dir`, rebuilding the
  /// index from the order column family and evicting oldest blocks if the
  /// capacity shrank. Changes are reported to `events` (may be null; not
  /// owned, must outlive the tier). Errors: kvstore_errc::bad_config for
  /// bad options, kvstore_errc::open_failed naming the directory and
  /// RocksDB's reason.
  [[nodiscard]] static caf::expected<std::unique_ptr<rocksdb_tier>>
  open(rocksdb_tier_options opts, event_log* events = nullptr);

  /// Closes the database (memtables are flushed by RocksDB on close).
  ~rocksdb_tier();
  rocksdb_tier(const rocksdb_tier&) = delete;
  rocksdb_tier& operator=(const rocksdb_tier&) = delete;

  /// The bytes `b` is charged: disk_codec::header_bytes + payload.
  [[nodiscard]] static uint64_t charge(const stored_block& b);

  /// Writes `b` under `key`, evicting oldest blocks until it fits.
  /// `b` must be valid (validate_block); the tier does not re-check it.
  put_status put(const block_key& key, const stored_block& b);

  /// Reads and verifies the block under `key`; nullopt on a miss, a failed
  /// verification or an I/O error (see the file comment).
  [[nodiscard]] std::optional<stored_block> get(const block_key& key);

  /// What get_run() read.
  struct run_read {
    /// blocks[i] is the block under keys[i], verified.
    std::vector<stored_block> blocks;
    /// It stopped before a block the index holds because of the byte bound.
    bool cut = false;
  };

  /// The leading blocks of `keys` this tier holds, read with RocksDB
  /// MultiGet (a call per chunk of up to 64 keys and 1 MiB, each chunk
  /// decoded before the next is read): up to the first key the index
  /// lacks, and while the payload read stays within `max_payload_bytes`
  /// (the first block is read whatever its size). Each block is verified, counted and, when bad,
  /// dropped as get() does; the run ends at the first that fails (a failed
  /// read, a failed verification, a block evicted meanwhile), and what was
  /// read after it is neither counted nor returned.
  [[nodiscard]] run_read get_run(std::span<const block_key> keys, uint64_t max_payload_bytes);

  /// Whether the index holds `key` (no I/O; the bytes are not checked).
  [[nodiscard]] bool contains(const block_key& key) const;

  /// Flushes memtables to files (tests use it so reads go to the files).
  [[nodiscard]] caf::error flush();

  /// Keys from oldest to newest insertion.
  [[nodiscard]] std::vector<block_key> keys_oldest_first() const;

  /// Pushes a `stored` event for every block held (see store_events.hpp).
  void push_snapshot(event_log& log) const;

  /// Counters and levels now.
  [[nodiscard]] tier_stats stats() const;

  /// Bytes charged now; never above capacity_bytes().
  [[nodiscard]] uint64_t used_bytes() const;
  /// The capacity from the options.
  [[nodiscard]] uint64_t capacity_bytes() const;
  /// The database directory.
  [[nodiscard]] const std::filesystem::path& dir() const;

private:
  struct impl;
  explicit rocksdb_tier(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

/// "stored", "already_present", "too_large" or "io_error".
const char* to_string(rocksdb_tier::put_status s);

} // namespace tessera::kvstore
