#include "kvstore/rocksdb_tier.hpp"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <system_error>
#include <unordered_map>

#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/options.h>
#include <rocksdb/slice.h>
#include <rocksdb/table.h>
#include <rocksdb/write_batch.h>

#include <spdlog/spdlog.h>

#include "common/assert.hpp"
#include "common/log_limiter.hpp"
#include "kvstore/disk_codec.hpp"
#include "kvstore/kvstore_errc.hpp"

namespace tessera::kvstore {

const char* to_string(rocksdb_tier::put_status s) {
  switch (s) {
    case rocksdb_tier::put_status::stored: return "stored";
    case rocksdb_tier::put_status::already_present: return "already_present";
    case rocksdb_tier::put_status::too_large: return "too_large";
    case rocksdb_tier::put_status::io_error: return "io_error";
  }
  return "unknown";
}

namespace {

struct entry {
  uint64_t seq = 0;
  uint64_t charge = 0;
};
using index_map = std::unordered_map<block_key, entry, block_key_hasher>;
using order_map = std::map<uint64_t, block_key>; // begin() is the oldest
using victim_list = std::vector<std::pair<uint64_t, block_key>>;

// The index as read back from the order column family.
struct loaded_index {
  index_map index;
  order_map order;
  uint64_t used = 0;
  uint64_t next_seq = 1;
  uint64_t evicted = 0;
};

std::string_view view(const rocksdb::Slice& s) { return {s.data(), s.size()}; }

// Keys per RocksDB MultiGet of a run (get_run), so a chunk's values are
// still in the CPU's caches when they are decoded (bench/kv_fetch_bench:
// one MultiGet of 2,560 2 KiB blocks was slower than reading them one by
// one).
constexpr size_t multi_get_chunk = 64;
// ... and at most this many bytes of values (at least one key).
constexpr uint64_t multi_get_chunk_bytes = uint64_t{1} << 20;

// How blocks are read. RocksDB's own checksums are not verified on reads:
// disk_codec::decode_value verifies every value (header and payload, XXH3)
// anyway, and the RocksDB Debian ships is a portable build whose CRC32c is
// a table loop (~0.5-1 GB/s here): checking each 192 KiB blob with it took
// about a third of a disk read's time (perf, bench/kv_fetch_bench). A
// block RocksDB's checksum would have caught fails ours and is dropped as
// corrupt, as before.
rocksdb::ReadOptions block_read_options() {
  rocksdb::ReadOptions r;
  r.verify_checksums = false;
  return r;
}

} // namespace

struct rocksdb_tier::impl {
  rocksdb_tier_options opts;
  event_log* events = nullptr;
  rocksdb::DBOptions db_opts;
  std::vector<rocksdb::ColumnFamilyDescriptor> cf_descs;
  rocksdb::WriteOptions write_opts;

  // Guards `db` and the handles: readers hold it shared for each RocksDB
  // call; reopening after an unrecoverable error holds it exclusively.
  // Writers need not take it: a reopen happens only under write_mutex.
  mutable std::shared_mutex db_mutex;
  rocksdb::DB* db = nullptr;
  rocksdb::ColumnFamilyHandle* default_cf = nullptr;
  rocksdb::ColumnFamilyHandle* blocks_cf = nullptr;
  rocksdb::ColumnFamilyHandle* order_cf = nullptr;

  // Serialises writers (put, drop_corrupt, reopen); guards next_seq.
  std::mutex write_mutex;
  uint64_t next_seq = 1;
  // A write or flush failed: the next writer resumes or reopens first.
  std::atomic<bool> needs_recovery{false};

  // Guards everything below. Only writers change index/order/used, so a
  // writer's plan made under index_mutex stays valid while it writes
  // without holding it.
  mutable std::mutex index_mutex;
  index_map index;
  order_map order;
  uint64_t used = 0;
  tier_stats stats;

  // Bad blocks and failing reads are counted exactly and logged at most
  // a burst plus one line per interval (a rotting disk must not flood the log).
  log_limiter corrupt_log;
  log_limiter read_error_log;
  log_limiter write_error_log;

  ~impl() { close_db(); }

