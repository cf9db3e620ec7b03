// Paged attention against dense attention: the CPU backend's attend() over
// KV blocks scattered through a pool equals a dense double-precision
// computation within tolerance, and equals itself bitwise whichever blocks
// hold the positions.
#include "engine/cpu/attention.hpp"

#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "engine/cpu/kernels.hpp"

namespace {

using namespace tessera::engine;
using namespace tessera::engine::cpu;

struct attention_case {
  int32_t block_tokens;
  int32_t n_heads, n_kv_heads, head_dim;
  dtype kv;
};

class AttentionTest : public testing::TestWithParam<attention_case> {};

struct world {
  kv_layout layout;
  std::vector<std::byte> pool;
  attention_shape shape;
  std::vector<std::vector<float>> k, v; // [pos][kv_heads * head_dim], as stored

  world(const attention_case& c, int32_t n_blocks) {
    layout.block_tokens = c.block_tokens;
    layout.num_layers = 2;
    layout.num_kv_heads = c.n_kv_heads;
    layout.head_dim = c.head_dim;
    layout.kv_dtype = c.kv;
    pool.assign(layout.block_bytes() * n_blocks, std::byte{0});
    shape.layout = &layout;
    shape.pool = pool.data();
    shape.layer = 1;
    shape.n_heads = c.n_heads;
    shape.n_kv_heads = c.n_kv_heads;
  }

  // Writes positions [0, n) through `table`, remembering what was stored
  // (after rounding to the KV dtype) for the dense reference.
  void fill(std::span<const kv_block_id> table, int32_t n, uint64_t seed) {
    std::mt19937_64 rng{seed};
    std::normal_distribution<float> nd{0.0f, 1.0f};
    const size_t width = static_cast<size_t>(layout.num_kv_heads) * layout.head_dim;
    k.assign(n, std::vector<float>(width));
    v.assign(n, std::vector<float>(width));
    for (int32_t p = 0; p < n; ++p) {
      for (size_t i = 0; i < width; ++i) {
        k[p][i] = nd(rng);
        v[p][i] = nd(rng);
      }
      kv_store(shape, table, p, k[p].data(), v[p].data());
      for (size_t i = 0; i < width; ++i) {
        if (layout.kv_dtype == dtype::bf16) {
          k[p][i] = bf16_to_f32(f32_to_bf16(k[p][i]));
          v[p][i] = bf16_to_f32(f32_to_bf16(v[p][i]));
        }
      }
    }
  }
};

std::vector<float> random_q(int32_t n, uint64_t seed) {
  std::mt19937_64 rng{seed};
  std::normal_distribution<float> nd{0.0f, 0.3f};
  std::vector<float> q(n);
  for (auto& x : q)
    x = nd(rng);
  return q;
}

TEST_P(AttentionTest, PagedEqualsDenseReference) {
  const auto& c = GetParam();
  const int32_t n_ctx = 3 * c.block_tokens + 5;
  const int32_t n_blocks_used = (n_ctx + c.block_tokens - 1) / c.block_tokens;
  world w{c, 16};
  // Scattered, out-of-order blocks.
  std::vector<kv_block_id> table{11, 3, 14, 6, 9};
  table.resize(n_blocks_used);
  w.fill(table, n_ctx, 1);
  const int32_t group = c.n_heads / c.n_kv_heads;
  std::vector<float> scratch(attention_scratch_floats(w.shape, n_ctx));
  for (int32_t pos : {0, c.block_tokens - 1, c.block_tokens, n_ctx - 1}) {
    for (int32_t g = 0; g < c.n_kv_heads; ++g) {
      auto q = random_q(group * c.head_dim, 100 + pos * 7 + g);
      std::vector<float> out(q.size());
      attend(w.shape, table, g, pos, q.data(), out.data(), scratch.data());
      for (int32_t h = 0; h < group; ++h) {
        // Dense reference in double.
        std::vector<double> s(pos + 1);
        double m = -1e300;
        for (int32_t j = 0; j <= pos; ++j) {
          double d = 0;
          for (int32_t i = 0; i < c.head_dim; ++i)
            d += static_cast<double>(q[h * c.head_dim + i]) * w.k[j][g * c.head_dim + i];
          s[j] = d;
          m = std::max(m, d);
        }
        double sum = 0;
        for (auto& x : s)
          sum += (x = std::exp(x - m));
        for (int32_t i = 0; i < c.head_dim; ++i) {
          double ref = 0;
          for (int32_t j = 0; j <= pos; ++j)
            ref += s[j] / sum * w.v[j][g * c.head_dim + i];
          EXPECT_NEAR(out[h * c.head_dim + i], ref, 2e-5)
            << "pos " << pos << " kv head " << g << " head " << h << " dim " << i;
        }
      }
    }
  }
}

TEST_P(AttentionTest, SameResultWhicheverBlocksHoldThePositions) {
  const auto& c = GetParam();
  const int32_t n_ctx = 2 * c.block_tokens + 3;
  world a{c, 8}, b{c, 8};
  std::vector<kv_block_id> ta{0, 1, 2}, tb{7, 2, 5};
  a.fill(ta, n_ctx, 5);
  b.fill(tb, n_ctx, 5);
  const int32_t group = c.n_heads / c.n_kv_heads;
  std::vector<float> scratch(attention_scratch_floats(a.shape, n_ctx));
  auto q = random_q(group * c.head_dim, 9);
  std::vector<float> oa(q.size()), ob(q.size());
  attend(a.shape, ta, 0, n_ctx - 1, q.data(), oa.data(), scratch.data());
  // Garbage in the other blocks' unused slots must not matter.
  std::fill(scratch.begin(), scratch.end(), 1e30f);
  attend(b.shape, tb, 0, n_ctx - 1, q.data(), ob.data(), scratch.data());
  EXPECT_EQ(oa, ob);
}

INSTANTIATE_TEST_SUITE_P(
  Layouts, AttentionTest,
  testing::Values(attention_case{16, 4, 2, 16, dtype::f32},
                  attention_case{16, 6, 2, 32, dtype::f32},
                  attention_case{32, 4, 4, 64, dtype::f32},
                  attention_case{8, 4, 1, 16, dtype::f32},   // portable path
                  attention_case{16, 4, 2, 16, dtype::bf16},
                  attention_case{16, 2, 2, 24, dtype::bf16})); // head_dim % 16 != 0

TEST(AttentionIsaTest, PortableAndVectorPathsAgree) {
  if (!set_kernel_isa("avx512"))
    GTEST_SKIP() << "no AVX-512 on this CPU";
  attention_case c{16, 4, 2, 32, dtype::bf16};
  const int32_t n_ctx = 40;
  world w{c, 4};
  std::vector<kv_block_id> table{2, 0, 3};
  w.fill(table, n_ctx, 3);
  std::vector<float> scratch(attention_scratch_floats(w.shape, n_ctx));
  auto q = random_q(2 * 32, 4);
  std::vector<float> vec(q.size()), port(q.size());
  attend(w.shape, table, 1, n_ctx - 1, q.data(), vec.data(), scratch.data());
  ASSERT_TRUE(set_kernel_isa("generic"));
  attend(w.shape, table, 1, n_ctx - 1, q.data(), port.data(), scratch.data());
  set_kernel_isa("avx512");
  for (size_t i = 0; i < vec.size(); ++i)
    EXPECT_NEAR(vec[i], port[i], 1e-5) << i;
}

} // namespace
