#include "engine/cuda/cuda_kernels.hpp"

#include <cstdint>
#include <limits>
#include <string>

#include <cuda_runtime_api.h>

#include "common/assert.hpp"
#include "engine/cuda/cuda_error.hpp"
#include "engine/cuda/launch.hpp"

namespace tessera::engine::cuda {

namespace {

cudaStream_t native(stream s) { return static_cast<cudaStream_t>(s.native); }

// Converts the launch result; in synchronous mode also waits, so errors of
// the kernel's execution are reported here, against the kernel's name.
caf::error finish(cudaError_t launched, const char* kernel, stream s) {
  if (launched != cudaSuccess)
    return make_cuda_error(launched, std::string{"launch of "} + kernel);
  if (s.native == nullptr) {
    if (cudaError_t err = cudaStreamSynchronize(nullptr); err != cudaSuccess)
      return make_cuda_error(err, std::string{"cudaStreamSynchronize after "} + kernel);
  }
  return {};
}

constexpr int64_t max_grid_x = std::numeric_limits<int32_t>::max();

} // namespace

caf::error rmsnorm_rows(const float* x, const float* w, float eps, int64_t rows, int64_t n,
                        float* out, stream s) {
  TESSERA_ASSERT(rows >= 0 && n >= 0 && rows <= max_grid_x, "rmsnorm_rows: bad shape");
  if (rows == 0 || n == 0)
    return {};
  TESSERA_ASSERT(x != nullptr && w != nullptr && out != nullptr);
  return finish(detail::launch_rmsnorm_rows(x, w, eps, rows, n, out, native(s)), "rmsnorm_rows",
                s);
}

caf::error silu_mul(const float* gate, const float* up, int64_t n, float* out, stream s) {
  TESSERA_ASSERT(n >= 0, "silu_mul: negative n");
  if (n == 0)
    return {};
  TESSERA_ASSERT(gate != nullptr && up != nullptr && out != nullptr);
  return finish(detail::launch_silu_mul(gate, up, n, out, native(s)), "silu_mul", s);
}

caf::error rope(float* x, int64_t n_tokens, int32_t n_heads, int32_t head_dim,
                const float* inv_freq, const int32_t* positions, stream s) {
  TESSERA_ASSERT(n_tokens >= 0 && n_heads >= 0 && head_dim >= 0 && head_dim % 2 == 0,
                 "rope: bad shape (head_dim must be even)");
  if (n_tokens == 0 || n_heads == 0 || head_dim == 0)
    return {};
  TESSERA_ASSERT(x != nullptr && inv_freq != nullptr && positions != nullptr);
  return finish(detail::launch_rope(x, n_tokens, n_heads, head_dim, inv_freq, positions,
                                    native(s)),
                "rope", s);
}

caf::error matmul(const float* x, int64_t M, int64_t K, int64_t ldx, const void* w, dtype wt,
                  int64_t N, const float* bias, float* y, int64_t ldy, stream s) {
  TESSERA_ASSERT(M >= 0 && K >= 0 && N >= 0 && ldx >= K && ldy >= N, "matmul: bad shape");
  TESSERA_ASSERT(N / 8 < max_grid_x, "matmul: N too large for one grid");
  if (M == 0 || N == 0)
    return {};
  TESSERA_ASSERT(y != nullptr && (K == 0 || (x != nullptr && w != nullptr)));
  return finish(detail::launch_matmul(x, M, K, ldx, w, wt, N, bias, y, ldy, native(s)),
                "matmul", s);
}

caf::error to_f32(const void* src, dtype t, int64_t n, float* dst, stream s) {
  TESSERA_ASSERT(n >= 0, "to_f32: negative n");
  if (n == 0)
    return {};
  TESSERA_ASSERT(src != nullptr && dst != nullptr);
  return finish(detail::launch_to_f32(src, t, n, dst, native(s)), "to_f32", s);
}

caf::error from_f32(const float* src, int64_t n, dtype t, void* dst, stream s) {
  TESSERA_ASSERT(n >= 0, "from_f32: negative n");
  if (n == 0)
    return {};
  TESSERA_ASSERT(src != nullptr && dst != nullptr);
  return finish(detail::launch_from_f32(src, n, t, dst, native(s)), "from_f32", s);
}

} // namespace tessera::engine::cuda
