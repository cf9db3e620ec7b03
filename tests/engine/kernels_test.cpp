// Kernels against double-precision / scalar references, and bitwise batch
// invariance, for every kernel set this CPU can run.
#include "engine/cpu/kernels.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "engine/cpu/thread_pool.hpp"
#include "engine/dtype.hpp"

namespace tessera::engine::cpu {
namespace {

// The kernel sets this CPU supports, best first.
std::vector<std::string> available_isas() {
  const std::string original{kernel_isa()};
  std::vector<std::string> isas;
  for (const char* isa : {"avx512", "avx2", "generic"})
    if (set_kernel_isa(isa))
      isas.emplace_back(isa);
  EXPECT_TRUE(set_kernel_isa(original));
  return isas;
}

// Forces a kernel set for one scope and restores the previous one.
class isa_scope {
public:
  explicit isa_scope(const std::string& isa) : saved_(kernel_isa()) {
    EXPECT_TRUE(set_kernel_isa(isa)) << isa;
  }
  ~isa_scope() { set_kernel_isa(saved_); }
  isa_scope(const isa_scope&) = delete;
  isa_scope& operator=(const isa_scope&) = delete;

private:
  std::string saved_;
};

constexpr dtype all_dtypes[] = {dtype::f32, dtype::f16, dtype::bf16};

std::vector<float> random_floats(std::mt19937& rng, size_t n, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> d{lo, hi};
  std::vector<float> v(n);
  for (auto& x : v)
    x = d(rng);
  return v;
}

// A tensor of type t holding `values` rounded to t; `exact` gets the stored
// values back as f32 (what the kernel must multiply by).
struct typed_tensor {
  std::vector<uint8_t> bytes;
  std::vector<float> exact;
  const void* data() const { return bytes.data(); }
};

typed_tensor make_tensor(const std::vector<float>& values, dtype t) {
  typed_tensor out;
  out.bytes.resize(values.size() * dtype_size(t));
  out.exact.resize(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    store_from_f32(out.bytes.data(), t, i, values[i]);
    out.exact[i] = load_as_f32(out.bytes.data(), t, i);
  }
  return out;
}

uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }

std::string describe(const std::string& isa, dtype t, int64_t M, int64_t K, int64_t N) {
  return isa + " " + std::string{to_safetensors_name(t)} + " M=" + std::to_string(M) +
         " K=" + std::to_string(K) + " N=" + std::to_string(N);
}

TEST(KernelsTest, PicksAKernelSetAndRejectsUnknownOnes) {
  const std::string original{kernel_isa()};
  EXPECT_TRUE(original == "avx512" || original == "avx2" || original == "generic") << original;
  EXPECT_FALSE(set_kernel_isa("sse9"));
  EXPECT_EQ(kernel_isa(), original);
  EXPECT_TRUE(set_kernel_isa("generic"));
  EXPECT_EQ(kernel_isa(), "generic");
  EXPECT_TRUE(set_kernel_isa(original));
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl")) {
    EXPECT_EQ(original, "avx512");
  }
}

