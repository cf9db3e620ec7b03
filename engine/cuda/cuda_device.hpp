#pragma once
/// @file
/// Discovery of the CUDA devices this process can use. No CUDA header is
/// included: callers need not be compiled by nvcc nor see the CUDA toolkit.

#include <cstddef>
#include <string>
#include <vector>

#include <caf/expected.hpp>

namespace tessera::engine::cuda {

/// What the CUDA runtime reports about one device.
struct cuda_device_info {
  int index = 0;                 ///< CUDA ordinal, as cudaSetDevice takes it.
  std::string name;              ///< e.g. "NVIDIA H100 80GB HBM3".
  size_t total_memory_bytes = 0; ///< Global memory.
  int sm_major = 0;              ///< Compute capability, major (9 for Hopper).
  int sm_minor = 0;              ///< Compute capability, minor.
  int multiprocessors = 0;       ///< Streaming multiprocessor count.
};

/// Lists the CUDA devices visible to this process (CUDA_VISIBLE_DEVICES
/// applies). Errors: engine_errc::unsupported with the CUDA runtime's text
/// when there is no driver, the driver is too old, or no device is present
/// (the list is never empty on success); engine_errc::device_error when a
/// present device cannot be queried. Thread-safe.
[[nodiscard]] caf::expected<std::vector<cuda_device_info>> cuda_devices();

} // namespace tessera::engine::cuda
