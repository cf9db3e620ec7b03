#pragma once
/// @file
/// CUDA kernels of the decoder's forward pass: the same functions as the
/// CPU kernels of engine/cpu/kernels.hpp (up to f32 rounding: results are
/// not bitwise equal to the CPU's), on device memory.
///
/// All pointers are device pointers (e.g. device_buffer::data()). All
/// arithmetic is f32 with f32 accumulation; no fast-math intrinsics.
///
/// Streams: each launcher takes a `stream` last. The default, stream{} (the
/// "synchronous" mode), runs the kernel on the legacy default stream and
/// waits for it, so the returned error covers the kernel's execution. A
/// stream made from a native cudaStream_t (`stream{reinterpret_cast<void*>(s)}`)
/// only enqueues: the returned error covers the launch, and execution
/// errors surface at the next synchronising call on that stream.
///
/// Shapes are checked with TESSERA_ASSERT (a wrong shape is a bug). Errors
/// returned are caf::error with engine_errc::device_error (or unsupported
/// when no device is usable), naming the CUDA call and the CUDA error text.

#include <cstdint>

#include <caf/error.hpp>

#include "engine/dtype.hpp"

namespace tessera::engine::cuda {

/// A CUDA stream, not owned: `native` is a cudaStream_t. nullptr (the
/// default) selects the synchronous mode described above.
struct stream {
  void* native = nullptr;
};

/// out[r, i] = x[r, i] / sqrt(mean_i(x[r, :]^2) + eps) * w[i] for r < rows,
/// i < n. x, out: f32 [rows, n], contiguous (out may equal x). w: f32 [n].
[[nodiscard]] caf::error rmsnorm_rows(const float* x, const float* w, float eps,
                                      int64_t rows, int64_t n, float* out,
                                      stream s = {});

/// out[i] = silu(gate[i]) * up[i] = gate[i] / (1 + exp(-gate[i])) * up[i],
/// i < n (SwiGLU). f32; out may equal gate or up.
[[nodiscard]] caf::error silu_mul(const float* gate, const float* up, int64_t n,
                                  float* out, stream s = {});

/// Rotary embedding in place, Hugging Face rotate-half convention.
/// x: f32 [n_tokens, n_heads, head_dim], contiguous. inv_freq: f32
/// [head_dim / 2]. positions: int32 [n_tokens]. For each token t, head h and
/// i < head_dim / 2, with a = float(positions[t]) * inv_freq[i] (in f32):
/// x[i] <- x[i] cos a - x[i + d/2] sin a, x[i + d/2] <- x[i + d/2] cos a + x[i] sin a.
/// head_dim must be even.
[[nodiscard]] caf::error rope(float* x, int64_t n_tokens, int32_t n_heads,
                              int32_t head_dim, const float* inv_freq,
                              const int32_t* positions, stream s = {});

/// y[m, n] = sum_k x[m, k] * w[n, k] (+ bias[n]) for m < M, n < N.
/// x: f32 [M, K], row stride ldx >= K (floats). w: [N, K] row-major of
/// type wt (f32, f16 or bf16), row stride K. bias: f32 [N] or nullptr.
/// y: f32 [M, N], row stride ldy >= N; must not overlap x or w. One warp
/// per output column reads its weight row once for up to 8 rows of x, so
/// the kernel suits decode (small M); f32 accumulation.
[[nodiscard]] caf::error matmul(const float* x, int64_t M, int64_t K, int64_t ldx,
                                const void* w, dtype wt, int64_t N,
                                const float* bias, float* y, int64_t ldy,
                                stream s = {});

/// Converts n elements of type t (f32, f16, bf16) to f32, exactly.
[[nodiscard]] caf::error to_f32(const void* src, dtype t, int64_t n, float* dst,
                                stream s = {});

/// Converts n f32 elements to type t, rounding to nearest even; bf16 is
/// bitwise equal to engine::f32_to_bf16 (NaN stays NaN).
[[nodiscard]] caf::error from_f32(const float* src, int64_t n, dtype t, void* dst,
                                  stream s = {});

} // namespace tessera::engine::cuda
