#pragma once
/// @file
/// A read-only memory mapping of a whole file (RAII). Private to the engine's
/// model loaders.

#include <cstddef>
#include <filesystem>
#include <span>

#include <caf/expected.hpp>

namespace tessera::engine {

/// A file mapped read-only (PROT_READ, MAP_PRIVATE). Movable, not copyable;
/// unmapped on destruction. An empty file maps to an empty span.
class mapped_file {
public:
  /// Opens and maps `path`. Errors: engine_errc::io_error naming the path
  /// and the system's reason.
  [[nodiscard]] static caf::expected<mapped_file> open(const std::filesystem::path& path);

  mapped_file() = default;
  mapped_file(mapped_file&& other) noexcept;
  mapped_file& operator=(mapped_file&& other) noexcept;
  mapped_file(const mapped_file&) = delete;
  mapped_file& operator=(const mapped_file&) = delete;
  ~mapped_file();

  /// The file's bytes; valid while this object lives.
  [[nodiscard]] std::span<const std::byte> bytes() const { return {data_, size_}; }

private:
  mapped_file(const std::byte* data, size_t size) : data_(data), size_(size) {}
  void reset() noexcept;

  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

} // namespace tessera::engine
