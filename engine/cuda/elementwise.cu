// Row-wise and element-wise kernels: RMSNorm, SwiGLU, RoPE, conversions.
// Plain f32 arithmetic with the precise expf/sincosf/sqrtf (no fast math),
// so results stay within a few ulp of the CPU kernels.

#include <algorithm>

#include <cuda_fp16.h>

#include "engine/cuda/launch.hpp"

namespace tessera::engine::cuda::detail {

namespace {

constexpr int block_threads = 256;
// Grid-stride loops cover the rest; more blocks than this only add
// scheduling overhead.
constexpr int64_t max_blocks = 8192;

unsigned grid_for(int64_t n) {
  return static_cast<unsigned>(std::min<int64_t>((n + block_threads - 1) / block_threads, max_blocks));
}

// Sum over the block; every thread gets the result. blockDim.x is a
// multiple of 32, at most 1024.
__device__ float block_sum(float v) {
  __shared__ float partial[32];
  for (int off = 16; off > 0; off >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, off);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (lane == 0)
    partial[warp] = v;
  __syncthreads();
  const int n_warps = blockDim.x >> 5;
  v = lane < n_warps ? partial[lane] : 0.0f;
  for (int off = 16; off > 0; off >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// One block per row. x and out may alias, so no __restrict__ on them.
__global__ void rmsnorm_rows_kernel(const float* x, const float* __restrict__ w, float eps,
                                    int64_t n, float* out) {
  const int64_t row = blockIdx.x;
  const float* xr = x + row * n;
  float* o = out + row * n;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    ss = fmaf(xr[i], xr[i], ss);
  ss = block_sum(ss);
  const float scale = 1.0f / sqrtf(ss / static_cast<float>(n) + eps);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    o[i] = xr[i] * scale * w[i];
}

__global__ void silu_mul_kernel(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float g = gate[i];
    out[i] = g / (1.0f + expf(-g)) * up[i];
  }
}

// One thread per rotated pair (token, head, i < head_dim / 2).
__global__ void rope_kernel(float* x, int64_t n_tokens, int32_t n_heads, int32_t head_dim,
                            const float* __restrict__ inv_freq,
                            const int32_t* __restrict__ positions) {
  const int32_t half = head_dim / 2;
  const int64_t total = n_tokens * n_heads * half;
  for (int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; idx < total;
       idx += int64_t{gridDim.x} * blockDim.x) {
    const int32_t i = static_cast<int32_t>(idx % half);
    const int64_t token_head = idx / half;
    const int64_t t = token_head / n_heads;
    float s, c;
    sincosf(static_cast<float>(positions[t]) * inv_freq[i], &s, &c);
    float* v = x + token_head * head_dim;
    const float a = v[i], b = v[i + half];
    v[i] = a * c - b * s;
    v[i + half] = b * c + a * s;
  }
}

struct f32_tag {};
struct f16_tag {};
struct bf16_tag {};

__device__ float load_f32(const void* p, int64_t i, f32_tag) { return static_cast<const float*>(p)[i]; }
__device__ float load_f32(const void* p, int64_t i, f16_tag) {
  return __half2float(__ushort_as_half(static_cast<const unsigned short*>(p)[i]));
}
__device__ float load_f32(const void* p, int64_t i, bf16_tag) {
  return __uint_as_float(uint32_t{static_cast<const uint16_t*>(p)[i]} << 16);
}

__device__ void store_f32(void* p, int64_t i, float v, f32_tag) { static_cast<float*>(p)[i] = v; }
__device__ void store_f32(void* p, int64_t i, float v, f16_tag) {
  static_cast<unsigned short*>(p)[i] = __half_as_ushort(__float2half_rn(v));
}
// Same bit recipe as engine::f32_to_bf16, so results are bitwise equal.
__device__ void store_f32(void* p, int64_t i, float v, bf16_tag) {
  uint32_t u = __float_as_uint(v);
  uint16_t r;
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    r = static_cast<uint16_t>((u >> 16) | 0x40u);
  } else {
    u += 0x7fffu + ((u >> 16) & 1u);
    r = static_cast<uint16_t>(u >> 16);
  }
  static_cast<uint16_t*>(p)[i] = r;
}

template <class Tag>
__global__ void to_f32_kernel(const void* src, int64_t n, float* dst) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    dst[i] = load_f32(src, i, Tag{});
}

template <class Tag>
__global__ void from_f32_kernel(const float* src, int64_t n, void* dst) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    store_f32(dst, i, src[i], Tag{});
}

} // namespace

cudaError_t launch_rmsnorm_rows(const float* x, const float* w, float eps, int64_t rows,
                                int64_t n, float* out, cudaStream_t s) {
  // Short rows get a smaller block so few threads idle; 32 is the minimum
  // block_sum supports.
  const int threads = n >= 1024 ? 1024 : n >= 256 ? 256 : 32;
  rmsnorm_rows_kernel<<<static_cast<unsigned>(rows), threads, 0, s>>>(x, w, eps, n, out);
  return cudaGetLastError();
}

cudaError_t launch_silu_mul(const float* gate, const float* up, int64_t n, float* out,
                            cudaStream_t s) {
  silu_mul_kernel<<<grid_for(n), block_threads, 0, s>>>(gate, up, n, out);
  return cudaGetLastError();
}

cudaError_t launch_rope(float* x, int64_t n_tokens, int32_t n_heads, int32_t head_dim,
                        const float* inv_freq, const int32_t* positions, cudaStream_t s) {
  const int64_t total = n_tokens * n_heads * (head_dim / 2);
  rope_kernel<<<grid_for(total), block_threads, 0, s>>>(x, n_tokens, n_heads, head_dim,
                                                        inv_freq, positions);
  return cudaGetLastError();
}

cudaError_t launch_to_f32(const void* src, dtype t, int64_t n, float* dst, cudaStream_t s) {
  switch (t) {
    case dtype::f32: to_f32_kernel<f32_tag><<<grid_for(n), block_threads, 0, s>>>(src, n, dst); break;
    case dtype::f16: to_f32_kernel<f16_tag><<<grid_for(n), block_threads, 0, s>>>(src, n, dst); break;
    case dtype::bf16: to_f32_kernel<bf16_tag><<<grid_for(n), block_threads, 0, s>>>(src, n, dst); break;
    case dtype::i8: return cudaErrorInvalidValue; // a KV dtype only (int8 + scales)
  }
  return cudaGetLastError();
}

cudaError_t launch_from_f32(const float* src, int64_t n, dtype t, void* dst, cudaStream_t s) {
  switch (t) {
    case dtype::f32: from_f32_kernel<f32_tag><<<grid_for(n), block_threads, 0, s>>>(src, n, dst); break;
    case dtype::f16: from_f32_kernel<f16_tag><<<grid_for(n), block_threads, 0, s>>>(src, n, dst); break;
    case dtype::bf16: from_f32_kernel<bf16_tag><<<grid_for(n), block_threads, 0, s>>>(src, n, dst); break;
    case dtype::i8: return cudaErrorInvalidValue; // a KV dtype only (int8 + scales)
  }
  return cudaGetLastError();
}

} // namespace tessera::engine::cuda::detail
