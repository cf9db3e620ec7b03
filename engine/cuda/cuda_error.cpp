#include "engine/cuda/cuda_error.hpp"

#include <string>

#include "engine/engine_errc.hpp"

namespace tessera::engine::cuda {

namespace {

bool means_no_device(cudaError_t err) {
  switch (err) {
    case cudaErrorInsufficientDriver:
    case cudaErrorNoDevice:
    case cudaErrorStubLibrary:
    case cudaErrorDevicesUnavailable:
    case cudaErrorInitializationError:
      return true;
    default:
      return false;
  }
}

} // namespace

caf::error make_cuda_error(cudaError_t err, std::string_view call) {
  std::string what{call};
  what += ": ";
  what += cudaGetErrorString(err);
  what += " (";
  what += cudaGetErrorName(err);
  what += ")";
  return make_engine_error(means_no_device(err) ? engine_errc::unsupported
                                                : engine_errc::device_error,
                           std::move(what));
}

} // namespace tessera::engine::cuda
