// The CUDA kernels against double-precision scalar references written here
// (no dependency on the CPU backend). Label gpu: every test skips, with the
// reason, where cuda_devices() finds no usable device.

#include <gtest/gtest.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "common/error.hpp"
#include "engine/cuda/cuda_buffer.hpp"
#include "engine/cuda/cuda_device.hpp"
#include "engine/cuda/cuda_kernels.hpp"
#include "engine/dtype.hpp"

namespace tessera::engine::cuda {
namespace {

class CudaKernelsTest : public ::testing::Test {
protected:
  void SetUp() override {
    auto devices = cuda_devices();
    if (!devices)
      GTEST_SKIP() << error_text(devices.error());
    if (devices->empty())
      GTEST_SKIP() << "no CUDA device";
  }

  // Uploads `v` into a new device buffer; fails the test on error.
  template <class T>
  device_buffer upload(const std::vector<T>& v) {
    auto buf = device_buffer::allocate(v.size() * sizeof(T));
    EXPECT_TRUE(buf) << error_text(buf.error());
    if (!buf)
      return {};
    EXPECT_FALSE(buf->copy_from_host(v.data(), v.size() * sizeof(T)));
    return std::move(*buf);
  }

  template <class T>
  std::vector<T> download(const device_buffer& buf) {
    std::vector<T> v(buf.size_bytes() / sizeof(T));
    EXPECT_FALSE(buf.copy_to_host(v.data(), v.size() * sizeof(T)));
    return v;
  }

  std::vector<float> random_floats(size_t n, float lo, float hi) {
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v)
      x = d(rng_);
    return v;
  }

  std::mt19937 rng_{1234};
};

// ---- rmsnorm ---------------------------------------------------------------

TEST_F(CudaKernelsTest, RmsnormMatchesScalarReference) {
  struct shape { int64_t rows, n; };
  for (const shape sh : {shape{1, 1}, shape{1, 7}, shape{7, 33}, shape{3, 257},
                         shape{7, 1000}, shape{2, 4096}, shape{1, 5003}}) {
    SCOPED_TRACE(testing::Message() << "rows=" << sh.rows << " n=" << sh.n);
    const float eps = 1e-5f;
    auto x = random_floats(sh.rows * sh.n, -3.0f, 3.0f);
    auto w = random_floats(sh.n, 0.5f, 1.5f);
    auto dx = upload(x), dw = upload(w);
    auto dout = device_buffer::allocate(x.size() * sizeof(float));
    ASSERT_TRUE(dout);
    ASSERT_FALSE(rmsnorm_rows(dx.as<float>(), dw.as<float>(), eps, sh.rows, sh.n,
                              dout->as<float>()));
    auto out = download<float>(*dout);
    for (int64_t r = 0; r < sh.rows; ++r) {
      double ss = 0;
      for (int64_t i = 0; i < sh.n; ++i)
        ss += double{x[r * sh.n + i]} * x[r * sh.n + i];
      const double scale = 1.0 / std::sqrt(ss / static_cast<double>(sh.n) + eps);
      for (int64_t i = 0; i < sh.n; ++i) {
        const double ref = x[r * sh.n + i] * scale * w[i];
        ASSERT_NEAR(out[r * sh.n + i], ref, 1e-5 * std::abs(ref) + 1e-6)
          << "row " << r << " i " << i;
      }
    }
  }
}

TEST_F(CudaKernelsTest, RmsnormWorksInPlace) {
  const int64_t rows = 7, n = 130;
  auto x = random_floats(rows * n, -2.0f, 2.0f);
  std::vector<float> w(n, 1.0f);
  auto dx = upload(x), dw = upload(w);
  ASSERT_FALSE(rmsnorm_rows(dx.as<float>(), dw.as<float>(), 1e-6f, rows, n, dx.as<float>()));
  auto out = download<float>(dx);
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < n; ++i)
      ss += double{out[r * n + i]} * out[r * n + i];
    EXPECT_NEAR(ss / n, 1.0, 1e-4) << "row " << r; // unit RMS after normalising
  }
}

// ---- silu_mul --------------------------------------------------------------

