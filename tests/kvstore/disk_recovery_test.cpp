// A disk tier that cannot be opened never keeps the store from starting:
// stores written by the real tier get their WAL, blob, MANIFEST, CURRENT
// and OPTIONS files damaged (flipped bytes, truncation, deletion), and
// reopening must give a working tier (cold, or with what survived) that
// never returns a wrong block; a read-only directory and a full disk leave
// the store on host memory only.

#include "kvstore/disk_recovery.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <functional>
#include <vector>

#include <gtest/gtest.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include "common/error.hpp"
#include "kvstore/kvstore_errc.hpp"
#include "kvstore/tiered_block_store.hpp"
#include "tests/kvstore/fault_fs.hpp"
#include "tests/kvstore/kv_test_blocks.hpp"
#include "tests/support/temp_dir.hpp"

namespace tessera::kvstore {
namespace {

namespace fs = std::filesystem;
using test::block_for;
using test::is_block_for;
using test::key_of;
using outcome = disk_open_report::outcome;

constexpr uint64_t n_blocks = 24;

rocksdb_tier_options options_for(const fs::path& dir) {
  rocksdb_tier_options o;
  o.dir = dir;
  o.capacity_bytes = 1 << 20;
  o.min_blob_size = 256; // the test blocks (512 B + header) go to blob files
  return o;
}

/// Writes n_blocks blocks with the real tier; the first half is flushed
/// (SST + blob files), the second half stays in the WAL only.
void write_store(const fs::path& dir) {
  auto t = rocksdb_tier::open(options_for(dir));
  ASSERT_TRUE(t) << error_text(t.error());
  for (uint64_t i = 0; i < n_blocks / 2; ++i)
    ASSERT_EQ((*t)->put(key_of(i), block_for(key_of(i))), rocksdb_tier::put_status::stored);
  ASSERT_FALSE((*t)->flush());
  for (uint64_t i = n_blocks / 2; i < n_blocks; ++i)
    ASSERT_EQ((*t)->put(key_of(i), block_for(key_of(i))), rocksdb_tier::put_status::stored);
}

/// Files of `dir` whose name ends with `suffix` or starts with `prefix`.
std::vector<fs::path> files_of(const fs::path& dir, const std::string& prefix, const std::string& suffix = "") {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator{dir}) {
    const auto name = e.path().filename().string();
    if (e.is_regular_file() && name.starts_with(prefix) && name.ends_with(suffix))
      out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

/// Flips `n` bytes of `file` from `at` (clamped to the file's size).
void flip(const fs::path& file, uint64_t at, size_t n) {
  const auto size = fs::file_size(file);
  ASSERT_GT(size, 0u) << file;
  at = std::min<uint64_t>(at, size > n ? size - n : 0);
  std::fstream f{file, std::ios::in | std::ios::out | std::ios::binary};
  ASSERT_TRUE(f) << file;
  std::vector<char> buf(n);
  f.seekg(static_cast<std::streamoff>(at));
  f.read(buf.data(), static_cast<std::streamsize>(n));
  const auto got = f.gcount();
  for (auto& c : buf)
    c = static_cast<char>(~c);
  f.seekp(static_cast<std::streamoff>(at));
  f.write(buf.data(), got);
}

/// The <dir>.corrupt-* directories beside `dir`.
std::vector<fs::path> corrupt_dirs(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator{dir.parent_path()})
    if (e.path().filename().string().starts_with(dir.filename().string() + ".corrupt-"))
      out.push_back(e.path());
  return out;
}

/// Reopens `dir` after `damage`, and checks what every store must do:
/// it opens, a reset moved the old directory aside, and every block it
/// still serves is the block that was put. Returns the report.
disk_open_report reopen_after(const std::function<void(const fs::path&)>& damage, size_t* served = nullptr) {
  test::temp_dir root{"tessera-kvstore"};
  const auto dir = root.path() / "disk";
  write_store(dir);
  damage(dir);
  auto r = open_disk_tier(options_for(dir), nullptr);
  EXPECT_TRUE(r) << error_text(r.error());
  if (!r)
    return {};
  EXPECT_TRUE(r->tier) << "a damaged directory must not turn the tier off: " << r->report.reason;
  if (!r->tier)
    return r->report;
  if (r->report.result == outcome::reset) {
    EXPECT_FALSE(r->report.reason.empty());
    EXPECT_TRUE(fs::is_directory(r->report.moved_to)) << r->report.moved_to;
    EXPECT_EQ(corrupt_dirs(dir), std::vector<fs::path>{r->report.moved_to});
    EXPECT_EQ(r->tier->stats().blocks, 0u) << "a reset tier starts cold";
  } else {
    EXPECT_EQ(r->report.result, outcome::opened);
    EXPECT_TRUE(corrupt_dirs(dir).empty());
  }
  size_t ok = 0;
  for (uint64_t i = 0; i < n_blocks; ++i)
    if (auto b = r->tier->get(key_of(i))) {
      EXPECT_TRUE(is_block_for(key_of(i), *b)) << "block " << i << " came back wrong";
      ++ok;
    }
  // The tier works: it stores and serves new blocks.
  const auto fresh = key_of(1000);
  EXPECT_EQ(r->tier->put(fresh, block_for(fresh)), rocksdb_tier::put_status::stored);
  auto b = r->tier->get(fresh);
  EXPECT_TRUE(b && is_block_for(fresh, *b));
  if (served)
    *served = ok;
  return r->report;
}

TEST(DiskRecoveryTest, AnUndamagedStoreOpensWithEverything) {
  size_t served = 0;
  auto r = reopen_after([](const fs::path&) {}, &served);
  EXPECT_EQ(r.result, outcome::opened);
  EXPECT_EQ(served, n_blocks);
}

TEST(DiskRecoveryTest, FlippedBytesInTheWalStartColdOrKeepWhatSurvived) {
  for (uint64_t at : {0ull, 100ull, 2000ull, 5000ull}) {
    size_t served = 0;
    auto r = reopen_after(
        [at](const fs::path& dir) {
          auto logs = files_of(dir, "", ".log");
          ASSERT_FALSE(logs.empty());
          flip(logs.back(), at, 40);
        },
        &served);
    EXPECT_NE(r.result, outcome::disabled) << at;
    if (r.result == outcome::opened)
      EXPECT_GE(served, n_blocks / 2) << "the flushed half does not depend on the WAL";
    std::cerr << "WAL flipped at " << at << ": " << to_string(r.result) << ", " << served << " blocks served"
              << (r.reason.empty() ? "" : ": " + r.reason) << "\n";
  }
}

// Blocks of 64 KiB span several 32 KiB WAL blocks: bytes flipped in a
// fragment's header is what made RocksDB refuse to open ("Write batch
// content corrupted") before the tier learned to start cold.
TEST(DiskRecoveryTest, FlippedBytesInAWalOfLargeBlocksNeverStopTheTier) {
  const auto big = test::small_layout(1024);
  int resets = 0;
  for (uint64_t at : {7ull, 32768ull, 65536ull + 3, 98304ull, 150000ull, 200000ull}) {
    test::temp_dir root{"tessera-kvstore"};
    const auto dir = root.path() / "disk";
    {
      auto o = options_for(dir);
      o.capacity_bytes = 16 << 20;
      auto t = rocksdb_tier::open(o);
      ASSERT_TRUE(t) << error_text(t.error());
      for (uint64_t i = 0; i < 6; ++i)
        ASSERT_EQ((*t)->put(key_of(i), block_for(key_of(i), big)), rocksdb_tier::put_status::stored);
    }
    auto logs = files_of(dir, "", ".log");
    ASSERT_FALSE(logs.empty());
    flip(logs.back(), at, 40);
    auto o = options_for(dir);
    o.capacity_bytes = 16 << 20;
    auto r = open_disk_tier(o, nullptr);
    ASSERT_TRUE(r) << error_text(r.error());
    ASSERT_TRUE(r->tier) << at << ": " << r->report.reason;
    size_t served = 0;
    for (uint64_t i = 0; i < 6; ++i)
      if (auto b = r->tier->get(key_of(i))) {
        EXPECT_TRUE(is_block_for(key_of(i), *b)) << "block " << i << " came back wrong";
        ++served;
      }
    resets += r->report.result == outcome::reset ? 1 : 0;
    std::cerr << "WAL of 64 KiB blocks flipped at " << at << ": " << to_string(r->report.result) << ", "
              << served << " of 6 served" << (r->report.reason.empty() ? "" : ": " + r->report.reason) << "\n";
  }
  EXPECT_GT(resets, 0) << "no flip made RocksDB refuse the WAL: this test no longer covers a reset";
}

TEST(DiskRecoveryTest, ATruncatedWalKeepsWhatSurvived) {
  size_t served = 0;
  auto r = reopen_after(
      [](const fs::path& dir) {
        auto logs = files_of(dir, "", ".log");
        ASSERT_FALSE(logs.empty());
        fs::resize_file(logs.back(), fs::file_size(logs.back()) / 2);
      },
      &served);
  EXPECT_EQ(r.result, outcome::opened) << r.reason;
  EXPECT_GE(served, n_blocks / 2);
}

TEST(DiskRecoveryTest, FlippedBytesInABlobFileAreMissesNeverWrongBlocks) {
  size_t served = 0;
  auto r = reopen_after(
      [](const fs::path& dir) {
        auto blobs = files_of(dir, "", ".blob");
        ASSERT_FALSE(blobs.empty());
        // 2 KiB: more than a blob record of these ~600-byte blocks, so
        // some block's own bytes are flipped. (Reads skip RocksDB's blob
        // checksums, rocksdb_tier.cpp: a flip that hits only a record's
        // header or key leaves the block itself intact, and it is served,
        // rightly; the block's own checksum is what refuses a flipped one.)
        flip(blobs.front(), fs::file_size(blobs.front()) / 2, 2048);
      },
      &served);
  EXPECT_EQ(r.result, outcome::opened) << r.reason;
  EXPECT_LT(served, n_blocks) << "a flipped block must not be served";
  EXPECT_GE(served, n_blocks - 5);
}

TEST(DiskRecoveryTest, ADeletedBlobFileIsMissesNeverWrongBlocks) {
  size_t served = 0;
  auto r = reopen_after(
      [](const fs::path& dir) {
        for (const auto& f : files_of(dir, "", ".blob"))
          fs::remove(f);
      },
      &served);
  EXPECT_NE(r.result, outcome::disabled);
  if (r.result == outcome::opened)
    EXPECT_EQ(served, n_blocks / 2) << "only the WAL's half can be served";
}

TEST(DiskRecoveryTest, ADamagedManifestStartsColdAndMovesTheDirectoryAside) {
  for (int how = 0; how < 3; ++how) {
    auto r = reopen_after([how](const fs::path& dir) {
      auto manifests = files_of(dir, "MANIFEST-");
      ASSERT_FALSE(manifests.empty());
      if (how == 0)
        flip(manifests.back(), 10, 40);
      else if (how == 1)
        fs::resize_file(manifests.back(), 7);
      else
        fs::remove(manifests.back());
    });
    EXPECT_EQ(r.result, outcome::reset) << how;
  }
}

TEST(DiskRecoveryTest, ADamagedCurrentFileStartsColdOrOpens) {
  for (int how = 0; how < 3; ++how) {
    size_t served = 0;
    auto r = reopen_after(
        [how](const fs::path& dir) {
          if (how == 0)
            flip(dir / "CURRENT", 0, 4);
          else if (how == 1)
            fs::resize_file(dir / "CURRENT", 0);
          else
            fs::remove(dir / "CURRENT");
        },
        &served);
    EXPECT_NE(r.result, outcome::disabled) << how;
    std::cerr << "CURRENT damaged (" << how << "): " << to_string(r.result) << ", " << served
              << " blocks served" << (r.reason.empty() ? "" : ": " + r.reason) << "\n";
  }
}

TEST(DiskRecoveryTest, ADamagedOptionsFileStillOpens) {
  for (int how = 0; how < 3; ++how) {
    size_t served = 0;
    auto r = reopen_after(
        [how](const fs::path& dir) {
          auto options = files_of(dir, "OPTIONS-");
          ASSERT_FALSE(options.empty());
          if (how == 0)
            flip(options.back(), 50, 40);
          else if (how == 1)
            fs::resize_file(options.back(), 10);
          else
            for (const auto& f : options)
              fs::remove(f);
        },
        &served);
    EXPECT_NE(r.result, outcome::disabled) << how;
    if (r.result == outcome::opened)
      EXPECT_EQ(served, n_blocks) << "RocksDB opens with the tier's options, not the file's";
  }
}

// Blocks that fail verification on read are counted exactly and logged,
// but a rotting disk does not flood the log: the first lines, then at
// most one per interval.
TEST(DiskRecoveryTest, CorruptBlocksFoundOnReadAreLoggedRateLimited) {
  test::temp_dir root{"tessera-kvstore"};
  const auto dir = root.path() / "disk";
  constexpr uint64_t n = 40;
  {
    auto t = rocksdb_tier::open(options_for(dir));
    ASSERT_TRUE(t) << error_text(t.error());
    for (uint64_t i = 0; i < n; ++i)
      ASSERT_EQ((*t)->put(key_of(i), block_for(key_of(i))), rocksdb_tier::put_status::stored);
    ASSERT_FALSE((*t)->flush());
  }
  for (const auto& blob : files_of(dir, "", ".blob"))
    for (uint64_t at = 64; at + 64 < fs::file_size(blob); at += 256)
      flip(blob, at, 8);
  auto t = rocksdb_tier::open(options_for(dir));
  ASSERT_TRUE(t) << error_text(t.error());
  auto sink = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(1000);
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink));
  size_t served = 0;
  for (uint64_t i = 0; i < n; ++i)
    if (auto b = (*t)->get(key_of(i))) {
      EXPECT_TRUE(is_block_for(key_of(i), *b)) << i;
      ++served;
    }
  spdlog::set_default_logger(previous);
  const auto failures = (*t)->stats().checksum_failures;
  EXPECT_EQ(failures, n - served);
  EXPECT_GT(failures, 20u) << "the test needs more corrupt blocks than the log's burst";
  const auto lines = sink->last_formatted();
  size_t logged = 0;
  for (const auto& l : lines)
    logged += l.find("failed verification") != std::string::npos ? 1 : 0;
  EXPECT_GE(logged, 1u);
  EXPECT_LE(logged, 11u) << "a burst of 10, then one line per 10 s";
}

