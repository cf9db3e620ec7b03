#pragma once
/// @file
/// device_buffer: an owning, move-only allocation of CUDA device memory.
/// No CUDA header is included; the memory is reached through void*.

#include <cstddef>
#include <cstdint>

#include <caf/error.hpp>
#include <caf/expected.hpp>

namespace tessera::engine::cuda {

/// Owns `size_bytes()` bytes of global memory on the current CUDA device,
/// freed on destruction. Move-only. Copies are synchronous (cudaMemcpy:
/// they also wait for work queued on the legacy default stream, and report
/// errors of earlier asynchronous work). Not thread-safe per object.
class device_buffer {
public:
  /// An empty buffer: data() is nullptr, size_bytes() is 0.
  device_buffer() = default;

  /// Allocates `size_bytes` bytes (uninitialised) on the current device;
  /// 0 bytes gives an empty buffer without calling CUDA. Errors:
  /// engine_errc::unsupported (no driver or device), engine_errc::device_error
  /// (out of memory, ...), each naming cudaMalloc and the CUDA error text.
  [[nodiscard]] static caf::expected<device_buffer> allocate(size_t size_bytes);

  ~device_buffer();
  device_buffer(device_buffer&& other) noexcept;
  device_buffer& operator=(device_buffer&& other) noexcept;
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;

  /// Device address of the first byte (256-byte aligned), or nullptr.
  [[nodiscard]] void* data() noexcept { return data_; }
  [[nodiscard]] const void* data() const noexcept { return data_; }

  /// The device address as a typed pointer (no conversion is done).
  template <class T>
  [[nodiscard]] T* as() noexcept { return static_cast<T*>(data_); }
  template <class T>
  [[nodiscard]] const T* as() const noexcept { return static_cast<const T*>(data_); }

  /// Size of the allocation in bytes.
  [[nodiscard]] size_t size_bytes() const noexcept { return size_bytes_; }

  /// Copies `size_bytes` bytes from host memory `src` to this buffer at
  /// `offset_bytes`. The range must lie inside the buffer (asserted).
  /// Errors: engine_errc::device_error naming cudaMemcpy.
  [[nodiscard]] caf::error copy_from_host(const void* src, size_t size_bytes,
                                          size_t offset_bytes = 0);

  /// Copies `size_bytes` bytes at `offset_bytes` of this buffer to host
  /// memory `dst`. The range must lie inside the buffer (asserted).
  /// Errors: engine_errc::device_error naming cudaMemcpy.
  [[nodiscard]] caf::error copy_to_host(void* dst, size_t size_bytes,
                                        size_t offset_bytes = 0) const;

private:
  device_buffer(void* data, size_t size_bytes) noexcept : data_(data), size_bytes_(size_bytes) {}
  void release() noexcept;

  void* data_ = nullptr;
  size_t size_bytes_ = 0;
};

} // namespace tessera::engine::cuda
