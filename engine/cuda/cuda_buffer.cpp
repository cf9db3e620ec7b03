#include "engine/cuda/cuda_buffer.hpp"

#include <string>
#include <utility>

#include <cuda_runtime_api.h>

#include "common/assert.hpp"
#include "engine/cuda/cuda_error.hpp"

namespace tessera::engine::cuda {

caf::expected<device_buffer> device_buffer::allocate(size_t size_bytes) {
  if (size_bytes == 0)
    return device_buffer{};
  void* p = nullptr;
  if (cudaError_t err = cudaMalloc(&p, size_bytes); err != cudaSuccess)
    return make_cuda_error(err, "cudaMalloc(" + std::to_string(size_bytes) + " bytes)");
  return device_buffer{p, size_bytes};
}

device_buffer::~device_buffer() { release(); }

device_buffer::device_buffer(device_buffer&& other) noexcept
  : data_(std::exchange(other.data_, nullptr)),
    size_bytes_(std::exchange(other.size_bytes_, 0)) {}

device_buffer& device_buffer::operator=(device_buffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_bytes_ = std::exchange(other.size_bytes_, 0);
  }
  return *this;
}

void device_buffer::release() noexcept {
  if (data_ != nullptr) {
    // cudaFree fails only once the context is already broken (sticky error
    // or shutdown); the next checked call reports that, and a destructor
    // has nowhere to return it.
    (void)cudaFree(data_);
    data_ = nullptr;
    size_bytes_ = 0;
  }
}

caf::error device_buffer::copy_from_host(const void* src, size_t size_bytes,
                                         size_t offset_bytes) {
  TESSERA_ASSERT(offset_bytes <= size_bytes_ && size_bytes <= size_bytes_ - offset_bytes,
                 "device_buffer::copy_from_host out of range");
  if (size_bytes == 0)
    return {};
  if (cudaError_t err = cudaMemcpy(static_cast<char*>(data_) + offset_bytes, src,
                                   size_bytes, cudaMemcpyHostToDevice);
      err != cudaSuccess)
    return make_cuda_error(err, "cudaMemcpy(host to device)");
  return {};
}

caf::error device_buffer::copy_to_host(void* dst, size_t size_bytes,
                                       size_t offset_bytes) const {
  TESSERA_ASSERT(offset_bytes <= size_bytes_ && size_bytes <= size_bytes_ - offset_bytes,
                 "device_buffer::copy_to_host out of range");
  if (size_bytes == 0)
    return {};
  if (cudaError_t err = cudaMemcpy(dst, static_cast<const char*>(data_) + offset_bytes,
                                   size_bytes, cudaMemcpyDeviceToHost);
      err != cudaSuccess)
    return make_cuda_error(err, "cudaMemcpy(device to host)");
  return {};
}

} // namespace tessera::engine::cuda