TEST(DiskRecoveryTest, KeepsOnlyTheNewestCorruptCopies) {
  test::temp_dir root{"tessera-kvstore"};
  const auto dir = root.path() / "disk";
  // Older copies from earlier starts, and an unrelated neighbour.
  for (int64_t t : {1000, 2000, 3000, 4000})
    fs::create_directories(corrupt_dir_name(dir, t));
  fs::create_directories(root.path() / "disk-other");
  write_store(dir);
  fs::remove(files_of(dir, "MANIFEST-").back());
  auto r = open_disk_tier(options_for(dir), nullptr, 3);
  ASSERT_TRUE(r) << error_text(r.error());
  ASSERT_TRUE(r->tier);
  EXPECT_EQ(r->report.result, outcome::reset);
  auto kept = corrupt_dirs(dir);
  std::sort(kept.begin(), kept.end());
  std::vector<fs::path> want{corrupt_dir_name(dir, 3000), corrupt_dir_name(dir, 4000), r->report.moved_to};
  EXPECT_EQ(kept, want);
  EXPECT_TRUE(fs::is_directory(root.path() / "disk-other"));
  EXPECT_EQ(corrupt_dir_name("/x/disk", 0), fs::path{"/x/disk.corrupt-19700101T000000Z"});
}

TEST(DiskRecoveryTest, TheTieredStoreStartsColdAndSaysSo) {
  test::temp_dir root{"tessera-kvstore"};
  const auto dir = root.path() / "disk";
  write_store(dir);
  flip(files_of(dir, "", ".log").back(), 0, 40);
  fs::remove(files_of(dir, "MANIFEST-").back());
  tiered_store_options o;
  o.host_capacity_bytes = 1 << 20;
  o.disk = options_for(dir);
  auto s = tiered_block_store::open(o);
  ASSERT_TRUE(s) << error_text(s.error());
  EXPECT_EQ((*s)->disk_report().result, outcome::reset);
  EXPECT_EQ((*s)->stats().disk_resets, 1u);
  EXPECT_EQ((*s)->stats().disk_disabled, 0u);
  ASSERT_NE((*s)->disk(), nullptr);
  EXPECT_FALSE((*s)->get(key_of(1)));
  EXPECT_FALSE((*s)->put(key_of(1), block_for(key_of(1))));
  auto b = (*s)->get(key_of(1));
  EXPECT_TRUE(b && is_block_for(key_of(1), b->block));
}

