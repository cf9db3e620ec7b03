#include "engine/cpu/kernels.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <vector>

#include "engine/cpu/kernels_isa.hpp"
#include "engine/cpu/thread_pool.hpp"

namespace tessera::engine::cpu {

namespace detail {
namespace {

// ---------------------------------------------------------------------------
// Portable kernels. Plain C++ so they run anywhere; they mimic an 8-lane
// vector unit (lane j sums k = j, j+8, j+16, ... in order, then a fixed
// pairwise tree) so that the order of additions depends only on K, like the
// SIMD versions. Multiplies and adds stay separate (-ffp-contract=off for this
// target), which is why this set's bits differ from the FMA-based ones.

constexpr int generic_lanes = 8;

float reduce8(const float* a) {
  float s4[4], s2[2];
  for (int i = 0; i < 4; ++i)
    s4[i] = a[i] + a[i + 4];
  for (int i = 0; i < 2; ++i)
    s2[i] = s4[i] + s4[i + 2];
  return s2[0] + s2[1];
}

// Converts w[k0, k0 + n) of a weight row to f32 (exact for every type).
void widen(const void* w, dtype t, int64_t k0, int64_t n, float* out) {
  switch (t) {
    case dtype::f32: std::memcpy(out, static_cast<const float*>(w) + k0, n * sizeof(float)); break;
    case dtype::bf16: {
      const auto* p = static_cast<const uint16_t*>(w) + k0;
      for (int64_t i = 0; i < n; ++i)
        out[i] = bf16_to_f32(p[i]);
      break;
    }
    case dtype::f16: {
      const auto* p = static_cast<const uint16_t*>(w) + k0;
      for (int64_t i = 0; i < n; ++i)
        out[i] = f16_to_f32(p[i]);
      break;
    }
    case dtype::i8: break; // KV only (kv_int8.hpp): never a weight or an activation
  }
}

const void* row_ptr(const void* w, dtype t, int64_t n, int64_t K) {
  return static_cast<const char*>(w) + static_cast<size_t>(n * K) * dtype_size(t);
}

void generic_matmul_range(const float* x, int64_t M, int64_t K, int64_t ldx, const void* w,
                          dtype wt, int64_t n_begin, int64_t n_end, const float* bias,
                          float* y, int64_t ldy) {
  // Rows in groups of 8 share each converted chunk of a weight row; the chunk
  // length is a multiple of the lane count so lane j always sees k = j mod 8.
  constexpr int64_t rows = 8, chunk = 64;
  for (int64_t n = n_begin; n < n_end; ++n) {
    const void* wn = row_ptr(w, wt, n, K);
    for (int64_t m0 = 0; m0 < M; m0 += rows) {
      const int64_t mr = std::min(rows, M - m0);
      float acc[rows][generic_lanes] = {};
      float wb[chunk];
      for (int64_t k0 = 0; k0 < K; k0 += chunk) {
        const int64_t kc = std::min(chunk, K - k0);
        widen(wn, wt, k0, kc, wb);
        for (int64_t r = 0; r < mr; ++r) {
          const float* xr = x + (m0 + r) * ldx + k0;
          for (int64_t k = 0; k < kc; ++k)
            acc[r][k % generic_lanes] += xr[k] * wb[k];
        }
      }
      for (int64_t r = 0; r < mr; ++r) {
        float s = reduce8(acc[r]);
        if (bias)
          s += bias[n];
        y[(m0 + r) * ldy + n] = s;
      }
    }
  }
}

float generic_dot(const float* a, const void* b, dtype bt, int64_t n) {
  float y = 0.0f;
  generic_matmul_range(a, 1, n, n, b, bt, 0, 1, nullptr, &y, 1);
  return y;
}

void generic_rmsnorm(const float* x, const float* w, float eps, int64_t n, float* out) {
  float acc[generic_lanes] = {};
  for (int64_t i = 0; i < n; ++i)
    acc[i % generic_lanes] += x[i] * x[i];
  const float inv = 1.0f / std::sqrt(reduce8(acc) / static_cast<float>(n) + eps);
  for (int64_t i = 0; i < n; ++i)
    out[i] = x[i] * inv * w[i];
}

void generic_silu_mul(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void generic_axpy(float a, const void* x, dtype xt, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i)
    y[i] += a * load_as_f32(x, xt, static_cast<size_t>(i));
}

void generic_to_f32(const void* src, dtype t, int64_t n, float* dst) { widen(src, t, 0, n, dst); }

void generic_from_f32(const float* src, int64_t n, dtype t, void* dst) {
  for (int64_t i = 0; i < n; ++i)
    store_from_f32(dst, t, static_cast<size_t>(i), src[i]);
}

} // namespace

const kernel_table generic_kernels = {
    "generic",        8,
    &generic_matmul_range, &generic_dot, &generic_rmsnorm, &generic_silu_mul,
    &generic_axpy,    &generic_to_f32, &generic_from_f32,
};

} // namespace detail

// ---------------------------------------------------------------------------
// Dispatch.

namespace {

using detail::kernel_table;

bool cpu_has_avx512() {
  // DQ is checked too because kernels_avx512.cpp is built with -mavx512dq
  // (every CPU with BW and VL has it; this only guards the build flags).
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
}

bool cpu_has_avx2() {
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
         __builtin_cpu_supports("f16c");
}

const kernel_table* best_table() {
  if (cpu_has_avx512())
    return &detail::avx512_kernels;
  if (cpu_has_avx2())
    return &detail::avx2_kernels;
  return &detail::generic_kernels;
}

// Chosen on first use rather than by a static initialiser, so kernels called
// from other static initialisers still see a valid table.
std::atomic<const kernel_table*> g_active{nullptr};

const kernel_table& active() {
  const kernel_table* t = g_active.load(std::memory_order_acquire);
  if (!t) {
    t = best_table();
    g_active.store(t, std::memory_order_release);
  }
  return *t;
}

} // namespace

std::string_view kernel_isa() { return active().name; }

bool set_kernel_isa(std::string_view isa) {
  const kernel_table* t = nullptr;
  if (isa == "avx512" && cpu_has_avx512())
    t = &detail::avx512_kernels;
  else if (isa == "avx2" && cpu_has_avx2())
    t = &detail::avx2_kernels;
  else if (isa == "generic")
    t = &detail::generic_kernels;
  if (!t)
    return false;
  g_active.store(t, std::memory_order_release);
  return true;
}

void matmul(thread_pool& pool, const float* x, int64_t M, int64_t K, int64_t ldx,
            const void* w, dtype wt, int64_t N, const float* bias, float* y, int64_t ldy) {
  const matmul_output out{w, wt, N, bias, y, ldy};
  matmul_multi(pool, x, M, K, ldx, std::span{&out, 1});
}

void matmul_multi(thread_pool& pool, const float* x, int64_t M, int64_t K, int64_t ldx,
                  std::span<const matmul_output> outs) {
  if (M <= 0)
    return;
  const kernel_table& t = active();
  const int64_t threads = pool.size();
  int64_t total_tiles = 0, total_n = 0;
  for (const auto& o : outs) {
    total_tiles += (o.N + t.n_align - 1) / t.n_align;
    total_n += o.N;
  }
  if (total_n <= 0)
    return;
  // Below ~64K multiply-adds a fork-join costs more than it saves. Only the
  // split changes, never an element's arithmetic, so results are the same.
  const bool tiny = M * total_n * K < (int64_t{1} << 16);
  if (threads == 1 || total_tiles == 1 || tiny) {
    for (const auto& o : outs)
      if (o.N > 0)
        t.matmul_range(x, M, K, ldx, o.w, o.wt, 0, o.N, o.bias, o.y, o.ldy);
    return;
  }
  // Contiguous, tile-aligned column chunks handed out in order to whichever
  // thread is free: each chunk streams a long run of w (and reuses each x row
  // group over many tiles), while a thread slowed by another process on a
  // shared host leaves its remaining chunks to the others instead of stalling
  // the whole matmul. Several outputs sharing x (q, k, v; gate, up) go in one
  // parallel region. The chunks shrink as the work runs out (guided
  // self-scheduling): each takes about 1/(2 x threads) of the tiles still
  // unassigned, at most a quarter of a thread's share and at least min_tiles,
  // so the threads finish within one small chunk of each other. With fixed
  // chunks of a quarter share, the caller of a batch-1 decode with 2 threads
  // waited ~9% of the step for the other thread's last chunk (perf).
  const int64_t max_tiles = std::max<int64_t>(1, (total_tiles + threads * 4 - 1) / (threads * 4));
  // A chunk of at least ~32 KiB of weights per 4 rows of x: below that the
  // hand-out and a chunk's cold first tile cost more than the balance gains,
  // and larger batches re-read x for every chunk.
  const int64_t tile_bytes = t.n_align * K * static_cast<int64_t>(dtype_size(outs.front().wt));
  const int64_t min_bytes = (int64_t{32} << 10) * ((M + 3) / 4);
  const int64_t min_tiles =
      std::min(max_tiles, std::max<int64_t>(1, (min_bytes + tile_bytes - 1) / std::max<int64_t>(1, tile_bytes)));
  struct chunk_ref {
    const matmul_output* out;
    int64_t n0, n1;
  };
  // Reused across calls (no allocation per matmul); workers read the
  // caller's list through this reference, not their own thread_local.
  static thread_local std::vector<chunk_ref> chunk_list;
  std::vector<chunk_ref>& chunks = chunk_list;
  chunks.clear();
  int64_t left = total_tiles;
  for (const auto& o : outs) {
    for (int64_t n0 = 0; n0 < o.N;) {
      const int64_t tiles = std::clamp((left + threads * 2 - 1) / (threads * 2), min_tiles, max_tiles);
      const int64_t n1 = std::min(o.N, n0 + tiles * t.n_align);
      chunks.push_back({&o, n0, n1});
      left -= (n1 - n0 + t.n_align - 1) / t.n_align;
      n0 = n1;
    }
  }
  pool.run_chunks(static_cast<int64_t>(chunks.size()), [&](int64_t c) {
    const chunk_ref& r = chunks[static_cast<size_t>(c)];
    t.matmul_range(x, M, K, ldx, r.out->w, r.out->wt, r.n0, r.n1, r.out->bias, r.out->y, r.out->ldy);
  });
}

void matmul_range(const float* x, int64_t M, int64_t K, int64_t ldx, const void* w, dtype wt,
                  int64_t n_begin, int64_t n_end, const float* bias, float* y, int64_t ldy) {
  if (M <= 0 || n_begin >= n_end)
    return;
  active().matmul_range(x, M, K, ldx, w, wt, n_begin, n_end, bias, y, ldy);
}

float dot(const float* a, const void* b, dtype bt, int64_t n) { return active().dot(a, b, bt, n); }

void rmsnorm(const float* x, const float* w, float eps, int64_t n, float* out) {
  if (n > 0)
    active().rmsnorm(x, w, eps, n, out);
}

void silu_mul(const float* gate, const float* up, int64_t n, float* out) {
  if (n > 0)
    active().silu_mul(gate, up, n, out);
}

void axpy(float a, const void* x, dtype xt, int64_t n, float* y) {
  if (n > 0)
    active().axpy(a, x, xt, n, y);
}

void to_f32(const void* src, dtype t, int64_t n, float* dst) {
  if (n > 0)
    active().to_f32(src, t, n, dst);
}

void from_f32(const float* src, int64_t n, dtype t, void* dst) {
  if (n > 0)
    active().from_f32(src, n, t, dst);
}

} // namespace tessera::engine::cpu