TEST(KernelsTest, MatmulMatchesDoubleReferenceForAllTypesAndShapes) {
  std::mt19937 rng{1};
  thread_pool pool{2};
  for (const auto& isa : available_isas()) {
    isa_scope scope{isa};
    for (int64_t K : {1, 7, 8, 15, 16, 17, 31, 33, 100, 768, 2048}) {
      for (int64_t N : {1, 3, 13, 17, 40}) {
        for (int64_t M : {1, 2, 3, 5, 9}) {
          const int64_t ldx = K + 3, ldy = N + 2; // strides wider than the rows
          const auto x = random_floats(rng, static_cast<size_t>(M * ldx));
          const auto bias = random_floats(rng, static_cast<size_t>(N));
          const auto w_values = random_floats(rng, static_cast<size_t>(N * K));
          for (dtype t : all_dtypes) {
            const auto w = make_tensor(w_values, t);
            for (bool with_bias : {false, true}) {
              std::vector<float> y(static_cast<size_t>(M * ldy), -7.0f);
              matmul(pool, x.data(), M, K, ldx, w.data(), t, N, with_bias ? bias.data() : nullptr,
                     y.data(), ldy);
              for (int64_t m = 0; m < M; ++m) {
                for (int64_t n = 0; n < N; ++n) {
                  double ref = with_bias ? bias[n] : 0.0, mag = with_bias ? std::fabs(bias[n]) : 0.0;
                  for (int64_t k = 0; k < K; ++k) {
                    const double p = double{x[m * ldx + k]} * w.exact[n * K + k];
                    ref += p;
                    mag += std::fabs(p);
                  }
                  ASSERT_NEAR(y[m * ldy + n], ref, 1e-5 * mag + 1e-6)
                      << describe(isa, t, M, K, N) << " m=" << m << " n=" << n
                      << " bias=" << with_bias;
                }
                for (int64_t n = N; n < ldy; ++n) // padding between rows untouched
                  ASSERT_EQ(y[m * ldy + n], -7.0f) << describe(isa, t, M, K, N);
              }
            }
          }
        }
      }
    }
  }
}

TEST(KernelsTest, MatmulKeepsFullPrecisionActivations) {
  // x = 1 + 2^-20 is not representable in bf16; a kernel that rounds
  // activations to bf16 returns exactly K here instead of K * x.
  thread_pool pool{1};
  const int64_t K = 64;
  const std::vector<float> x(K, 1.0f + 0x1p-20f);
  const auto w = make_tensor(std::vector<float>(K, 1.0f), dtype::bf16);
  for (const auto& isa : available_isas()) {
    isa_scope scope{isa};
    float y = 0.0f;
    matmul(pool, x.data(), 1, K, K, w.data(), dtype::bf16, 1, nullptr, &y, 1);
    EXPECT_NEAR(y, K * (1.0 + 0x1p-20), 1e-6) << isa;
  }
}

// Computes every row of x alone (M = 1, one thread) as the reference bits,
// then checks that batched, strided, offset, multi-threaded, column-ranged
// and dot() computations of each element reproduce them exactly.
void check_batch_invariance(const std::string& isa, dtype t, int64_t K, int64_t N,
                            const std::vector<int64_t>& batch_sizes) {
  std::mt19937 rng{static_cast<uint32_t>(K * 131 + N)};
  const int64_t max_m = batch_sizes.back();
  const int64_t offset = 3; // batches start at row `offset`, so rows move
  const int64_t rows = max_m + offset;
  const auto x = random_floats(rng, static_cast<size_t>(rows * K));
  const auto bias = random_floats(rng, static_cast<size_t>(N));
  const auto w = make_tensor(random_floats(rng, static_cast<size_t>(N * K)), t);

  thread_pool single{1};
  std::vector<float> alone(static_cast<size_t>(rows * N));
  for (int64_t m = 0; m < rows; ++m)
    matmul(single, x.data() + m * K, 1, K, K, w.data(), t, N, bias.data(), alone.data() + m * N, N);

  // dot() is one element without bias: the same sum, bias added last.
  for (int64_t m = 0; m < rows; m += 5)
    for (int64_t n = 0; n < N; ++n) {
      const float d = dot(x.data() + m * K, static_cast<const uint8_t*>(w.data()) +
                                               n * K * static_cast<int64_t>(dtype_size(t)),
                          t, K);
      ASSERT_EQ(bits(d + bias[n]), bits(alone[m * N + n]))
          << "dot " << describe(isa, t, 1, K, N) << " m=" << m << " n=" << n;
    }

  for (int threads : {1, 2, 3}) {
    thread_pool pool{threads};
    for (int64_t M : batch_sizes) {
      for (int64_t start : {int64_t{0}, offset}) {
        std::vector<float> y(static_cast<size_t>(M * N));
        matmul(pool, x.data() + start * K, M, K, K, w.data(), t, N, bias.data(), y.data(), N);
        for (int64_t m = 0; m < M; ++m)
          for (int64_t n = 0; n < N; ++n)
            ASSERT_EQ(bits(y[m * N + n]), bits(alone[(start + m) * N + n]))
                << describe(isa, t, M, K, N) << " threads=" << threads << " start=" << start
                << " m=" << m << " n=" << n;
      }
    }
  }

  // matmul_range over uneven column pieces (edge tiles at odd places).
  const int64_t M = batch_sizes[batch_sizes.size() / 2];
  std::vector<float> y(static_cast<size_t>(M * N));
  for (int64_t n0 = 0, step = 1; n0 < N; n0 += step, step = step * 2 + 1)
    matmul_range(x.data(), M, K, K, w.data(), t, n0, std::min(N, n0 + step), bias.data(), y.data(),
                 N);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n)
      ASSERT_EQ(bits(y[m * N + n]), bits(alone[m * N + n]))
          << "matmul_range " << describe(isa, t, M, K, N) << " m=" << m << " n=" << n;
}