TEST(DiskRecoveryTest, ADirectoryLockedByAnotherOpenerTurnsTheDiskTierOffAndLeavesItAlone) {
  test::temp_dir root{"tessera-kvstore"};
  const auto dir = root.path() / "disk";
  auto first = rocksdb_tier::open(options_for(dir));
  ASSERT_TRUE(first) << error_text(first.error());
  auto second = open_disk_tier(options_for(dir), nullptr);
  ASSERT_TRUE(second) << error_text(second.error());
  EXPECT_EQ(second->report.result, outcome::disabled);
  EXPECT_FALSE(second->tier);
  EXPECT_NE(second->report.reason.find("lock"), std::string::npos) << second->report.reason;
  EXPECT_TRUE(corrupt_dirs(dir).empty()) << "a directory in use must never be moved";
}

TEST(DiskRecoveryTest, BadOptionsAreStillErrors) {
  test::temp_dir root{"tessera-kvstore"};
  auto o = options_for(root.path() / "disk");
  o.capacity_bytes = 0;
  auto r = open_disk_tier(o, nullptr);
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error() == kvstore_errc::bad_config);
  auto nowhere = open_disk_tier(options_for({}), nullptr);
  ASSERT_FALSE(nowhere);
  EXPECT_TRUE(nowhere.error() == kvstore_errc::bad_config);
}

