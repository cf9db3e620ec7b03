#include "kvstore/disk_recovery.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <string_view>
#include <system_error>
#include <vector>

#include <spdlog/spdlog.h>

#include "common/error.hpp"
#include "kvstore/kvstore_errc.hpp"

namespace tessera::kvstore {

const char* to_string(disk_open_report::outcome x) {
  switch (x) {
    case disk_open_report::outcome::none: return "none";
    case disk_open_report::outcome::opened: return "opened";
    case disk_open_report::outcome::reset: return "reset";
    case disk_open_report::outcome::disabled: return "disabled";
  }
  return "unknown";
}

std::filesystem::path corrupt_dir_name(const std::filesystem::path& dir, int64_t utc_seconds) {
  const auto t = static_cast<std::time_t>(utc_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::array<char, 32> buf{};
  std::strftime(buf.data(), buf.size(), "%Y%m%dT%H%M%SZ", &tm);
  auto out = dir;
  out += std::string{".corrupt-"} + buf.data();
  return out;
}

namespace {

// Failures that say nothing about the directory's contents: moving it
// aside would not help (a fresh directory on the same file system fails
// the same way) and would hide a healthy cache from the next start. The
// texts are strerror's, as RocksDB's IOError messages quote them, and
// RocksDB's own for a LOCK file another process (or this one) holds.
bool outside_the_data(std::string_view text) {
  static constexpr std::string_view marks[] = {
      "Permission denied", "Read-only file system", "No space left on device",
      "File too large",    "Disk quota exceeded",   "While lock file",
      "lock hold by current process"};
  return std::any_of(std::begin(marks), std::end(marks),
                     [&](std::string_view m) { return text.find(m) != std::string_view::npos; });
}

// Writes and removes a small file in `dir`: a read-only or full file
// system shows here, with errno's words, before RocksDB is asked.
std::string probe_writable(const std::filesystem::path& dir) {
  const auto file = dir / ".tessera-write-probe";
  const int fd = ::open(file.c_str(), O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0)
    return "cannot create a file in it: " + std::string{std::strerror(errno)};
  std::array<char, 4096> zeros{};
  std::string err;
  // A write cut short (the disk filled up mid-way) is retried for the
  // rest, which then fails with the reason.
  for (size_t done = 0; done < zeros.size();) {
    const auto n = ::write(fd, zeros.data() + done, zeros.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      err = "cannot write a file in it: " + std::string{n == 0 ? "no progress" : std::strerror(errno)};
      break;
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  ::unlink(file.c_str());
  return err;
}

// The error's message without the "kvstore: <dir>: " the tier starts it
// with (the log line names the directory once).
std::string reason_of(const caf::error& err, const std::filesystem::path& dir) {
  auto text = error_message(err);
  const auto prefix = "kvstore: " + dir.string() + ": ";
  if (text.starts_with(prefix))
    text.erase(0, prefix.size());
  return text;
}

// Deletes all but the newest `keep` <dir>.corrupt-* directories.
void prune_corrupt_dirs(const std::filesystem::path& dir, size_t keep) {
  std::error_code ec;
  auto parent = dir.parent_path();
  if (parent.empty())
    parent = ".";
  const std::string prefix = dir.filename().string() + ".corrupt-";
  std::vector<std::filesystem::path> found;
  for (const auto& e : std::filesystem::directory_iterator{parent, ec})
    if (e.path().filename().string().starts_with(prefix) && e.is_directory(ec))
      found.push_back(e.path());
  std::sort(found.begin(), found.end(), std::greater<>{}); // newest first: the names sort by time
  for (size_t i = keep; i < found.size(); ++i) {
    std::filesystem::remove_all(found[i], ec);
    if (ec)
      spdlog::warn("kvstore: cannot delete the old disk tier copy {}: {}", found[i].string(), ec.message());
  }
}

// Renames `dir` to a fresh <dir>.corrupt-<time> name; the new path, or
// the error.
caf::expected<std::filesystem::path> move_aside(const std::filesystem::path& dir) {
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count();
  auto aside = corrupt_dir_name(dir, now);
  std::error_code ec;
  // Two resets within one second: keep both.
  for (int i = 2; std::filesystem::exists(aside, ec); ++i)
    aside = corrupt_dir_name(dir, now).string() + "-" + std::to_string(i);
  std::filesystem::rename(dir, aside, ec);
  if (ec)
    return make_kvstore_error(kvstore_errc::open_failed, ec.message());
  return aside;
}

} // namespace

caf::expected<disk_open_result> open_disk_tier(rocksdb_tier_options opts, event_log* events,
                                               size_t keep_corrupt_dirs) {
  if (opts.dir.empty())
    return make_kvstore_error(kvstore_errc::bad_config, "kvstore: the disk tier has no directory");
  disk_open_result out;
  auto& r = out.report;
  r.dir = opts.dir;
  // "a/b/" names the same directory as "a/b"; the moved copy goes beside it.
  auto dir = opts.dir.lexically_normal();
  if (!dir.has_filename())
    dir = dir.parent_path();
  auto disable = [&](std::string why) {
    r.result = disk_open_report::outcome::disabled;
    r.reason = std::move(why);
    spdlog::error("kvstore: the disk tier at {} is off, serving from host memory only: {}", r.dir.string(),
                  r.reason);
    return std::move(out);
  };

  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return disable("cannot create the directory: " + ec.message());
  if (!std::filesystem::is_directory(dir, ec))
    return disable("it is not a directory");
  if (auto err = probe_writable(dir); !err.empty())
    return disable(err);

  auto first = rocksdb_tier::open(opts, events);
  if (first) {
    out.tier = std::move(*first);
    r.result = disk_open_report::outcome::opened;
    return out;
  }
  if (first.error() == kvstore_errc::bad_config)
    return std::move(first.error());
  const auto why = reason_of(first.error(), opts.dir);
  if (outside_the_data(why))
    return disable(why);

  auto aside = move_aside(dir);
  if (!aside)
    return disable(why + "; and it cannot be moved aside: " + reason_of(aside.error(), opts.dir));
  r.moved_to = *aside;
  spdlog::warn("kvstore: the disk tier at {} cannot be opened, starting it cold: moved to {}: {}",
               r.dir.string(), r.moved_to.string(), why);
  prune_corrupt_dirs(dir, keep_corrupt_dirs);
  if (!std::filesystem::exists(r.moved_to, ec))
    r.moved_to.clear(); // keep_corrupt_dirs = 0: deleted at once

  auto fresh = rocksdb_tier::open(opts, events);
  if (!fresh)
    return disable(why + "; and a fresh directory cannot be opened either: " + reason_of(fresh.error(), opts.dir));
  out.tier = std::move(*fresh);
  r.result = disk_open_report::outcome::reset;
  r.reason = why;
  return out;
}

} // namespace tessera::kvstore
