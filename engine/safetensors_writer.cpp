#include <cerrno>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "engine/engine_errc.hpp"
#include "engine/safetensors.hpp"

namespace tessera::engine {

namespace {

constexpr size_t chunk_bytes = size_t{1} << 20;

constexpr uint64_t align8(uint64_t x) { return (x + 7) & ~uint64_t{7}; }

/// A buffered writer to a file descriptor that remembers the first error.
class file_sink {
public:
  file_sink(int fd, const std::filesystem::path& path) : fd_(fd), path_(path) {
    buf_.resize(chunk_bytes);
  }

  /// Room for `n` (<= chunk_bytes) more bytes, flushing first if needed.
  std::span<std::byte> reserve(size_t n) {
    if (used_ + n > buf_.size())
      flush();
    return {buf_.data() + used_, n};
  }
  void commit(size_t n) { used_ += n; }

  void put(std::span<const std::byte> bytes) {
    while (!bytes.empty()) {
      size_t n = std::min(bytes.size(), chunk_bytes);
      auto out = reserve(n);
      std::memcpy(out.data(), bytes.data(), n);
      commit(n);
      bytes = bytes.subspan(n);
    }
  }

  void flush() {
    const std::byte* p = buf_.data();
    size_t left = used_;
    while (left > 0 && !err_) {
      ssize_t w = ::write(fd_, p, left);
      if (w < 0 && errno == EINTR)
        continue;
      if (w <= 0) {
        err_ = make_engine_error(engine_errc::io_error, path_.string() + ": write failed: " +
                                                          std::strerror(errno));
        break;
      }
      p += w;
      left -= static_cast<size_t>(w);
    }
    used_ = 0;
  }

  [[nodiscard]] const caf::error& error() const { return err_; }

private:
  int fd_;
  const std::filesystem::path& path_;
  std::vector<std::byte> buf_;
  size_t used_ = 0;
  caf::error err_;
};

struct planned_tensor {
  uint64_t begin = 0;
  uint64_t size = 0;
};

caf::expected<std::string> build_header(const std::filesystem::path& path,
                                        std::span<const tensor_spec> specs,
                                        const std::map<std::string, std::string>& metadata,
                                        std::vector<planned_tensor>& plan) {
  auto fail = [&](const std::string& what) {
    return make_engine_error(engine_errc::bad_weights, path.string() + ": " + what);
  };
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty())
    header["__metadata__"] = metadata;
  std::set<std::string_view> names;
  uint64_t offset = 0;
  for (const auto& s : specs) {
    if (s.name == "__metadata__" || !names.insert(s.name).second)
      return fail("tensor name '" + s.name + "' is reserved or used twice");
    uint64_t numel = 1;
    for (auto d : s.shape) {
      if (d < 0)
        return fail("tensor '" + s.name + "' has negative dimension " + std::to_string(d));
      if (__builtin_mul_overflow(numel, static_cast<uint64_t>(d), &numel))
        return fail("tensor '" + s.name + "' has a shape whose size overflows");
    }
    uint64_t size = numel * dtype_size(s.type);
    if (offset % 8 != 0)
      offset = align8(offset);
    plan.push_back({offset, size});
    header[s.name] = {{"dtype", to_safetensors_name(s.type)},
                      {"shape", s.shape},
                      {"data_offsets", {offset, offset + size}}};
    offset += size;
  }
  std::string text = header.dump();
  text.resize(align8(text.size()), ' ');
  return text;
}

} // namespace

caf::error write_safetensors_streamed(const std::filesystem::path& path,
                                      std::span<const tensor_spec> specs,
                                      const tensor_fill_fn& fill,
                                      const std::map<std::string, std::string>& metadata) {
  std::vector<planned_tensor> plan;
  auto header = build_header(path, specs, metadata, plan);
  if (!header)
    return header.error();

  auto tmp = path;
  tmp += ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return make_engine_error(engine_errc::io_error,
                             tmp.string() + ": cannot create: " + std::strerror(errno));
  caf::error err;
  {
    file_sink sink{fd, tmp};
    std::byte len_bytes[8];
    uint64_t len = header->size();
    for (auto& b : len_bytes) {
      b = static_cast<std::byte>(len & 0xff);
      len >>= 8;
    }
    sink.put(len_bytes);
    sink.put(std::as_bytes(std::span{*header}));
    uint64_t pos = 0;
    for (size_t i = 0; i < specs.size() && !sink.error(); ++i) {
      static constexpr std::byte zeros[8] = {};
      sink.put(std::span{zeros}.first(plan[i].begin - pos));
      for (uint64_t done = 0; done < plan[i].size;) {
        auto n = static_cast<size_t>(std::min<uint64_t>(plan[i].size - done, chunk_bytes));
        auto out = sink.reserve(n);
        fill(i, static_cast<size_t>(done), out);
        sink.commit(n);
        done += n;
      }
      pos = plan[i].begin + plan[i].size;
    }
    sink.flush();
    err = sink.error();
  }
  // Data on disk before the rename makes it visible under `path`.
  if (!err && ::fdatasync(fd) != 0)
    err = make_engine_error(engine_errc::io_error,
                            tmp.string() + ": fdatasync failed: " + std::strerror(errno));
  if (::close(fd) != 0 && !err)
    err = make_engine_error(engine_errc::io_error,
                            tmp.string() + ": close failed: " + std::strerror(errno));
  if (!err && ::rename(tmp.c_str(), path.c_str()) != 0)
    err = make_engine_error(engine_errc::io_error, path.string() + ": cannot rename " +
                                                     tmp.string() + ": " +
                                                     std::strerror(errno));
  if (err)
    ::unlink(tmp.c_str());
  return err;
}

caf::error write_safetensors(const std::filesystem::path& path,
                             std::span<const tensor_to_write> tensors,
                             const std::map<std::string, std::string>& metadata) {
  std::vector<tensor_spec> specs;
  specs.reserve(tensors.size());
  for (const auto& t : tensors) {
    specs.push_back({t.name, t.type, t.shape});
    int64_t numel = 1;
    bool overflow = false;
    for (auto d : t.shape)
      overflow = overflow || d < 0 || __builtin_mul_overflow(numel, d, &numel);
    if (overflow || static_cast<uint64_t>(numel) * dtype_size(t.type) != t.bytes.size())
      return make_engine_error(engine_errc::bad_weights,
                               path.string() + ": tensor '" + t.name + "' has " +
                                 std::to_string(t.bytes.size()) +
                                 " bytes, which does not match its shape and dtype");
  }
  return write_safetensors_streamed(
    path, specs,
    [&](size_t i, size_t offset, std::span<std::byte> out) {
      std::memcpy(out.data(), tensors[i].bytes.data() + offset, out.size());
    },
    metadata);
}

} // namespace tessera::engine
