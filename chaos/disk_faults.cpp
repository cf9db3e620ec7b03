#include "chaos/disk_faults.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include <fcntl.h>
#include <sys/mount.h>
#include <unistd.h>

#include <caf/sec.hpp>

namespace tessera::chaos {

namespace {

constexpr const char* filler_name = "chaos-disk-filler";

std::string errno_text(int e) {
  return std::strerror(e);
}

} // namespace

caf::expected<std::unique_ptr<disk_faults>> disk_faults::mount(const std::vector<std::filesystem::path>& dirs,
                                                               uint64_t bytes) {
  std::unique_ptr<disk_faults> out{new disk_faults};
  const std::string options = "size=" + std::to_string(std::max<uint64_t>(bytes / 1024, 64)) + "k,mode=0700";
  for (const auto& d : dirs) {
    std::error_code ec;
    std::filesystem::create_directories(d, ec);
    if (ec)
      return caf::make_error(caf::sec::invalid_argument,
                             "disk faults: cannot make " + d.string() + ": " + ec.message());
    if (::mount("tessera-chaos", d.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, options.c_str()) != 0) {
      const int e = errno;
      return caf::make_error(caf::sec::invalid_argument,
                             "disk faults: cannot mount a tmpfs on " + d.string() + " (" + errno_text(e) +
                               "): disk-full events need CAP_SYS_ADMIN (run tessera chaos as root, in a "
                               "container that allows mount)");
    }
    out->mounted_.push_back(d);
  }
  return out;
}

disk_faults::~disk_faults() {
  for (const auto& d : mounted_)
    (void) ::umount2(d.c_str(), MNT_DETACH);
}

std::string disk_faults::fill(const std::filesystem::path& dir) {
  if (std::find(mounted_.begin(), mounted_.end(), dir) == mounted_.end())
    return "disk faults: " + dir.string() + " is not a tmpfs of this run";
  const auto file = dir / filler_name;
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0)
    return "disk faults: cannot open " + file.string() + ": " + errno_text(errno);
  // 64 KiB at a time, then single pages once that no longer fits, until
  // a page does not either.
  std::vector<char> chunk(size_t{1} << 16, '\0');
  std::string why;
  for (size_t size = chunk.size();;) {
    const ssize_t n = ::write(fd, chunk.data(), size);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && errno == ENOSPC && size > 4096) {
      size = 4096;
      continue;
    }
    if (n < 0 && errno == ENOSPC)
      break; // full
    if (n < 0) {
      why = "disk faults: writing " + file.string() + ": " + errno_text(errno);
      break;
    }
  }
  ::close(fd);
  return why;
}

std::string disk_faults::heal(const std::filesystem::path& dir) {
  if (std::find(mounted_.begin(), mounted_.end(), dir) == mounted_.end())
    return "disk faults: " + dir.string() + " is not a tmpfs of this run";
  std::error_code ec;
  std::filesystem::remove(dir / filler_name, ec);
  return ec ? "disk faults: removing the filler: " + ec.message() : std::string{};
}

} // namespace tessera::chaos
