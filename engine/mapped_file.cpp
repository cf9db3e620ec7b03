#include "engine/mapped_file.hpp"

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/engine_errc.hpp"

namespace tessera::engine {

namespace {

caf::error sys_error(const std::filesystem::path& path, const char* what, int err) {
  return make_engine_error(engine_errc::io_error,
                           path.string() + ": " + what + ": " + std::strerror(err));
}

} // namespace

caf::expected<mapped_file> mapped_file::open(const std::filesystem::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return sys_error(path, "cannot open", errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return sys_error(path, "cannot stat", err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_engine_error(engine_errc::io_error, path.string() + ": not a regular file");
  }
  auto size = static_cast<size_t>(st.st_size);
  if (size == 0) { // mmap rejects a zero length; an empty file is simply empty
    ::close(fd);
    return mapped_file{};
  }
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  int err = errno;
  ::close(fd); // the mapping keeps the file alive
  if (p == MAP_FAILED)
    return sys_error(path, "cannot map", err);
  return mapped_file{static_cast<const std::byte*>(p), size};
}

mapped_file::mapped_file(mapped_file&& other) noexcept
  : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

mapped_file& mapped_file::operator=(mapped_file&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

mapped_file::~mapped_file() { reset(); }

void mapped_file::reset() noexcept {
  if (data_ != nullptr)
    ::munmap(const_cast<std::byte*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

} // namespace tessera::engine