TEST(DiskRecoveryTest, APathThatIsAFileTurnsTheDiskTierOffAndLeavesItAlone) {
  test::temp_dir root{"tessera-kvstore"};
  const auto file = root.path() / "disk";
  std::ofstream(file) << "not a store";
  auto r = open_disk_tier(options_for(file), nullptr);
  ASSERT_TRUE(r) << error_text(r.error());
  EXPECT_EQ(r->report.result, outcome::disabled);
  EXPECT_TRUE(fs::is_regular_file(file));
  auto below = open_disk_tier(options_for(file / "sub"), nullptr);
  ASSERT_TRUE(below) << error_text(below.error());
  EXPECT_EQ(below->report.result, outcome::disabled);
}

/// Runs `body` in a child process; its exit code (or 128 + signal).
int in_child(const std::function<int()>& body) {
  const pid_t pid = ::fork();
  if (pid == 0)
    ::_exit(body());
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/// In a child: opens a tiered store on `dir` and returns 10 + the disk
/// outcome when the store works on host memory; 1 when it does not open.
int open_store_in_child(const fs::path& dir) {
  tiered_store_options o;
  o.host_capacity_bytes = 1 << 20;
  o.disk = options_for(dir);
  auto s = tiered_block_store::open(o);
  if (!s)
    return 1;
  if ((*s)->put(key_of(1), block_for(key_of(1))))
    return 2;
  auto b = (*s)->get(key_of(1));
  if (!b || !is_block_for(key_of(1), b->block))
    return 3;
  return 10 + static_cast<int>((*s)->disk_report().result);
}

// A read-only directory: chmod 555 where that denies writes; as root
// (which chmod does not stop), a read-only tmpfs mount where mounting is
// allowed.
TEST(DiskRecoveryTest, AReadOnlyDirectoryTurnsTheDiskTierOffAndTheStoreServes) {
  test::temp_dir root{"tessera-kvstore"};
  const auto dir = root.path() / "disk";
  bool mounted = false;
  if (::geteuid() == 0) {
    fs::create_directories(dir);
    if (::mount("tessera-test", dir.c_str(), "tmpfs", 0, "size=4m") != 0)
      GTEST_SKIP() << "running as root, where chmod 555 does not deny writes, and cannot mount a tmpfs "
                      "to make a read-only one: "
                   << std::strerror(errno);
    mounted = true;
  }
  write_store(dir);
  if (mounted) {
    ASSERT_EQ(::mount(nullptr, dir.c_str(), nullptr, MS_REMOUNT | MS_RDONLY, nullptr), 0) << std::strerror(errno);
  } else {
    fs::permissions(dir, fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read |
                             fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec);
  }
  auto r = open_disk_tier(options_for(dir), nullptr);
  const int child = in_child([&] { return open_store_in_child(dir); });
  if (mounted)
    (void)::umount2(dir.c_str(), MNT_DETACH);
  else
    fs::permissions(dir, fs::perms::owner_all);
  ASSERT_TRUE(r) << error_text(r.error());
  EXPECT_EQ(r->report.result, outcome::disabled);
  EXPECT_FALSE(r->tier);
  EXPECT_FALSE(r->report.reason.empty());
  EXPECT_TRUE(corrupt_dirs(dir).empty()) << "a read-only cache is not corrupt: it stays where it is";
  EXPECT_EQ(child, 10 + static_cast<int>(outcome::disabled)) << "the store must serve from host memory";
}

// A full disk, without root: a file size limit (RLIMIT_FSIZE, with
// SIGXFSZ ignored) makes every write past it fail with EFBIG, as ENOSPC
// would, in a child process. Where this process may mount, a full tmpfs
// as well.
TEST(DiskRecoveryTest, AFullDiskTurnsTheDiskTierOffAndTheStoreServes) {
  test::temp_dir root{"tessera-kvstore"};
  const auto dir = root.path() / "disk";
  write_store(dir);
  const int child = in_child([&] {
    ::signal(SIGXFSZ, SIG_IGN);
    rlimit lim{1024, 1024};
    if (::setrlimit(RLIMIT_FSIZE, &lim) != 0)
      return 4;
    return open_store_in_child(dir);
  });
  EXPECT_EQ(child, 10 + static_cast<int>(outcome::disabled));
  EXPECT_TRUE(corrupt_dirs(dir).empty()) << "a full disk is not corruption: the cache stays where it is";

  const auto small = root.path() / "small";
  fs::create_directories(small);
  if (::mount("tessera-test", small.c_str(), "tmpfs", 0, "size=1m") != 0)
    GTEST_SKIP() << "the file size limit case passed; a real full file system needs a tmpfs mount, "
                    "which this process may not make: "
                 << std::strerror(errno);
  write_store(small / "disk");
  {
    std::ofstream fill{small / "fill", std::ios::binary};
    std::vector<char> chunk(64 << 10, 'x');
    while (fill.write(chunk.data(), static_cast<std::streamsize>(chunk.size())) && fill.flush()) {
    }
  }
  auto r = open_disk_tier(options_for(small / "disk"), nullptr);
  const bool moved = !corrupt_dirs(small / "disk").empty();
  (void)::umount2(small.c_str(), MNT_DETACH);
  ASSERT_TRUE(r) << error_text(r.error());
  EXPECT_EQ(r->report.result, outcome::disabled);
  EXPECT_NE(r->report.reason.find("No space left on device"), std::string::npos) << r->report.reason;
  EXPECT_FALSE(moved);
}

// A corrupt directory whose fresh replacement cannot be written either
// (every RocksDB write fails): the tier is off, the store still opens.
TEST(DiskRecoveryTest, AFreshDirectoryThatCannotBeWrittenTurnsTheDiskTierOff) {
  test::temp_dir root{"tessera-kvstore"};
  const auto dir = root.path() / "disk";
  write_store(dir);
  fs::remove(files_of(dir, "MANIFEST-").back());
  auto faults = std::make_shared<test::fault_fs>();
  faults->fail_writes = true;
  tiered_store_options o;
  o.host_capacity_bytes = 1 << 20;
  o.disk = options_for(dir);
  o.disk->env = test::fault_fs::env_for(faults);
  auto s = tiered_block_store::open(o);
  ASSERT_TRUE(s) << error_text(s.error());
  const auto r = (*s)->disk_report();
  EXPECT_EQ(r.result, outcome::disabled);
  EXPECT_NE(r.reason.find("MANIFEST"), std::string::npos) << r.reason;
  EXPECT_NE(r.reason.find("fresh directory"), std::string::npos) << r.reason;
  EXPECT_TRUE(fs::is_directory(r.moved_to)) << "the damaged copy is kept for a post-mortem";
  EXPECT_EQ((*s)->disk(), nullptr);
  EXPECT_EQ((*s)->stats().disk_disabled, 1u);
  EXPECT_FALSE((*s)->put(key_of(1), block_for(key_of(1))));
  auto b = (*s)->get(key_of(1));
  EXPECT_TRUE(b && is_block_for(key_of(1), b->block));
}

} // namespace
} // namespace tessera::kvstore