TEST(KernelsTest, MatmulIsBitwiseBatchInvariant) {
  // 5 and 6 rows take one row group of their own on AVX-512 (while x fits
  // L1: K = 2048 takes it at 5 rows, not at 6), 7 the 4-row group and a
  // 3-row one.
  const std::vector<int64_t> batch_sizes{1, 2, 3, 5, 6, 7, 16, 33, 512};
  for (const auto& isa : available_isas()) {
    isa_scope scope{isa};
    for (dtype t : all_dtypes) {
      for (int64_t K : {1, 17, 100, 768})
        check_batch_invariance(isa, t, K, 37, batch_sizes);
      if (isa != "generic") { // the portable kernels are slow; one wide N is enough there
        check_batch_invariance(isa, t, 768, 256, {1, 3, 5, 6, 16, 33});
        check_batch_invariance(isa, t, 2048, 37, {1, 5, 6});
      }
    }
  }
}

TEST(KernelsTest, MatmulMultiEqualsSeparateMatmuls) {
  std::mt19937 rng{11};
  const int64_t K = 100, M = 5;
  const auto x = random_floats(rng, static_cast<size_t>(M * K));
  const int64_t ns[] = {37, 256, 9};
  std::vector<typed_tensor> ws;
  std::vector<std::vector<float>> biases, alone, multi;
  for (int64_t n : ns) {
    ws.push_back(make_tensor(random_floats(rng, static_cast<size_t>(n * K)), dtype::bf16));
    biases.push_back(random_floats(rng, static_cast<size_t>(n)));
    alone.emplace_back(static_cast<size_t>(M * n));
    multi.emplace_back(static_cast<size_t>(M * n));
  }
  for (int threads : {1, 2, 3}) {
    thread_pool pool{threads};
    std::vector<matmul_output> outs;
    for (size_t i = 0; i < 3; ++i) {
      matmul(pool, x.data(), M, K, K, ws[i].data(), dtype::bf16, ns[i], biases[i].data(),
             alone[i].data(), ns[i]);
      outs.push_back({ws[i].data(), dtype::bf16, ns[i], i == 1 ? nullptr : biases[i].data(),
                      multi[i].data(), ns[i]});
    }
    // Output 1 without bias here: compare it against its own single matmul.
    matmul(pool, x.data(), M, K, K, ws[1].data(), dtype::bf16, ns[1], nullptr, alone[1].data(), ns[1]);
    matmul_multi(pool, x.data(), M, K, K, outs);
    for (size_t i = 0; i < 3; ++i)
      for (size_t j = 0; j < alone[i].size(); ++j)
        ASSERT_EQ(bits(multi[i][j]), bits(alone[i][j])) << "output " << i << " element " << j
                                                        << " threads " << threads;
  }
}

