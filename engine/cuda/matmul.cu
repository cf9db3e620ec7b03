// y = x w^T for small M (decode): one warp per output column n reads its
// weight row once, in 16-byte loads where alignment allows, and keeps up to
// rows_per_block dot products in registers. f32 accumulation throughout.
// Prefill-sized M would want a tiled tensor-core kernel instead.

#include <algorithm>
#include <cstdint>

#include <cuda_fp16.h>

#include "engine/cuda/launch.hpp"

namespace tessera::engine::cuda::detail {

namespace {

constexpr int warps_per_block = 8;     // output columns per block
constexpr int rows_per_block = 8;      // rows of x per block (grid.y tiles M)
constexpr int64_t max_grid_y = 65535;  // CUDA's limit; larger M loops

struct f32_w { using storage = float; };
struct f16_w { using storage = uint16_t; };
struct bf16_w { using storage = uint16_t; };

__device__ float widen(float v, f32_w) { return v; }
__device__ float widen(uint16_t v, f16_w) { return __half2float(__ushort_as_half(v)); }
__device__ float widen(uint16_t v, bf16_w) { return __uint_as_float(uint32_t{v} << 16); }

// Unpacks one 32-bit word into its 1 (f32) or 2 (16-bit) values, lowest
// address first (little-endian).
__device__ void unpack(uint32_t word, float* out, f32_w) { out[0] = __uint_as_float(word); }
__device__ void unpack(uint32_t word, float* out, f16_w) {
  out[0] = __half2float(__ushort_as_half(static_cast<unsigned short>(word & 0xffffu)));
  out[1] = __half2float(__ushort_as_half(static_cast<unsigned short>(word >> 16)));
}
__device__ void unpack(uint32_t word, float* out, bf16_w) {
  out[0] = __uint_as_float(word << 16);
  out[1] = __uint_as_float(word & 0xffff0000u);
}

__device__ float warp_sum(float v) {
  for (int off = 16; off > 0; off >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// Vec: w rows, x and ldx allow 16-byte loads (K a multiple of the vector
// width, 16-byte aligned bases, ldx % 4 == 0); checked by the launcher.
template <class W, bool Vec>
__global__ void
matmul_kernel(const float* __restrict__ x, int64_t M, int64_t K, int64_t ldx,
              const typename W::storage* __restrict__ w, int64_t N,
              const float* __restrict__ bias, float* __restrict__ y, int64_t ldy) {
  const int lane = threadIdx.x & 31;
  const int64_t n = int64_t{blockIdx.x} * warps_per_block + (threadIdx.x >> 5);
  // Whole warps leave together, so the shuffles below see full warps.
  if (n >= N)
    return;
  const auto* wr = w + n * K;
  const float b = bias != nullptr ? bias[n] : 0.0f;

  for (int64_t m0 = int64_t{blockIdx.y} * rows_per_block; m0 < M;
       m0 += int64_t{gridDim.y} * rows_per_block) {
    const int rows = static_cast<int>(min(int64_t{rows_per_block}, M - m0));
    const float* xb = x + m0 * ldx;
    float acc[rows_per_block] = {};
    if constexpr (Vec) {
      constexpr int per_word = 4 / sizeof(typename W::storage);
      constexpr int per_vec = 4 * per_word; // elements per 16-byte load
      const int64_t n_vec = K / per_vec;
      const uint4* wv = reinterpret_cast<const uint4*>(wr);
      for (int64_t kv = lane; kv < n_vec; kv += 32) {
        const uint4 raw = wv[kv];
        float wf[per_vec];
        unpack(raw.x, wf, W{});
        unpack(raw.y, wf + per_word, W{});
        unpack(raw.z, wf + 2 * per_word, W{});
        unpack(raw.w, wf + 3 * per_word, W{});
#pragma unroll
        for (int r = 0; r < rows_per_block; ++r) {
          if (r < rows) {
            const float4* xv = reinterpret_cast<const float4*>(xb + r * ldx + kv * per_vec);
#pragma unroll
            for (int j = 0; j < per_vec / 4; ++j) {
              const float4 xs = xv[j];
              acc[r] = fmaf(xs.x, wf[4 * j + 0], acc[r]);
              acc[r] = fmaf(xs.y, wf[4 * j + 1], acc[r]);
              acc[r] = fmaf(xs.z, wf[4 * j + 2], acc[r]);
              acc[r] = fmaf(xs.w, wf[4 * j + 3], acc[r]);
            }
          }
        }
      }
    } else {
      for (int64_t k = lane; k < K; k += 32) {
        const float wk = widen(wr[k], W{});
#pragma unroll
        for (int r = 0; r < rows_per_block; ++r)
          if (r < rows)
            acc[r] = fmaf(xb[r * ldx + k], wk, acc[r]);
      }
    }
#pragma unroll
    for (int r = 0; r < rows_per_block; ++r) {
      const float sum = warp_sum(acc[r]);
      if (lane == 0 && r < rows)
        y[(m0 + r) * ldy + n] = sum + b;
    }
  }
}

template <class W>
cudaError_t launch_typed(const float* x, int64_t M, int64_t K, int64_t ldx, const void* w,
                         int64_t N, const float* bias, float* y, int64_t ldy, cudaStream_t s) {
  using T = typename W::storage;
  constexpr int64_t per_vec = 16 / sizeof(T);
  const bool vec = K % per_vec == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(x) % 16 == 0 && ldx % 4 == 0;
  const dim3 grid(static_cast<unsigned>((N + warps_per_block - 1) / warps_per_block),
                  static_cast<unsigned>(std::min((M + rows_per_block - 1) / rows_per_block, max_grid_y)));
  const auto* wt = static_cast<const T*>(w);
  if (vec)
    matmul_kernel<W, true><<<grid, warps_per_block * 32, 0, s>>>(x, M, K, ldx, wt, N, bias, y, ldy);
  else
    matmul_kernel<W, false><<<grid, warps_per_block * 32, 0, s>>>(x, M, K, ldx, wt, N, bias, y, ldy);
  return cudaGetLastError();
}

} // namespace

cudaError_t launch_matmul(const float* x, int64_t M, int64_t K, int64_t ldx, const void* w,
                          dtype wt, int64_t N, const float* bias, float* y, int64_t ldy,
                          cudaStream_t s) {
  switch (wt) {
    case dtype::f32: return launch_typed<f32_w>(x, M, K, ldx, w, N, bias, y, ldy, s);
    case dtype::f16: return launch_typed<f16_w>(x, M, K, ldx, w, N, bias, y, ldy, s);
    case dtype::bf16: return launch_typed<bf16_w>(x, M, K, ldx, w, N, bias, y, ldy, s);
    case dtype::i8: break; // a KV dtype only: no weight is int8
  }
  return cudaErrorInvalidValue;
}

} // namespace tessera::engine::cuda::detail