  rocksdb::Status open_db() {
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    auto s = rocksdb::DB::Open(db_opts, opts.dir.string(), cf_descs, &handles, &db);
    if (!s.ok())
      return s;
    TESSERA_ASSERT(handles.size() == 3, "RocksDB opened a different set of column families");
    default_cf = handles[0];
    blocks_cf = handles[1];
    order_cf = handles[2];
    return s;
  }

  void close_db() {
    if (!db)
      return;
    for (auto* cf : {blocks_cf, order_cf, default_cf})
      if (cf)
        (void)db->DestroyColumnFamilyHandle(cf);
    (void)db->Close();
    delete db;
    db = nullptr;
    default_cf = blocks_cf = order_cf = nullptr;
  }

  void delete_in_batch(rocksdb::WriteBatch& batch, const victim_list& victims) {
    for (const auto& [seq, key] : victims) {
      (void)batch.Delete(blocks_cf, disk_codec::encode_key(key));
      (void)batch.Delete(order_cf, disk_codec::encode_order_key(seq));
    }
  }

  // The store's format (disk_codec::format_key): a new, empty store gets
  // this build's; one that holds blocks without it, or has another, was
  // written by an older build (64-bit block hashes) and is refused, so
  // open_disk_tier resets it rather than misreading it. Empty: usable.
  std::string check_format() {
    std::string have;
    auto s = db->Get(rocksdb::ReadOptions{}, default_cf, std::string{disk_codec::format_key}, &have);
    if (s.ok())
      return have == disk_codec::format_value
               ? std::string{}
               : "the disk format is " + have + ", this build reads format " +
                   std::string{disk_codec::format_value} + " (128-bit block hashes)";
    if (!s.IsNotFound())
      return "cannot read the disk format: " + s.ToString();
    for (auto* cf : {blocks_cf, order_cf}) {
      std::unique_ptr<rocksdb::Iterator> it{db->NewIterator(rocksdb::ReadOptions{}, cf)};
      it->SeekToFirst();
      if (it->Valid())
        return "the store holds blocks of disk format 1 (64-bit block hashes, an older build); this build "
               "reads format " + std::string{disk_codec::format_value};
      if (!it->status().ok())
        return "cannot read the store: " + it->status().ToString();
    }
    rocksdb::WriteOptions sync;
    sync.sync = true;
    if (auto w = db->Put(sync, default_cf, std::string{disk_codec::format_key}, std::string{disk_codec::format_value});
        !w.ok())
      return "cannot write the disk format: " + w.ToString();
    return {};
  }

  // Scans the order family into `out`. Entries that do not parse, or that
  // name a key a later entry names again (the later one is the block's
  // real position), are deleted; so are the oldest blocks past the
  // capacity (it may have shrunk since the last run).
  rocksdb::Status load_index(loaded_index& out) {
    rocksdb::WriteBatch repair;
    std::unique_ptr<rocksdb::Iterator> it{db->NewIterator(rocksdb::ReadOptions{}, order_cf)};
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      auto seq = disk_codec::decode_order_key(view(it->key()));
      auto e = disk_codec::decode_order_value(view(it->value()));
      if (!seq || !e) {
        (void)repair.Delete(order_cf, it->key());
        continue;
      }
      if (auto old = out.index.find(e->key); old != out.index.end()) {
        (void)repair.Delete(order_cf, disk_codec::encode_order_key(old->second.seq));
        out.used -= old->second.charge;
        out.order.erase(old->second.seq);
      }
      out.index[e->key] = entry{*seq, e->charged_bytes};
      out.order[*seq] = e->key;
      out.used += e->charged_bytes;
      out.next_seq = *seq + 1;
    }
    if (!it->status().ok())
      return it->status();
    victim_list victims;
    for (auto o = out.order.begin(); out.used > opts.capacity_bytes && o != out.order.end(); ++o) {
      victims.emplace_back(o->first, o->second);
      out.used -= out.index[o->second].charge;
    }
    delete_in_batch(repair, victims);
    if (repair.Count() > 0)
      if (auto s = db->Write(write_opts, &repair); !s.ok())
        return s;
    for (const auto& [seq, key] : victims) {
      out.index.erase(key);
      out.order.erase(seq);
    }
    out.evicted = victims.size();
    return rocksdb::Status::OK();
  }

  void count_io_error() {
    std::lock_guard guard{index_mutex};
    ++stats.io_errors;
  }

