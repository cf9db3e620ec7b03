#pragma once
/// @file
/// A RocksDB file system that fails reads or writes on demand, for the kv
/// store's fault tests. Faults apply to files opened before or after they
/// are switched on; they are off by default.

#include <atomic>
#include <memory>
#include <string>

#include <rocksdb/env.h>
#include <rocksdb/file_system.h>

namespace tessera::test {

/// Wraps the default file system; set fail_reads / fail_writes to inject.
class fault_fs : public rocksdb::FileSystemWrapper {
public:
  /// Random-access reads (SST and blob reads) fail with an IOError.
  std::atomic<bool> fail_reads{false};
  /// Appends, syncs and flushes of writable files (WAL, SST, blob, MANIFEST)
  /// fail with an IOError.
  std::atomic<bool> fail_writes{false};
  /// Faults injected so far.
  std::atomic<uint64_t> injected{0};

  fault_fs() : FileSystemWrapper(rocksdb::FileSystem::Default()) {}
  const char* Name() const override { return "tessera_fault_fs"; }

  /// An Env over `fs` to put in rocksdb_tier_options::env.
  static std::shared_ptr<rocksdb::Env> env_for(const std::shared_ptr<fault_fs>& fs) {
    return std::shared_ptr<rocksdb::Env>{rocksdb::NewCompositeEnv(fs)};
  }

  rocksdb::IOStatus NewRandomAccessFile(const std::string& f, const rocksdb::FileOptions& o,
                                        std::unique_ptr<rocksdb::FSRandomAccessFile>* r,
                                        rocksdb::IODebugContext* d) override {
    auto s = target()->NewRandomAccessFile(f, o, r, d);
    if (s.ok())
      *r = std::make_unique<reader>(std::move(*r), this);
    return s;
  }

  rocksdb::IOStatus NewWritableFile(const std::string& f, const rocksdb::FileOptions& o,
                                    std::unique_ptr<rocksdb::FSWritableFile>* r,
                                    rocksdb::IODebugContext* d) override {
    auto s = target()->NewWritableFile(f, o, r, d);
    if (s.ok())
      *r = std::make_unique<writer>(std::move(*r), this);
    return s;
  }

  rocksdb::IOStatus ReopenWritableFile(const std::string& f, const rocksdb::FileOptions& o,
                                       std::unique_ptr<rocksdb::FSWritableFile>* r,
                                       rocksdb::IODebugContext* d) override {
    auto s = target()->ReopenWritableFile(f, o, r, d);
    if (s.ok())
      *r = std::make_unique<writer>(std::move(*r), this);
    return s;
  }

private:
  rocksdb::IOStatus fault(const char* what) {
    ++injected;
    return rocksdb::IOStatus::IOError(std::string{"injected "} + what + " fault");
  }

  class reader : public rocksdb::FSRandomAccessFileOwnerWrapper {
  public:
    reader(std::unique_ptr<rocksdb::FSRandomAccessFile>&& t, fault_fs* fs)
        : FSRandomAccessFileOwnerWrapper(std::move(t)), fs_(fs) {}
    rocksdb::IOStatus Read(uint64_t offset, size_t n, const rocksdb::IOOptions& o,
                           rocksdb::Slice* result, char* scratch,
                           rocksdb::IODebugContext* d) const override {
      if (fs_->fail_reads)
        return fs_->fault("read");
      return target()->Read(offset, n, o, result, scratch, d);
    }
    rocksdb::IOStatus MultiRead(rocksdb::FSReadRequest* reqs, size_t num_reqs,
                                const rocksdb::IOOptions& o, rocksdb::IODebugContext* d) override {
      if (fs_->fail_reads)
        return fs_->fault("read");
      return target()->MultiRead(reqs, num_reqs, o, d);
    }

  private:
    fault_fs* fs_;
  };

  class writer : public rocksdb::FSWritableFileOwnerWrapper {
  public:
    writer(std::unique_ptr<rocksdb::FSWritableFile>&& t, fault_fs* fs)
        : FSWritableFileOwnerWrapper(std::move(t)), fs_(fs) {}
    rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& o,
                             rocksdb::IODebugContext* d) override {
      if (fs_->fail_writes)
        return fs_->fault("write");
      return target()->Append(data, o, d);
    }
    rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& o,
                             const rocksdb::DataVerificationInfo& v,
                             rocksdb::IODebugContext* d) override {
      if (fs_->fail_writes)
        return fs_->fault("write");
      return target()->Append(data, o, v, d);
    }
    rocksdb::IOStatus Flush(const rocksdb::IOOptions& o, rocksdb::IODebugContext* d) override {
      if (fs_->fail_writes)
        return fs_->fault("flush");
      return target()->Flush(o, d);
    }
    rocksdb::IOStatus Sync(const rocksdb::IOOptions& o, rocksdb::IODebugContext* d) override {
      if (fs_->fail_writes)
        return fs_->fault("sync");
      return target()->Sync(o, d);
    }

  private:
    fault_fs* fs_;
  };
};

} // namespace tessera::test