TEST_F(CudaKernelsTest, SiluMulMatchesScalarReference) {
  for (const int64_t n : {int64_t{1}, int64_t{31}, int64_t{1000}, int64_t{100003}}) {
    SCOPED_TRACE(testing::Message() << "n=" << n);
    auto gate = random_floats(n, -12.0f, 12.0f);
    auto up = random_floats(n, -4.0f, 4.0f);
    auto dg = upload(gate), du = upload(up);
    auto dout = device_buffer::allocate(n * sizeof(float));
    ASSERT_TRUE(dout);
    ASSERT_FALSE(silu_mul(dg.as<float>(), du.as<float>(), n, dout->as<float>()));
    auto out = download<float>(*dout);
    for (int64_t i = 0; i < n; ++i) {
      const double g = gate[i];
      const double ref = g / (1.0 + std::exp(-g)) * up[i];
      ASSERT_NEAR(out[i], ref, 2e-6 * std::abs(ref) + 1e-30) << "i " << i;
    }
  }
}

// ---- rope ------------------------------------------------------------------

TEST_F(CudaKernelsTest, RopeMatchesRotateHalfReference) {
  struct shape { int64_t tokens; int32_t heads, head_dim; float theta; };
  for (const shape sh : {shape{1, 1, 2, 10000.0f}, shape{1, 12, 64, 10000.0f},
                         shape{7, 4, 128, 500000.0f}, shape{7, 3, 6, 10000.0f}}) {
    SCOPED_TRACE(testing::Message() << "tokens=" << sh.tokens << " heads=" << sh.heads
                                    << " head_dim=" << sh.head_dim);
    const int32_t half = sh.head_dim / 2;
    std::vector<float> inv_freq(half);
    for (int32_t i = 0; i < half; ++i)
      inv_freq[i] = 1.0f / std::pow(sh.theta, static_cast<float>(2 * i) / sh.head_dim);
    std::vector<int32_t> pos(sh.tokens);
    for (int64_t t = 0; t < sh.tokens; ++t)
      pos[t] = static_cast<int32_t>(t == 0 ? 0 : 37 * t * t + 5); // up to ~1800
    if (sh.tokens == 1)
      pos[0] = 4095;
    auto x = random_floats(sh.tokens * sh.heads * sh.head_dim, -2.0f, 2.0f);
    auto dx = upload(x), df = upload(inv_freq), dp = upload(pos);
    ASSERT_FALSE(rope(dx.as<float>(), sh.tokens, sh.heads, sh.head_dim, df.as<float>(),
                      dp.as<int32_t>()));
    auto out = download<float>(dx);
    for (int64_t t = 0; t < sh.tokens; ++t)
      for (int32_t h = 0; h < sh.heads; ++h)
        for (int32_t i = 0; i < half; ++i) {
          // The angle is the f32 product, as specified (and as transformers
          // computes it); only cos and sin are taken in double here.
          const double a = static_cast<float>(pos[t]) * inv_freq[i];
          const size_t base = (t * sh.heads + h) * sh.head_dim;
          const double x0 = x[base + i], x1 = x[base + i + half];
          const double r0 = x0 * std::cos(a) - x1 * std::sin(a);
          const double r1 = x1 * std::cos(a) + x0 * std::sin(a);
          const double tol = 1e-6 * (std::abs(x0) + std::abs(x1)) + 1e-7;
          ASSERT_NEAR(out[base + i], r0, tol) << "t " << t << " h " << h << " i " << i;
          ASSERT_NEAR(out[base + i + half], r1, tol) << "t " << t << " h " << h << " i " << i;
        }
  }
}

// ---- matmul ----------------------------------------------------------------

// Stores f32 values as type t (host side, with the engine's scalar
// conversions) and returns the values actually stored, widened back.
std::vector<unsigned char> encode(const std::vector<float>& v, dtype t, std::vector<float>& stored) {
  std::vector<unsigned char> bytes(v.size() * dtype_size(t));
  stored.resize(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    store_from_f32(bytes.data(), t, i, v[i]);
    stored[i] = load_as_f32(bytes.data(), t, i);
  }
  return bytes;
}

struct matmul_case {
  int64_t M, N, K, ldx_pad, ldy_pad;
  bool bias;
};

void PrintTo(const matmul_case& c, std::ostream* os) {
  *os << "M=" << c.M << " N=" << c.N << " K=" << c.K << " ldx+" << c.ldx_pad << " ldy+"
      << c.ldy_pad << (c.bias ? " bias" : "");
}

class CudaMatmulTest : public CudaKernelsTest,
                       public ::testing::WithParamInterface<std::tuple<dtype, matmul_case>> {};