  // Removes `victims` from the index after their deletes were written.
  void forget_locked(const victim_list& victims) {
    for (const auto& [seq, key] : victims) {
      auto it = index.find(key);
      if (it == index.end() || it->second.seq != seq)
        continue;
      used -= it->second.charge;
      index.erase(it);
      order.erase(seq);
      if (events)
        events->push(store_event::kind::removed, kv_tier::disk, key);
    }
  }

  // Called by a writer (holding write_mutex) before it writes. After a
  // failed write RocksDB may refuse further writes: ask it to resume; if
  // the error is one it cannot resume from (a failed WAL or flush write is
  // "fatal" to RocksDB), close and reopen the database, and rebuild the
  // index from what is really on disk. Returns false when the database is
  // still unusable (the next writer tries again).
  bool recover_locked() {
    if (!needs_recovery.exchange(false))
      return db != nullptr;
    if (db && db->Resume().ok())
      return true;
    std::unique_lock exclusive{db_mutex};
    close_db();
    loaded_index fresh;
    auto s = open_db();
    if (s.ok())
      s = load_index(fresh);
    if (!s.ok()) {
      needs_recovery = true;
      count_io_error();
      return false;
    }
    std::lock_guard guard{index_mutex};
    if (events) {
      for (const auto& [seq, key] : order)
        if (!fresh.index.contains(key))
          events->push(store_event::kind::removed, kv_tier::disk, key);
      for (const auto& [seq, key] : fresh.order)
        if (!index.contains(key))
          events->push(store_event::kind::stored, kv_tier::disk, key);
    }
    index = std::move(fresh.index);
    order = std::move(fresh.order);
    used = fresh.used;
    stats.evictions += fresh.evicted;
    next_seq = std::max(next_seq, fresh.next_seq);
    return true;
  }

  // Writes `batch` (holding write_mutex); on failure counts it and marks
  // the database for recovery.
  bool write_locked(rocksdb::WriteBatch& batch) {
    auto s = db->Write(write_opts, &batch);
    if (s.ok())
      return true;
    needs_recovery = true;
    count_io_error();
    if (auto permit = write_error_log.admit())
      spdlog::warn("kvstore: {}: a write to the disk tier failed (the block is not kept there): {}{}",
                   opts.dir.string(), s.ToString(),
                   permit.suppressed ? " (" + std::to_string(permit.suppressed) + " more since the last line)"
                                     : std::string{});
    return false;
  }

  // Counts and handles one read of `key` (index sequence `seq`) as get()
  // does: true for a good block (not counted: the caller counts hits),
  // false for a miss, a read error or a bad block (counted; a bad block is
  // dropped and logged).
  bool settle(const block_key& key, uint64_t seq, const rocksdb::Status& status,
              const disk_codec::decoded_value& decoded);

  // Deletes a block whose bytes failed verification, if it is still the
  // entry that was read (sequence `seq`).
  void drop_corrupt(const block_key& key, uint64_t seq) {
    std::lock_guard writer{write_mutex};
    if (!recover_locked())
      return;
    {
      std::lock_guard guard{index_mutex};
      auto it = index.find(key);
      if (it == index.end() || it->second.seq != seq)
        return;
    }
    victim_list victims{{seq, key}};
    rocksdb::WriteBatch batch;
    delete_in_batch(batch, victims);
    if (!write_locked(batch))
      return;
    std::lock_guard guard{index_mutex};
    forget_locked(victims);
  }
};

namespace {

caf::error open_error(const std::filesystem::path& dir, const std::string& what) {
  return make_kvstore_error(kvstore_errc::open_failed, "kvstore: " + dir.string() + ": " + what);
}

caf::error check_options(const rocksdb_tier_options& o) {
  auto bad = [&](const std::string& what) {
    return make_kvstore_error(kvstore_errc::bad_config, "kvstore: " + o.dir.string() + ": " + what);
  };
  if (o.dir.empty())
    return bad("no directory given");
  if (o.capacity_bytes == 0)
    return bad("capacity_bytes must be positive");
  if (o.blob_file_size == 0)
    return bad("blob_file_size must be positive");
  if (!(o.blob_garbage_collection_age_cutoff >= 0.0 && o.blob_garbage_collection_age_cutoff <= 1.0))
    return bad("blob_garbage_collection_age_cutoff must be in [0, 1]");
  return {};
}

} // namespace