// matmul splits wide outputs into chunks that shrink as the work runs out
// (many boundaries, several per output of a matmul_multi, a short last tile):
// every column is computed exactly once, bit for bit as by one thread.
TEST(KernelsTest, WideMatmulsSplitOverThreadsEqualOneThread) {
  std::mt19937 rng{23};
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const auto& isa : available_isas()) {
    isa_scope scope{isa};
    for (int64_t K : {int64_t{200}, int64_t{768}}) {
      const int64_t ns[] = {4005, 3, 1001};
      std::vector<typed_tensor> ws;
      for (int64_t n : ns)
        ws.push_back(make_tensor(random_floats(rng, static_cast<size_t>(n * K)), dtype::bf16));
      const std::vector<int64_t> batches =
          isa == "generic" ? std::vector<int64_t>{1} : std::vector<int64_t>{1, 2, 16};
      for (int64_t M : batches) {
        const auto x = random_floats(rng, static_cast<size_t>(M * K));
        std::vector<std::vector<float>> want;
        for (size_t i = 0; i < 3; ++i) {
          want.emplace_back(static_cast<size_t>(M * ns[i]));
          matmul_range(x.data(), M, K, K, ws[i].data(), dtype::bf16, 0, ns[i], nullptr,
                       want[i].data(), ns[i]);
        }
        for (int threads : {2, 3}) {
          thread_pool pool{threads};
          std::vector<float> one(static_cast<size_t>(M * ns[0]), nan);
          matmul(pool, x.data(), M, K, K, ws[0].data(), dtype::bf16, ns[0], nullptr, one.data(), ns[0]);
          for (size_t j = 0; j < one.size(); ++j)
            ASSERT_EQ(bits(one[j]), bits(want[0][j]))
                << "matmul " << describe(isa, dtype::bf16, M, K, ns[0]) << " threads=" << threads
                << " element " << j;
          std::vector<std::vector<float>> multi;
          std::vector<matmul_output> outs;
          for (size_t i = 0; i < 3; ++i)
            multi.emplace_back(static_cast<size_t>(M * ns[i]), nan);
          for (size_t i = 0; i < 3; ++i)
            outs.push_back({ws[i].data(), dtype::bf16, ns[i], nullptr, multi[i].data(), ns[i]});
          matmul_multi(pool, x.data(), M, K, K, outs);
          for (size_t i = 0; i < 3; ++i)
            for (size_t j = 0; j < multi[i].size(); ++j)
              ASSERT_EQ(bits(multi[i][j]), bits(want[i][j]))
                  << "matmul_multi output " << i << " " << describe(isa, dtype::bf16, M, K, ns[i])
                  << " threads=" << threads << " element " << j;
        }
      }
    }
  }
}

TEST(KernelsTest, DotMatchesDoubleReference) {
  std::mt19937 rng{2};
  for (const auto& isa : available_isas()) {
    isa_scope scope{isa};
    for (int64_t n : {0, 1, 5, 16, 23, 1000}) {
      const auto a = random_floats(rng, static_cast<size_t>(n));
      for (dtype t : all_dtypes) {
        const auto b = make_tensor(random_floats(rng, static_cast<size_t>(n)), t);
        double ref = 0.0, mag = 0.0;
        for (int64_t i = 0; i < n; ++i) {
          ref += double{a[i]} * b.exact[i];
          mag += std::fabs(double{a[i]} * b.exact[i]);
        }
        EXPECT_NEAR(dot(a.data(), b.data(), t, n), ref, 1e-5 * mag + 1e-6) << isa << " n=" << n;
      }
    }
  }
}

