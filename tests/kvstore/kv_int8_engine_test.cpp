// An engine continuing from KV blocks that went through an int8 kv store
// (bench/kv_int8_bench.hpp's measurement, on a small random-weight model).
// How close its logits come to the exact run's depends on the weights, so
// the numbers are the benchmark's (bench/README.md); this test asserts what
// holds for any weights: the harness compares like with like (the exact
// control differs in nothing), the int8 run yields finite logits over the
// same rows, the store held the quantized size, and the KV read back is
// within the quantizer's bound.
#include "bench/kv_int8_bench.hpp"

#include <cmath>

#include <gtest/gtest.h>

#include "common/error.hpp"
#include "engine/cpu/cpu_backend.hpp"
#include "tests/support/test_model.hpp"

namespace tessera::bench {
namespace {

// 2 full blocks through the store plus a partial one recomputed, a turn and
// a few greedy tokens.
kv_int8_run_options small_run(kvstore::block_codec codec) {
  kv_int8_run_options o;
  o.prompt_tokens = 40;
  o.turn_tokens = 8;
  o.generate_tokens = 8;
  o.seed = 3;
  o.codec = codec;
  return o;
}

std::unique_ptr<engine::backend> micro_backend(engine::dtype kv_dtype) {
  engine::cpu::cpu_backend_options o;
  o.threads = 2;
  o.kv_dtype = kv_dtype;
  o.num_blocks = 3 * 4 + 1;
  auto be = engine::cpu::make_cpu_backend(test::test_model_weights("micro"), o);
  EXPECT_TRUE(be) << error_text(be.error());
  return be ? std::move(*be) : nullptr;
}

TEST(KvInt8EngineTest, ExactBlocksThroughTheStoreChangeNoLogit) {
  auto be = micro_backend(engine::dtype::bf16);
  ASSERT_TRUE(be);
  auto m = measure_kv_int8(*be, small_run(kvstore::block_codec::exact));
  ASSERT_TRUE(m) << error_text(m.error());
  EXPECT_EQ(m->blocks, 2u);
  EXPECT_EQ(m->rows, 8);
  EXPECT_EQ(m->stored_bytes, m->exact_bytes);
  EXPECT_EQ(m->kv_rms_relative_error_max, 0.0);
  EXPECT_EQ(m->max_abs_dlogit, 0.0);
  EXPECT_EQ(m->max_kl, 0.0);
  EXPECT_EQ(m->top1_agreement, 1.0);
  EXPECT_EQ(m->free_run_prefix, 8);
  EXPECT_TRUE(m->all_finite);
}

TEST(KvInt8EngineTest, Int8BlocksGiveFiniteLogitsFromKvWithinTheQuantizerBound) {
  for (auto t : {engine::dtype::bf16, engine::dtype::f32}) {
    auto be = micro_backend(t);
    ASSERT_TRUE(be);
    const auto& l = be->layout();
    auto m = measure_kv_int8(*be, small_run(kvstore::block_codec::int8));
    ASSERT_TRUE(m) << error_text(m.error());
    EXPECT_TRUE(m->all_finite);
    EXPECT_EQ(m->rows, 8);
    EXPECT_EQ(m->stored_bytes, m->blocks * kvstore::encoded_payload_bytes(l, kvstore::block_codec::int8));
    EXPECT_GT(m->saved_fraction, t == engine::dtype::f32 ? 0.7 : 0.45);
    // The blocks did change, so the logits did (a test that cannot fail
    // would pass with exact blocks too).
    EXPECT_GT(m->kv_rms_relative_error_max, 0.0);
    EXPECT_GT(m->max_abs_dlogit, 0.0);
    // Any slab of n elements: each error is at most max|x| / 254 and
    // max|x| <= sqrt(n) * rms(x), so the RMS error is at most sqrt(n) / 254
    // of the RMS, plus the rounding back to the KV dtype.
    const double slab = static_cast<double>(l.block_tokens) * l.head_dim;
    EXPECT_LE(m->kv_rms_relative_error_max, std::sqrt(slab) / 254 + std::ldexp(1.0, -8));
    EXPECT_GE(m->mean_kl, 0.0);
    EXPECT_GE(m->top1_agreement, 0.0);
    std::printf("micro, %s KV through int8 blocks: kv rms error %.3f%%, max |dlogit| %.4f, mean KL "
                "%.2e, top-1 %.0f%%, free run %d/8\n",
                std::string{engine::to_safetensors_name(t)}.c_str(), 100 * m->kv_rms_relative_error_mean,
                m->max_abs_dlogit, m->mean_kl, 100 * m->top1_agreement, m->free_run_prefix);
  }
}

TEST(KvInt8EngineTest, RefusesAPoolTooSmallForTheRun) {
  auto be = micro_backend(engine::dtype::bf16);
  ASSERT_TRUE(be);
  auto o = small_run(kvstore::block_codec::int8);
  o.generate_tokens = 64;
  auto m = measure_kv_int8(*be, o);
  ASSERT_FALSE(m);
  EXPECT_NE(error_text(m.error()).find("blocks"), std::string::npos) << error_text(m.error());
}

} // namespace
} // namespace tessera::bench