caf::expected<std::unique_ptr<rocksdb_tier>> rocksdb_tier::open(rocksdb_tier_options opts,
                                                                 event_log* events) {
  if (auto err = check_options(opts))
    return err;
  std::error_code ec;
  std::filesystem::create_directories(opts.dir, ec);
  if (ec)
    return open_error(opts.dir, "cannot create directory: " + ec.message());
  if (!std::filesystem::is_directory(opts.dir, ec))
    return open_error(opts.dir, "not a directory");

  auto p = std::make_unique<impl>();
  p->events = events;
  p->opts = std::move(opts);
  const auto& o = p->opts;

  auto& db = p->db_opts;
  db.create_if_missing = true;
  db.create_missing_column_families = true;
  db.info_log_level = rocksdb::WARN_LEVEL;
  db.keep_log_file_num = 2;
  // With paranoid checks a single failed WAL write turns the database
  // read-only until reopened. Every value carries its own checksums and is
  // verified on each read, so the store prefers to keep serving.
  db.paranoid_checks = false;
  if (o.env)
    db.env = o.env.get();

  rocksdb::ColumnFamilyOptions blocks;
  // KV bytes are floating-point noise to a compressor: spend no CPU on it.
  blocks.compression = rocksdb::kNoCompression;
  blocks.enable_blob_files = true;
  blocks.min_blob_size = o.min_blob_size;
  blocks.blob_file_size = o.blob_file_size;
  blocks.blob_compression_type = rocksdb::kNoCompression;
  blocks.enable_blob_garbage_collection = o.enable_blob_garbage_collection;
  blocks.blob_garbage_collection_age_cutoff = o.blob_garbage_collection_age_cutoff;
  // A Bloom filter per table file. Spilled blocks reach the disk as a run
  // of level-0 files (a flush per 64 MiB memtable: ~330 blocks of 192 KiB),
  // and without filters each read searched the index of every one of them
  // newer than its own, so a block's read cost grew with the bytes spilled
  // since (bench/kv_fetch_bench: 2,560 blocks of 192 KiB read from ~9
  // files cost 1.4x-28x per block what 16 did). With a filter a file that
  // lacks the key costs one probe of an in-memory filter.
  rocksdb::BlockBasedTableOptions table;
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  table.whole_key_filtering = true;
  blocks.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  p->cf_descs = {{rocksdb::kDefaultColumnFamilyName, rocksdb::ColumnFamilyOptions{}},
                 {std::string{disk_codec::blocks_cf}, blocks},
                 {std::string{disk_codec::order_cf}, rocksdb::ColumnFamilyOptions{}}};
  p->write_opts.disableWAL = !o.use_wal;
  p->write_opts.sync = o.sync_writes && o.use_wal;

  if (auto s = p->open_db(); !s.ok())
    return open_error(o.dir, "cannot open RocksDB: " + s.ToString());
  if (auto why = p->check_format(); !why.empty())
    return open_error(o.dir, why);
  loaded_index loaded;
  if (auto s = p->load_index(loaded); !s.ok())
    return open_error(o.dir, "cannot load the order index: " + s.ToString());
  p->index = std::move(loaded.index);
  p->order = std::move(loaded.order);
  p->used = loaded.used;
  p->next_seq = loaded.next_seq;
  p->stats.evictions = loaded.evicted;
  p->stats.capacity_bytes = o.capacity_bytes;
  return std::unique_ptr<rocksdb_tier>{new rocksdb_tier{std::move(p)}};
}