TEST_P(CudaMatmulTest, MatchesDoubleReference) {
  const auto [wt, c] = GetParam();
  const int64_t ldx = c.K + c.ldx_pad, ldy = c.N + c.ldy_pad;
  auto x = random_floats(c.M * ldx, -1.0f, 1.0f);
  std::vector<float> w_stored;
  auto w_bytes = encode(random_floats(c.N * c.K, -1.0f, 1.0f), wt, w_stored);
  auto bias = random_floats(c.N, -0.5f, 0.5f);
  const float sentinel = 12345.0f; // padding of y must stay untouched
  std::vector<float> y_init(c.M * ldy, sentinel);

  auto dx = upload(x), dw = upload(w_bytes), db = upload(bias), dy = upload(y_init);
  ASSERT_FALSE(matmul(dx.as<float>(), c.M, c.K, ldx, dw.data(), wt, c.N,
                      c.bias ? db.as<float>() : nullptr, dy.as<float>(), ldy));
  auto y = download<float>(dy);

  for (int64_t m = 0; m < c.M; ++m) {
    for (int64_t n = 0; n < c.N; ++n) {
      double ref = c.bias ? bias[n] : 0.0, mag = std::abs(ref);
      for (int64_t k = 0; k < c.K; ++k) {
        const double p = double{x[m * ldx + k]} * w_stored[n * c.K + k];
        ref += p;
        mag += std::abs(p);
      }
      // f32 accumulation: each lane sums about K/32 products serially, then
      // a 32-way tree; bound the rounding error by that depth.
      const double tol = (static_cast<double>(c.K) / 32 + 16) * FLT_EPSILON * mag + 1e-6;
      ASSERT_NEAR(y[m * ldy + n], ref, tol) << "m " << m << " n " << n;
    }
    for (int64_t n = c.N; n < ldy; ++n)
      ASSERT_EQ(y[m * ldy + n], sentinel) << "padding m " << m << " n " << n;
  }
}

INSTANTIATE_TEST_SUITE_P(
  Shapes, CudaMatmulTest,
  ::testing::Combine(
    ::testing::Values(dtype::f32, dtype::f16, dtype::bf16),
    ::testing::Values(matmul_case{1, 1, 1, 0, 0, false},      // scalar
                      matmul_case{1, 7, 33, 0, 0, true},      // K % 32 != 0, N odd
                      matmul_case{7, 13, 100, 0, 0, true},    // vector path for f32 only
                      matmul_case{7, 31, 1001, 3, 2, false},  // strided, odd K
                      matmul_case{1, 257, 4096, 0, 0, true},  // decode-like, vector path
                      matmul_case{7, 64, 512, 4, 1, true},    // vector path with ldx % 4 == 0
                      matmul_case{9, 5, 64, 0, 0, false},     // M spans two row tiles
                      matmul_case{20, 9, 130, 0, 0, true},    // three row tiles, partial last
                      matmul_case{3, 4, 0, 0, 0, true})),     // K = 0: y = bias
  [](const auto& info) {
    const dtype t = std::get<0>(info.param);
    const matmul_case c = std::get<1>(info.param);
    return std::string{to_safetensors_name(t)} + "_M" + std::to_string(c.M) + "_N" +
           std::to_string(c.N) + "_K" + std::to_string(c.K) + "_ldx" +
           std::to_string(c.ldx_pad) + "_ldy" + std::to_string(c.ldy_pad) +
           (c.bias ? "_bias" : "");
  });

TEST_F(CudaKernelsTest, MatmulOnAnExplicitStreamMatchesSynchronous) {
  // The asynchronous mode on the legacy default stream (a non-null handle
  // is required for it; cudaStreamLegacy is 0x1), finished by the copy.
  const int64_t M = 2, N = 3, K = 40;
  auto x = random_floats(M * K, -1.0f, 1.0f), w = random_floats(N * K, -1.0f, 1.0f);
  auto dx = upload(x), dw = upload(w);
  auto y1 = device_buffer::allocate(M * N * sizeof(float)),
       y2 = device_buffer::allocate(M * N * sizeof(float));
  ASSERT_TRUE(y1 && y2);
  ASSERT_FALSE(matmul(dx.as<float>(), M, K, K, dw.data(), dtype::f32, N, nullptr,
                      y1->as<float>(), N));
  ASSERT_FALSE(matmul(dx.as<float>(), M, K, K, dw.data(), dtype::f32, N, nullptr,
                      y2->as<float>(), N, stream{reinterpret_cast<void*>(uintptr_t{1})}));
  EXPECT_EQ(download<float>(*y1), download<float>(*y2));
}

