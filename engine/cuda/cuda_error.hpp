#pragma once
/// @file
/// Conversion of cudaError_t into the engine's caf::error, done once where
/// each CUDA call is made. Internal to engine/cuda: it includes the CUDA
/// runtime header, so no public header may include it.

#include <string_view>

#include <caf/error.hpp>
#include <cuda_runtime_api.h>

namespace tessera::engine::cuda {

/// Makes the error for a failed CUDA runtime call `call` (e.g. "cudaMalloc"):
/// engine_errc::unsupported when the failure means no usable driver or
/// device, engine_errc::device_error otherwise. The message reads
/// "<call>: <cudaGetErrorString> (<cudaGetErrorName>)".
[[nodiscard]] caf::error make_cuda_error(cudaError_t err, std::string_view call);

} // namespace tessera::engine::cuda