rocksdb_tier::rocksdb_tier(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

rocksdb_tier::~rocksdb_tier() = default;

uint64_t rocksdb_tier::charge(const stored_block& b) {
  return disk_codec::header_bytes + b.payload_bytes();
}

rocksdb_tier::put_status rocksdb_tier::put(const block_key& key, const stored_block& b) {
  TESSERA_ASSERT(b.payload != nullptr, "rocksdb_tier::put needs a payload");
  auto& p = *impl_;
  const uint64_t c = charge(b);
  std::lock_guard writer{p.write_mutex};
  if (!p.recover_locked())
    return put_status::io_error;
  victim_list victims;
  {
    std::lock_guard guard{p.index_mutex};
    if (p.index.contains(key))
      return put_status::already_present;
    if (c > p.opts.capacity_bytes)
      return put_status::too_large;
    uint64_t used = p.used;
    for (auto o = p.order.begin(); used + c > p.opts.capacity_bytes; ++o) {
      TESSERA_ASSERT(o != p.order.end(), "disk tier accounting out of step with its index");
      victims.emplace_back(o->first, o->second);
      used -= p.index.at(o->second).charge;
    }
  }
  const uint64_t seq = p.next_seq++;
  rocksdb::WriteBatch batch;
  p.delete_in_batch(batch, victims);
  // Header and payload as two parts: the batch copies them once.
  const std::string k = disk_codec::encode_key(key);
  const std::string header = disk_codec::encode_header(key, b.meta, b.payload_bytes());
  rocksdb::Slice key_part{k};
  rocksdb::Slice value_parts[2] = {
      rocksdb::Slice{header},
      rocksdb::Slice{reinterpret_cast<const char*>(b.payload->data()), b.payload->size()}};
  (void)batch.Put(p.blocks_cf, rocksdb::SliceParts{&key_part, 1}, rocksdb::SliceParts{value_parts, 2});
  (void)batch.Put(p.order_cf, disk_codec::encode_order_key(seq),
                  disk_codec::encode_order_value(key, c));
  if (!p.write_locked(batch))
    return put_status::io_error;
  std::lock_guard guard{p.index_mutex};
  p.stats.evictions += victims.size();
  p.forget_locked(victims);
  p.index[key] = entry{seq, c};
  p.order[seq] = key;
  p.used += c;
  ++p.stats.inserts;
  if (p.events)
    p.events->push(store_event::kind::stored, kv_tier::disk, key);
  return put_status::stored;
}

std::optional<stored_block> rocksdb_tier::get(const block_key& key) {
  auto run = get_run(std::span{&key, 1}, UINT64_MAX);
  if (run.blocks.empty())
    return std::nullopt;
  return std::move(run.blocks.front());
}

bool rocksdb_tier::impl::settle(const block_key& key, uint64_t seq, const rocksdb::Status& status,
                                const disk_codec::decoded_value& decoded) {
  auto miss = [&](uint64_t tier_stats::*counter) {
    std::lock_guard guard{index_mutex};
    if (counter)
      ++(stats.*counter);
    ++stats.misses;
    return false;
  };
  if (status.IsNotFound())
    return miss(nullptr); // evicted between the index look-up and the read
  // A read error may pass: keep the block. Corruption RocksDB itself
  // detects is handled like a failed checksum of ours.
  if (!status.ok() && !status.IsCorruption()) {
    if (auto permit = read_error_log.admit())
      spdlog::warn("kvstore: {}: cannot read block {}, served as a miss: {}{}", opts.dir.string(),
                   to_string(key), status.ToString(),
                   permit.suppressed ? " (" + std::to_string(permit.suppressed) + " more since the last line)"
                                     : std::string{});
    return miss(&tier_stats::io_errors);
  }
  if (status.ok() && decoded.status == disk_codec::decode_status::ok)
    return true;
  if (auto permit = corrupt_log.admit())
    spdlog::warn("kvstore: {}: block {} failed verification ({}), dropped and served as a miss{}",
                 opts.dir.string(), to_string(key),
                 status.ok() ? std::string{disk_codec::to_string(decoded.status)} : status.ToString(),
                 permit.suppressed ? " (" + std::to_string(permit.suppressed) + " more since the last line)"
                                   : std::string{});
  (void)miss(&tier_stats::checksum_failures);
  drop_corrupt(key, seq);
  return false;
}

rocksdb_tier::run_read rocksdb_tier::get_run(std::span<const block_key> keys, uint64_t max_payload_bytes) {
  auto& p = *impl_;
  run_read out;
  // The run the index holds now, within the byte bound: one look at the
  // index for the lot.
  std::vector<uint64_t> seqs;
  std::vector<uint64_t> charges;
  {
    std::lock_guard guard{p.index_mutex};
    uint64_t bytes = 0;
    for (const auto& key : keys) {
      auto it = p.index.find(key);
      if (it == p.index.end()) {
        ++p.stats.misses;
        break;
      }
      const uint64_t payload = it->second.charge - std::min<uint64_t>(it->second.charge, disk_codec::header_bytes);
      if (!seqs.empty() && bytes + payload > max_payload_bytes) {
        out.cut = true;
        break;
      }
      bytes += payload;
      seqs.push_back(it->second.seq);
      charges.push_back(it->second.charge);
    }
  }
  const size_t n = seqs.size();
  if (n == 0)
    return out;
  std::vector<std::string> encoded(n);
  std::vector<rocksdb::Slice> slices(n);
  for (size_t i = 0; i < n; ++i) {
    encoded[i] = disk_codec::encode_key(keys[i]);
    slices[i] = encoded[i];
  }
  std::vector<rocksdb::Status> statuses(n);
  std::vector<disk_codec::decoded_value> decoded(n);
  {
    std::shared_lock shared{p.db_mutex};
    if (!p.db) { // closed after an error, not yet reopened
      std::lock_guard guard{p.index_mutex};
      ++p.stats.io_errors;
      ++p.stats.misses;
      out.cut = false;
      return out;
    }
    // In chunks: each chunk's values are decoded (copied, checksummed)
    // while they are still in the CPU's caches, and a failure ends the
    // reading, not only the run.
    const auto read_opts = block_read_options();
    std::vector<rocksdb::PinnableSlice> values(std::min(n, multi_get_chunk));
    bool failed = false;
    for (size_t start = 0, m = 0; start < n && !failed; start += m) {
      uint64_t chunk_bytes = charges[start];
      m = 1;
      while (start + m < n && m < multi_get_chunk && chunk_bytes + charges[start + m] <= multi_get_chunk_bytes)
        chunk_bytes += charges[start + m++];
      for (size_t i = 0; i < m; ++i)
        values[i].Reset();
      p.db->MultiGet(read_opts, p.blocks_cf, m, slices.data() + start, values.data(),
                     statuses.data() + start);
      for (size_t i = start; i < start + m && !failed; ++i) {
        if (statuses[i].ok())
          decoded[i] = disk_codec::decode_value(keys[i], view(values[i - start]));
        failed = !statuses[i].ok() || decoded[i].status != disk_codec::decode_status::ok;
      }
    }
  }
  size_t good = 0;
  while (good < n && p.settle(keys[good], seqs[good], statuses[good], decoded[good]))
    ++good;
  if (good < n)
    out.cut = false;
  out.blocks.reserve(good);
  for (size_t i = 0; i < good; ++i)
    out.blocks.push_back(std::move(decoded[i].block));
  std::lock_guard guard{p.index_mutex};
  p.stats.hits += good;
  return out;
}

bool rocksdb_tier::contains(const block_key& key) const {
  std::lock_guard guard{impl_->index_mutex};
  return impl_->index.contains(key);
}

caf::error rocksdb_tier::flush() {
  auto& p = *impl_;
  rocksdb::Status status;
  {
    std::shared_lock shared{p.db_mutex};
    status = p.db ? p.db->Flush(rocksdb::FlushOptions{}, {p.blocks_cf, p.order_cf})
                  : rocksdb::Status::IOError("closed after an earlier error");
  }
  if (status.ok())
    return {};
  p.needs_recovery = true;
  p.count_io_error();
  return make_kvstore_error(kvstore_errc::io_error,
                            "kvstore: " + p.opts.dir.string() + ": flush: " + status.ToString());
}

std::vector<block_key> rocksdb_tier::keys_oldest_first() const {
  std::lock_guard guard{impl_->index_mutex};
  std::vector<block_key> out;
  out.reserve(impl_->order.size());
  for (const auto& [seq, key] : impl_->order)
    out.push_back(key);
  return out;
}

void rocksdb_tier::push_snapshot(event_log& log) const {
  std::lock_guard guard{impl_->index_mutex};
  for (const auto& [seq, key] : impl_->order)
    log.push(store_event::kind::stored, kv_tier::disk, key);
}

tier_stats rocksdb_tier::stats() const {
  std::lock_guard guard{impl_->index_mutex};
  tier_stats s = impl_->stats;
  s.blocks = impl_->index.size();
  s.used_bytes = impl_->used;
  return s;
}

uint64_t rocksdb_tier::used_bytes() const {
  std::lock_guard guard{impl_->index_mutex};
  return impl_->used;
}

uint64_t rocksdb_tier::capacity_bytes() const { return impl_->opts.capacity_bytes; }

const std::filesystem::path& rocksdb_tier::dir() const { return impl_->opts.dir; }

} // namespace tessera::kvstore