// ---- conversions -----------------------------------------------------------

std::vector<float> conversion_inputs(std::mt19937& rng) {
  std::vector<float> v = {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65520.0f, 65519.0f, 1e-8f,
                          5.9604645e-8f, 2.9802322e-8f, 2.9802326e-8f, 6.1035156e-5f,
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::denorm_min(),
                          std::numeric_limits<float>::max(),
                          std::bit_cast<float>(0x3f808000u),   // bf16 tie, even below
                          std::bit_cast<float>(0x3f818000u),   // bf16 tie, odd below
                          std::bit_cast<float>(0x3f801000u),   // f16 tie
                          std::bit_cast<float>(0x3f803000u)};  // f16 tie, odd below
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 20000; ++i)
    v.push_back(std::bit_cast<float>(bits(rng)));
  std::uniform_real_distribution<float> d(-70000.0f, 70000.0f);
  for (int i = 0; i < 20000; ++i)
    v.push_back(d(rng));
  return v;
}

TEST_F(CudaKernelsTest, FromF32MatchesHostRoundingBitwise) {
  const auto src = conversion_inputs(rng_);
  const int64_t n = static_cast<int64_t>(src.size());
  auto dsrc = upload(src);
  for (const dtype t : {dtype::bf16, dtype::f16, dtype::f32}) {
    SCOPED_TRACE(to_safetensors_name(t));
    auto ddst = device_buffer::allocate(n * dtype_size(t));
    ASSERT_TRUE(ddst);
    ASSERT_FALSE(from_f32(dsrc.as<float>(), n, t, ddst->data()));
    auto got = download<unsigned char>(*ddst);
    std::vector<unsigned char> want(n * dtype_size(t));
    for (int64_t i = 0; i < n; ++i)
      store_from_f32(want.data(), t, i, src[i]);
    for (int64_t i = 0; i < n; ++i) {
      const float g = load_as_f32(got.data(), t, i), e = load_as_f32(want.data(), t, i);
      if (std::isnan(src[i]) && t != dtype::bf16) {
        ASSERT_TRUE(std::isnan(g)) << "i " << i; // NaN payloads may differ
        continue;
      }
      ASSERT_EQ(std::memcmp(got.data() + i * dtype_size(t), want.data() + i * dtype_size(t),
                            dtype_size(t)),
                0)
        << "i " << i << " input bits " << std::hex << std::bit_cast<uint32_t>(src[i])
        << " got " << g << " want " << e;
    }
  }
}

TEST_F(CudaKernelsTest, ToF32IsExactForEvery16BitPattern) {
  std::vector<uint16_t> all(65536);
  for (uint32_t i = 0; i < all.size(); ++i)
    all[i] = static_cast<uint16_t>(i);
  auto dsrc = upload(all);
  auto ddst = device_buffer::allocate(all.size() * sizeof(float));
  ASSERT_TRUE(ddst);
  for (const dtype t : {dtype::bf16, dtype::f16}) {
    SCOPED_TRACE(to_safetensors_name(t));
    ASSERT_FALSE(to_f32(dsrc.data(), t, static_cast<int64_t>(all.size()), ddst->as<float>()));
    auto got = download<float>(*ddst);
    for (size_t i = 0; i < all.size(); ++i) {
      const float want = load_as_f32(all.data(), t, i);
      if (std::isnan(want))
        ASSERT_TRUE(std::isnan(got[i])) << "bits " << i;
      else
        ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want)) << "bits " << i;
    }
  }
}

TEST_F(CudaKernelsTest, ToF32CopiesF32) {
  auto src = random_floats(1001, -5.0f, 5.0f);
  auto dsrc = upload(src);
  auto ddst = device_buffer::allocate(src.size() * sizeof(float));
  ASSERT_TRUE(ddst);
  ASSERT_FALSE(to_f32(dsrc.data(), dtype::f32, static_cast<int64_t>(src.size()), ddst->as<float>()));
  EXPECT_EQ(download<float>(*ddst), src);
}

} // namespace
} // namespace tessera::engine::cuda
