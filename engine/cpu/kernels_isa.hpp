#pragma once
/// @file
/// Internal to engine/cpu: the per-ISA kernel tables behind kernels.hpp.
/// kernels.cpp picks one table at start (or when a test forces one) and
/// forwards every public kernel through it.
///
/// Each *_avx512.cpp / *_avx2.cpp translation unit is compiled with that
/// ISA's flags, so it must not define or odr-use inline functions shared with
/// other units (their out-of-line copies could be picked by the linker and
/// run on a CPU without the ISA): the ISA units include only this header,
/// <immintrin.h> and C headers, and keep everything else in an anonymous
/// namespace.

#include <cstdint>

#include "engine/dtype.hpp"

namespace tessera::engine::cpu::detail {

/// Function table of one kernel set. Signatures match kernels.hpp.
/// All entries are single-threaded and batch-invariant (see kernels.hpp).
struct kernel_table {
  /// "avx512", "avx2" or "generic".
  const char* name;
  /// matmul splits N between threads in multiples of this many columns (the
  /// widest microkernel), so each thread's range is made of full tiles.
  int64_t n_align;
  /// matmul over output columns [n_begin, n_end).
  void (*matmul_range)(const float* x, int64_t M, int64_t K, int64_t ldx, const void* w,
                       dtype wt, int64_t n_begin, int64_t n_end, const float* bias, float* y,
                       int64_t ldy);
  /// One matmul output element: sum_k a[k] * b[k].
  float (*dot)(const float* a, const void* b, dtype bt, int64_t n);
  void (*rmsnorm)(const float* x, const float* w, float eps, int64_t n, float* out);
  void (*silu_mul)(const float* gate, const float* up, int64_t n, float* out);
  void (*axpy)(float a, const void* x, dtype xt, int64_t n, float* y);
  void (*to_f32)(const void* src, dtype t, int64_t n, float* dst);
  void (*from_f32)(const float* src, int64_t n, dtype t, void* dst);
};

/// Portable C++ kernels; run on any CPU.
extern const kernel_table generic_kernels;
/// AVX-512 F/BW/VL/DQ kernels (kernels_avx512.cpp); call only where the CPU has them.
extern const kernel_table avx512_kernels;
/// AVX2 + FMA + F16C kernels (kernels_avx2.cpp); call only where the CPU has them.
extern const kernel_table avx2_kernels;

} // namespace tessera::engine::cpu::detail
