#pragma once
/// @file
/// Raw kernel launchers, compiled by nvcc (elementwise.cu, matmul.cu) and
/// called by cuda_kernels.cpp, which checks shapes, converts errors and
/// synchronises. Internal to engine/cuda: includes the CUDA runtime header
/// and no CAF header (nvcc never parses CAF). Each returns the launch's
/// cudaGetLastError(); each needs a non-empty problem (a zero-sized grid is
/// an invalid launch), which the callers ensure.

#include <cstdint>

#include <cuda_runtime_api.h>

#include "engine/dtype.hpp"

namespace tessera::engine::cuda::detail {

cudaError_t launch_rmsnorm_rows(const float* x, const float* w, float eps, int64_t rows,
                                int64_t n, float* out, cudaStream_t s);

cudaError_t launch_silu_mul(const float* gate, const float* up, int64_t n, float* out,
                            cudaStream_t s);

cudaError_t launch_rope(float* x, int64_t n_tokens, int32_t n_heads, int32_t head_dim,
                        const float* inv_freq, const int32_t* positions, cudaStream_t s);

cudaError_t launch_to_f32(const void* src, dtype t, int64_t n, float* dst, cudaStream_t s);

cudaError_t launch_from_f32(const float* src, int64_t n, dtype t, void* dst, cudaStream_t s);

cudaError_t launch_matmul(const float* x, int64_t M, int64_t K, int64_t ldx, const void* w,
                          dtype wt, int64_t N, const float* bias, float* y, int64_t ldy,
                          cudaStream_t s);

} // namespace tessera::engine::cuda::detail