TEST(KernelsTest, RmsnormMatchesDoubleReference) {
  std::mt19937 rng{3};
  for (const auto& isa : available_isas()) {
    isa_scope scope{isa};
    for (int64_t n : {1, 7, 16, 17, 100, 768, 1001}) {
      const auto x = random_floats(rng, static_cast<size_t>(n), -3.0f, 3.0f);
      const auto w = random_floats(rng, static_cast<size_t>(n), 0.5f, 1.5f);
      std::vector<float> out(static_cast<size_t>(n));
      rmsnorm(x.data(), w.data(), 1e-5f, n, out.data());
      double ss = 0.0;
      for (float v : x)
        ss += double{v} * v;
      const double inv = 1.0 / std::sqrt(ss / static_cast<double>(n) + 1e-5);
      for (int64_t i = 0; i < n; ++i) {
        const double ref = x[i] * inv * w[i];
        ASSERT_NEAR(out[i], ref, 2e-6 * std::fabs(ref) + 1e-7) << isa << " n=" << n << " i=" << i;
      }
    }
  }
}

TEST(KernelsTest, SiluMulMatchesDoubleReferenceAndIgnoresPosition) {
  std::mt19937 rng{4};
  for (const auto& isa : available_isas()) {
    isa_scope scope{isa};
    for (int64_t n : {1, 7, 16, 17, 100, 1001}) {
      auto gate = random_floats(rng, static_cast<size_t>(n), -20.0f, 20.0f);
      gate[0] = n > 1 ? -100.0f : 0.0f;
      gate[static_cast<size_t>(n) / 2] = 100.0f;
      const auto up = random_floats(rng, static_cast<size_t>(n), -2.0f, 2.0f);
      std::vector<float> out(static_cast<size_t>(n));
      silu_mul(gate.data(), up.data(), n, out.data());
      for (int64_t i = 0; i < n; ++i) {
        const double g = gate[i];
        const double ref = g / (1.0 + std::exp(-g)) * up[i];
        ASSERT_NEAR(out[i], ref, 4e-6 * std::fabs(ref) + 1e-30) << isa << " g=" << g;
      }
      // The same element computed from another start and length: same bits.
      if (n > 3) {
        std::vector<float> tail(static_cast<size_t>(n - 3));
        silu_mul(gate.data() + 3, up.data() + 3, n - 3, tail.data());
        for (int64_t i = 3; i < n; ++i)
          ASSERT_EQ(bits(tail[i - 3]), bits(out[i])) << isa << " i=" << i;
      }
    }
  }
}

TEST(KernelsTest, AxpyMatchesReferenceForAllTypes) {
  std::mt19937 rng{5};
  for (const auto& isa : available_isas()) {
    isa_scope scope{isa};
    for (int64_t n : {1, 7, 16, 17, 100, 1001}) {
      for (dtype t : all_dtypes) {
        const auto x = make_tensor(random_floats(rng, static_cast<size_t>(n)), t);
        const auto y0 = random_floats(rng, static_cast<size_t>(n));
        auto y = y0;
        axpy(0.37f, x.data(), t, n, y.data());
        for (int64_t i = 0; i < n; ++i) {
          const double ref = y0[i] + double{0.37f} * x.exact[i];
          ASSERT_NEAR(y[i], ref, 2e-7 * (std::fabs(y0[i]) + std::fabs(0.37 * x.exact[i])))
              << isa << " " << to_safetensors_name(t) << " n=" << n << " i=" << i;
        }
      }
    }
  }
}

