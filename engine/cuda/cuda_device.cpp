#include "engine/cuda/cuda_device.hpp"

#include <string>

#include <cuda_runtime_api.h>

#include "engine/cuda/cuda_error.hpp"
#include "engine/engine_errc.hpp"

namespace tessera::engine::cuda {

caf::expected<std::vector<cuda_device_info>> cuda_devices() {
  int count = 0;
  if (cudaError_t err = cudaGetDeviceCount(&count); err != cudaSuccess) {
    // Not sticky: clear it so it is not reported again by a later call.
    (void)cudaGetLastError();
    return make_engine_error(engine_errc::unsupported,
                             "no usable CUDA device: cudaGetDeviceCount: " +
                               std::string{cudaGetErrorString(err)});
  }
  if (count <= 0)
    return make_engine_error(engine_errc::unsupported,
                             "no CUDA device: cudaGetDeviceCount found none");
  std::vector<cuda_device_info> out;
  out.reserve(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p{};
    if (cudaError_t err = cudaGetDeviceProperties(&p, i); err != cudaSuccess)
      return make_cuda_error(err, "cudaGetDeviceProperties(" + std::to_string(i) + ")");
    out.push_back(cuda_device_info{.index = i,
                                   .name = p.name,
                                   .total_memory_bytes = p.totalGlobalMem,
                                   .sm_major = p.major,
                                   .sm_minor = p.minor,
                                   .multiprocessors = p.multiProcessorCount});
  }
  return out;
}

} // namespace tessera::engine::cuda
