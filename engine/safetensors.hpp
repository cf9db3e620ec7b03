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
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
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
///
/// Padding is inserted only before a tensor whose offset is not already a
/// multiple of 8, and never after the last one: a file whose tensor sizes
/// are all multiples of 8 (every Llama-family model) is tightly packed, as
/// the Hugging Face reader requires.
[[nodiscard]] caf::error
write_safetensors(const std::filesystem::path& path,
                  std::span<const tensor_to_write> tensors,
                  const std::map<std::string, std::string>& metadata = {});

/// A tensor's name, dtype and shape, without its bytes.
struct tensor_spec {
  std::string name;
  dtype type = dtype::f32;
  std::vector<int64_t> shape;
};

/// Produces the bytes of tensor `index` (into the spec list) in consecutive
/// chunks: first with `byte_offset` 0, then increasing, until the tensor is
/// complete; tensors are produced in list order. Every chunk but a tensor's
/// last is a multiple of 8 bytes long.
using tensor_fill_fn =
  std::function<void(size_t index, size_t byte_offset, std::span<std::byte> out)>;

/// Like write_safetensors, but the bytes come from `fill`, one bounded chunk
/// (at most 1 MiB) at a time, so a model larger than memory can be written.
/// Errors: engine_errc::io_error naming the path, bad_weights for a bad spec
/// (negative dimension, duplicate name).
[[nodiscard]] caf::error
write_safetensors_streamed(const std::filesystem::path& path,
                           std::span<const tensor_spec> specs, const tensor_fill_fn& fill,
                           const std::map<std::string, std::string>& metadata = {});

} // namespace tessera::engine