TEST(KernelsTest, ToF32IsExactForEveryHalfAndBfloatValue) {
  std::vector<uint16_t> all(65536);
  for (size_t i = 0; i < all.size(); ++i)
    all[i] = static_cast<uint16_t>(i);
  for (const auto& isa : available_isas()) {
    isa_scope scope{isa};
    for (dtype t : {dtype::f16, dtype::bf16}) {
      // An odd count and offset exercise the partial last vector.
      for (int64_t skip : {0, 5}) {
        const int64_t n = static_cast<int64_t>(all.size()) - skip;
        std::vector<float> out(static_cast<size_t>(n));
        to_f32(all.data() + skip, t, n, out.data());
        for (int64_t i = 0; i < n; ++i) {
          const float ref = load_as_f32(all.data() + skip, t, static_cast<size_t>(i));
          if (std::isnan(ref)) // F16C quiets signalling NaNs; NaN-ness is what counts
            ASSERT_TRUE(std::isnan(out[i])) << isa << " i=" << i;
          else
            ASSERT_EQ(bits(out[i]), bits(ref)) << isa << " " << to_safetensors_name(t) << " i=" << i;
        }
      }
    }
    std::mt19937 rng{6};
    const auto f = random_floats(rng, 37);
    std::vector<float> copy(f.size());
    to_f32(f.data(), dtype::f32, static_cast<int64_t>(f.size()), copy.data());
    EXPECT_EQ(copy, f) << isa;
  }
}

// Random bit patterns over every exponent, plus the cases rounding gets
// wrong: ties, values just below a carry into the exponent, overflow to inf,
// subnormals of both formats, signed zeros, infinities and NaN payloads.
std::vector<float> conversion_inputs() {
  std::vector<uint32_t> u = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u,
                             0xffc00000u, 0x7f800001u, 0xff812345u, 0x7fbfffffu, 0x00000001u,
                             0x807fffffu, 0x00400000u, 0x3f808000u, 0x3f818000u, 0x3f80ffffu,
                             0x3f7fffffu, 0x477fe000u, 0x477ff000u, 0x477fefffu, 0x47800000u,
                             0x7f7fffffu, 0xff7fffffu, 0x38800000u, 0x387fe000u, 0x33000000u,
                             0x33000001u, 0x33800000u, 0x337fffffu, 0xb3c00000u, 0x3f801000u,
                             0x3f803000u, 0x3f802000u, 0x3f800fffu, 0x00800000u, 0x007fffffu};
  std::mt19937 rng{7};
  for (int i = 0; i < 200000; ++i)
    u.push_back(rng());
  for (int e = 0; e < 256; ++e) // every exponent, mantissas near rounding points
    for (uint32_t mant : {0x0u, 0x1000u, 0x8000u, 0x7fffu, 0x18000u, 0x7fffffu, 0xfffu, 0x2fffu})
      u.push_back(static_cast<uint32_t>(e) << 23 | mant);
  std::vector<float> f;
  for (uint32_t b : u)
    f.push_back(std::bit_cast<float>(b));
  return f;
}

TEST(KernelsTest, FromF32MatchesScalarConversionBitForBit) {
  const auto in = conversion_inputs();
  for (const auto& isa : available_isas()) {
    isa_scope scope{isa};
    for (int64_t skip : {0, 3}) {
      const int64_t n = static_cast<int64_t>(in.size()) - skip;
      std::vector<uint16_t> bf(static_cast<size_t>(n) + 1, 0xabcd), h(static_cast<size_t>(n) + 1, 0xabcd);
      from_f32(in.data() + skip, n, dtype::bf16, bf.data());
      from_f32(in.data() + skip, n, dtype::f16, h.data());
      for (int64_t i = 0; i < n; ++i) {
        const float v = in[skip + i];
        ASSERT_EQ(bf[i], f32_to_bf16(v)) << isa << " bf16 of 0x" << std::hex << bits(v);
        ASSERT_EQ(h[i], f32_to_f16(v)) << isa << " f16 of 0x" << std::hex << bits(v);
      }
      EXPECT_EQ(bf[n], 0xabcd) << isa << ": wrote past the end";
      EXPECT_EQ(h[n], 0xabcd) << isa << ": wrote past the end";
    }
    std::vector<float> copy(in.size());
    from_f32(in.data(), static_cast<int64_t>(in.size()), dtype::f32, copy.data());
    EXPECT_EQ(std::memcmp(copy.data(), in.data(), in.size() * sizeof(float)), 0) << isa;
  }
}

} // namespace
} // namespace tessera::engine::cpu
