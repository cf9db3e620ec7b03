#pragma once
/// @file
/// Reading and writing the safetensors format: an 8-byte little-endian
/// header length, a JSON header {name: {dtype, shape, data_offsets}, ...,
/// "__metadata__": {...}}, then the tensor bytes. Files are memory-mapped
/// read-only; every offset and size in the header is validated against the
/// file before any tensor is handed out.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "engine/dtype.hpp"

namespace tessera::engine {

/// A tensor inside a mapped file. Non-owning: valid while the file that
/// produced it is alive.
struct tensor_view {
  std::string name;
  dtype type = dtype::f32;
  /// Row-major shape, outermost first.
  std::vector<int64_t> shape;
  /// First byte of the tensor, in the mapping.
  const std::byte* data = nullptr;
  size_t size_bytes = 0;

  /// Product of the shape (1 for a scalar).
  [[nodiscard]] int64_t numel() const;
};

/// A read-only, memory-mapped safetensors file. Movable, not copyable.
class safetensors_file {
public:
  /// Maps and validates `path`. Errors (engine_errc::bad_weights, io_error,
  /// unsupported) name the file and the problem: truncated file, header
  /// length past the end, malformed JSON, unknown dtype, shape/size
  /// mismatch, offsets out of bounds or overlapping.
  [[nodiscard]] static caf::expected<safetensors_file>
  open(const std::filesystem::path& path);

  safetensors_file(safetensors_file&&) noexcept;
  safetensors_file& operator=(safetensors_file&&) noexcept;
  ~safetensors_file();

  /// All tensors, in file order.
  [[nodiscard]] const std::vector<tensor_view>& tensors() const;
  /// The tensor called `name`, or nullptr.
  [[nodiscard]] const tensor_view* find(std::string_view name) const;
  /// The "__metadata__" string map (empty if absent).
  [[nodiscard]] const std::map<std::string, std::string>& metadata() const;
  [[nodiscard]] const std::filesystem::path& path() const;

private:
  struct impl;
  explicit safetensors_file(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

/// One tensor to write: its bytes must be numel * dtype_size(type) long.
struct tensor_to_write {
  std::string name;
  dtype type = dtype::f32;
  std::vector<int64_t> shape;
  std::span<const std::byte> bytes;
};

/// Writes a safetensors file (header padded to 8 bytes, tensors in the given
/// order, each aligned to 8 bytes). Writes to a temporary name and renames,
/// so a crash never leaves a half-written file under `path`.
[[nodiscard]] caf::error
write_safetensors(const std::filesystem::path& path,
                  std::span<const tensor_to_write> tensors,
                  const std::map<std::string, std::string>& metadata = {});

} // namespace tessera::engine
