#include "kvstore/block_quant.hpp"

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>

#include <gtest/gtest.h>

#include "tests/kvstore/kv_test_blocks.hpp"

namespace tessera::kvstore {
namespace {

// A block shaped like the `small` model's (16 tokens, 12 layers, 4 KV
// heads, head_dim 64) holding normal values whose spread differs per head
// (as K and V magnitudes do), with a few outliers.
stored_block realistic_block(engine::dtype t, uint64_t seed) {
  engine::kv_layout l{16, 12, 4, 64, t};
  std::vector<std::byte> bytes(l.block_bytes());
  std::mt19937_64 rng{seed};
  std::normal_distribution<float> normal{0.0f, 1.0f};
  const size_t slab = static_cast<size_t>(l.block_tokens) * l.head_dim;
  const size_t n = bytes.size() / engine::dtype_size(t);
  for (size_t i = 0; i < n; ++i) {
    float spread = 0.05f * static_cast<float>(1 + (i / slab) % 7);
    float x = normal(rng) * spread;
    if (rng() % 997 == 0)
      x *= 8; // outliers widen the scale of their slab
    engine::store_from_f32(bytes.data(), t, i, x);
  }
  return make_block(l, l.block_tokens, std::move(bytes));
}

TEST(BlockQuantTest, ErrorStaysWithinHalfAStepPerSlab) {
  auto b = realistic_block(engine::dtype::f32, 1);
  auto q = quantize_int8(b);
  ASSERT_TRUE(q);
  auto back = dequantize_int8(*q);
  const auto& l = b.meta.layout;
  const size_t slab = static_cast<size_t>(l.block_tokens) * l.head_dim;
  ASSERT_EQ(q->scales.size(), static_cast<size_t>(l.num_layers) * 2 * l.num_kv_heads);
  for (size_t i = 0; i < q->values.size(); ++i) {
    float x = engine::load_as_f32(b.payload->data(), l.kv_dtype, i);
    float y = engine::load_as_f32(back.data(), l.kv_dtype, i);
    ASSERT_LE(std::fabs(x - y), q->scales[i / slab] * 0.5f * 1.0001f) << "element " << i;
  }
}

TEST(BlockQuantTest, ReportsSpaceSavedAndErrorForBf16AndF32) {
  for (auto t : {engine::dtype::bf16, engine::dtype::f32}) {
    auto r = measure_int8(realistic_block(t, 2));
    ASSERT_TRUE(r);
    const double expected_saved = 1.0 - (1.0 + 4.0 / (16 * 64)) / engine::dtype_size(t);
    EXPECT_NEAR(r->saved_fraction, expected_saved, 1e-9);
    // Normal data: the slab's step is max|x| / 127 with max|x| ~ 4-8 sigma,
    // so the RMS error is about step / sqrt(12) ~ 1-2% of sigma.
    EXPECT_LT(r->rms_relative_error, 0.03);
    std::printf("int8 per-head quantization of a %s block (16 x 12 x 4 x 64): saves %.1f%%, "
                "rms relative error %.2f%%, max abs error %.4f\n",
                std::string{engine::to_safetensors_name(t)}.c_str(), 100 * r->saved_fraction,
                100 * r->rms_relative_error, r->max_abs_error);
  }
}

TEST(BlockQuantTest, ZeroBlockRoundTripsExactly) {
  engine::kv_layout l{4, 1, 1, 8, engine::dtype::bf16};
  auto b = make_block(l, 4, std::vector<std::byte>(l.block_bytes()));
  auto q = quantize_int8(b);
  ASSERT_TRUE(q);
  EXPECT_EQ(dequantize_int8(*q), *b.payload);
  EXPECT_EQ(measure_int8(b)->max_abs_error, 0.0);
}

TEST(BlockQuantTest, RefusesNonFiniteValuesAndWrongSizes) {
  engine::kv_layout l{4, 1, 1, 8, engine::dtype::f32};
  std::vector<std::byte> bytes(l.block_bytes());
  engine::store_from_f32(bytes.data(), l.kv_dtype, 3, std::numeric_limits<float>::infinity());
  EXPECT_FALSE(quantize_int8(make_block(l, 4, bytes)));
  engine::store_from_f32(bytes.data(), l.kv_dtype, 3, std::nanf(""));
  EXPECT_FALSE(quantize_int8(make_block(l, 4, bytes)));
  EXPECT_FALSE(quantize_int8(make_block(l, 4, std::vector<std::byte>(7))));
}

} // namespace
} // namespace tessera::kvstore
