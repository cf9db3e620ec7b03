#pragma once
/// @file
/// The CPU kernels of the forward pass, dispatched at run time to AVX-512,
/// AVX2+FMA or portable code (whichever the CPU supports, chosen once).
///
/// Batch invariance: every kernel computes each output element with the
/// same sequence of floating-point operations whatever the batch size, the
/// row's position in the batch, the number of threads or the tile it falls
/// in. So a token's logits are bitwise identical whether it was computed
/// alone, in a batch, in a prefill chunk or in a decode step: the engine's
/// invariants (chunked == one-shot, batched == alone, cached == uncached)
/// hold exactly, not within a tolerance.

#include <cstdint>
#include <span>
#include <string_view>

#include "engine/dtype.hpp"

namespace tessera::engine::cpu {

class thread_pool;

/// Name of the kernel set in use: "avx512", "avx2" or "generic".
std::string_view kernel_isa();

/// Forces a kernel set ("avx512", "avx2", "generic") for tests and
/// benchmarks; returns false if the CPU lacks it. Not thread-safe.
bool set_kernel_isa(std::string_view isa);

/// y[m, n] = sum_k x[m, k] * w[n, k] (+ bias[n]) for m < M, n < N.
/// x: f32 [M, K], row stride ldx (floats). w: [N, K] row-major of type wt,
/// row stride K. bias: f32 [N] or nullptr. y: f32 [M, N], row stride ldy.
/// The work is split over the pool along N (never along K), so results do
/// not depend on the pool size. Each y[m, n] is a dot product accumulated
/// in f32 in an order that depends only on K.
void matmul(thread_pool& pool, const float* x, int64_t M, int64_t K, int64_t ldx,
            const void* w, dtype wt, int64_t N, const float* bias, float* y,
            int64_t ldy);

/// One product of a matmul_multi: y[m, n] = x[m, :] . w[n, :] (+ bias[n]).
struct matmul_output {
  const void* w = nullptr; ///< [N, K] row-major, type wt
  dtype wt = dtype::f32;
  int64_t N = 0;
  const float* bias = nullptr; ///< [N] or nullptr
  float* y = nullptr;          ///< [M, N], row stride ldy
  int64_t ldy = 0;
};

/// Several matmuls of the same x (q, k and v; gate and up) in one parallel
/// region: fewer fork-joins and one long stream of weights per thread.
/// Each output is exactly what matmul would compute for it.
void matmul_multi(thread_pool& pool, const float* x, int64_t M, int64_t K, int64_t ldx,
                  std::span<const matmul_output> outs);

/// Single-threaded matmul over output columns [n_begin, n_end) only, same
/// arithmetic as matmul (for callers that do their own threading).
void matmul_range(const float* x, int64_t M, int64_t K, int64_t ldx, const void* w,
                  dtype wt, int64_t n_begin, int64_t n_end, const float* bias,
                  float* y, int64_t ldy);

/// Dot product of f32 `a` and `b` (type bt) over n elements, in the same
/// order as one matmul output element of length n.
float dot(const float* a, const void* b, dtype bt, int64_t n);

/// out[i] = x[i] / sqrt(mean(x^2) + eps) * w[i], i < n. w is f32.
void rmsnorm(const float* x, const float* w, float eps, int64_t n, float* out);

/// out[i] = silu(gate[i]) * up[i], i < n (SwiGLU).
void silu_mul(const float* gate, const float* up, int64_t n, float* out);

/// y[i] += a * x[i] where x has type xt, i < n.
void axpy(float a, const void* x, dtype xt, int64_t n, float* y);

/// Converts n elements of type t to f32.
void to_f32(const void* src, dtype t, int64_t n, float* dst);

/// Converts n f32 elements to type t (round to nearest even).
void from_f32(const float* src, int64_t n, dtype t, void* dst);

} // namespace tessera::engine::cpu
