// The sim backend's timing model (sim_cost_model.hpp): its step times are
// the roofline formula on the GPU presets' datasheet figures and the
// calibration table, recomputed here independently for Llama 3.1 8B on an
// H100, and the regime (memory- vs compute-bound) switches where the
// formula says.
#include <algorithm>
#include <vector>

#include <gtest/gtest.h>

#include "common/error.hpp"
#include "engine/sim/sim_backend.hpp"
#include "engine/sim/sim_cost_model.hpp"
#include "engine/sim/sim_gpu.hpp"

namespace {

using namespace tessera::engine;
using namespace tessera::engine::sim;

// Llama 3.1 8B, written out here rather than read from model_shape().
constexpr double h = 4096, layers = 32, heads = 32, kv_heads = 8, head_dim = 128;
constexpr double inter = 14336, vocab = 128256;
constexpr double q = heads * head_dim, kv = kv_heads * head_dim;

// H100 SXM datasheet: 3.35 TB/s, 989.5 TFLOPS dense bf16; table: 0.7 / 0.6.
constexpr double bandwidth = 3.35e12, peak = 989.5e12, mem_eff = 0.7, compute_eff = 0.6;

model_config llama8b() {
  auto c = model_shape("llama3-8b");
  EXPECT_TRUE(c.has_value());
  return *c;
}

cost_model h100_model(const model_config& cfg) {
  return cost_model{cfg, *find_gpu("h100"), default_calibration("h100"), dtype::bf16};
}

// The roofline step time of sim_cost_model.hpp's formula, from scratch.
struct expected_cost {
  double bytes = 0, flops = 0, seconds = 0;
  bool compute_bound = false;
};

expected_cost roofline(const std::vector<seq_shape>& seqs) {
  const double params = vocab * h * 2 /* embed + lm_head */ + h /* final norm */ +
                        layers * (2 * h + q * h + 2 * kv * h + h * q + 3 * h * inter);
  const double weight_bytes = (params - vocab * h) * 2; // the embedding is only gathered
  const double kv_token = 2 * layers * kv * 2;
  const double act_token = 2 * layers * (8 * h + 4 * q + 2 * kv + 3 * inter);
  const double matmul = layers * (2 * h * q + 2 * h * kv + 3 * h * inter);
  double tokens = 0, kv_tokens = 0, pairs = 0, rows = 0;
  for (const auto& s : seqs) {
    const double n = static_cast<double>(s.new_tokens), st = static_cast<double>(s.start_pos);
    tokens += n;
    kv_tokens += st + n + n;
    pairs += n * st + n * (n + 1) / 2;
    rows += s.logits ? 1 : 0;
  }
  expected_cost e;
  e.bytes = weight_bytes + kv_token * kv_tokens + act_token * tokens + 4 * vocab * rows;
  e.flops = 2 * matmul * tokens + 2 * vocab * h * rows + 4 * layers * q * pairs;
  const double mem_s = e.bytes / (bandwidth * mem_eff);
  const double compute_s = e.flops / (peak * compute_eff);
  e.seconds = std::max(mem_s, compute_s);
  e.compute_bound = compute_s > mem_s;
  return e;
}

std::vector<seq_shape> decode_batch(int n, int64_t context) {
  return std::vector<seq_shape>(static_cast<size_t>(n), seq_shape{1, context, true});
}

void expect_matches(const step_cost& got, const expected_cost& want) {
  EXPECT_NEAR(got.bytes, want.bytes, want.bytes * 1e-12);
  EXPECT_NEAR(got.flops, want.flops, want.flops * 1e-12);
  EXPECT_NEAR(got.seconds, want.seconds, want.seconds * 1e-12);
  EXPECT_EQ(got.compute_bound, want.compute_bound);
}

TEST(SimCostModelTest, PresetsCarryTheDatasheetFigures) {
  ASSERT_EQ(gpu_names(), (std::vector<std::string>{"a100", "h100", "h200"}));
  EXPECT_DOUBLE_EQ(find_gpu("a100")->memory_bandwidth_bytes_s, 2.039e12);
  EXPECT_DOUBLE_EQ(find_gpu("a100")->peak_bf16_flops, 312e12);
  EXPECT_DOUBLE_EQ(find_gpu("h100")->memory_bandwidth_bytes_s, 3.35e12);
  EXPECT_DOUBLE_EQ(find_gpu("h100")->peak_bf16_flops, 989.5e12);
  EXPECT_DOUBLE_EQ(find_gpu("h200")->memory_bandwidth_bytes_s, 4.8e12);
  EXPECT_DOUBLE_EQ(find_gpu("h200")->peak_bf16_flops, 989.5e12);
  EXPECT_FALSE(find_gpu("b200"));
  for (const auto& g : gpu_names()) {
    auto cal = default_calibration(g);
    EXPECT_DOUBLE_EQ(cal.memory_efficiency, 0.7) << g;
    EXPECT_DOUBLE_EQ(cal.compute_efficiency, 0.6) << g;
    EXPECT_NE(cal.source.find("assumed"), std::string::npos) << g;
  }
}

TEST(SimCostModelTest, LongPrefillIsTheRooflineFormulaAndComputeBound) {
  const auto model = h100_model(llama8b());
  const std::vector<seq_shape> prefill = {{8192, 0, true}};
  const auto got = model.step(prefill);
  expect_matches(got, roofline(prefill));
  EXPECT_TRUE(got.compute_bound);
  EXPECT_EQ(got.tokens, 8192);
  EXPECT_EQ(got.seqs, 1);
  // ~120 TFLOP at 0.6 x 989.5 TFLOPS: about 0.2 s.
  EXPECT_GT(got.seconds, 0.15);
  EXPECT_LT(got.seconds, 0.25);
}

TEST(SimCostModelTest, DecodeBatchWithLongContextsIsTheRooflineFormulaAndMemoryBound) {
  const auto model = h100_model(llama8b());
  const auto batch = decode_batch(64, 4095);
  const auto got = model.step(batch);
  expect_matches(got, roofline(batch));
  EXPECT_FALSE(got.compute_bound);
  // 15 GB of weights + 64 x 4096 x 128 KiB of KV at 0.7 x 3.35 TB/s: ~21 ms.
  EXPECT_GT(got.seconds, 0.018);
  EXPECT_LT(got.seconds, 0.025);
  // A chunked prefill continuing at position 4096 beside the decodes.
  auto mixed = batch;
  mixed.push_back({512, 4096, false});
  expect_matches(model.step(mixed), roofline(mixed));
}

TEST(SimCostModelTest, RegimeSwitchesToComputeBoundAtTheRidgePoint) {
  // Short contexts: arithmetic intensity ~ batch size; the ridge is
  // peak * 0.6 / (bandwidth * 0.7) ~ 253 flops per byte.
  const auto model = h100_model(llama8b());
  int first_compute_bound = 0;
  for (int b = 1; b <= 1024; ++b)
    if (model.step(decode_batch(b, 16)).compute_bound) {
      first_compute_bound = b;
      break;
    }
  ASSERT_GT(first_compute_bound, 0);
  const auto below = roofline(decode_batch(first_compute_bound - 1, 16));
  const auto at = roofline(decode_batch(first_compute_bound, 16));
  EXPECT_FALSE(below.compute_bound);
  EXPECT_TRUE(at.compute_bound);
  const double ridge = peak * compute_eff / (bandwidth * mem_eff);
  EXPECT_LE(below.flops / below.bytes, ridge);
  EXPECT_GT(at.flops / at.bytes, ridge);
  EXPECT_LT(at.flops / at.bytes, ridge * 1.01);
  // 15 GB of weights against ~15 GFLOP and ~9 MB per sequence: ~300.
  EXPECT_GT(first_compute_bound, 250);
  EXPECT_LT(first_compute_bound, 400);
  // Below the ridge the time barely grows with the batch; above it, linearly.
  const double t64 = model.step(decode_batch(64, 16)).seconds;
  const double t128 = model.step(decode_batch(128, 16)).seconds;
  const double t1024 = model.step(decode_batch(1024, 16)).seconds;
  const double t2048 = model.step(decode_batch(2048, 16)).seconds;
  EXPECT_LT(t128 / t64, 1.08);
  EXPECT_NEAR(t2048 / t1024, 2.0, 0.01);
}

TEST(SimCostModelTest, CalibrationAndTensorParallelScaleTheTime) {
  const auto cfg = llama8b();
  const auto base = h100_model(cfg);
  auto cal = default_calibration("h100");
  cal.memory_efficiency = 0.35;
  cal.step_overhead_s = 1e-3;
  const cost_model slow_memory{cfg, *find_gpu("h100"), cal, dtype::bf16};
  const auto decode = decode_batch(8, 1024);
  EXPECT_NEAR(slow_memory.step(decode).seconds, 2 * base.step(decode).seconds + 1e-3, 1e-12);
  const cost_model tp2{cfg, *find_gpu("h100"), default_calibration("h100"), dtype::bf16, 2};
  EXPECT_NEAR(tp2.step(decode).seconds, base.step(decode).seconds / 2, 1e-12);
  const cost_model h200{cfg, *find_gpu("h200"), default_calibration("h200"), dtype::bf16};
  EXPECT_NEAR(h200.step(decode).seconds, base.step(decode).seconds * 3.35 / 4.8, 1e-12);
  EXPECT_EQ(base.step({}).seconds, 0);
}

TEST(SimCostModelTest, PayloadScaleShrinksLayersThenHeadsThenHeadDim) {
  const auto cfg = llama8b(); // 32 layers x 8 kv heads x 128 head_dim, 2 MiB blocks
  auto real = scaled_layout(cfg, 16, dtype::bf16, 1);
  ASSERT_TRUE(real) << tessera::error_text(real.error());
  EXPECT_EQ(real->block_bytes(), size_t{2} << 20);
  auto s64 = scaled_layout(cfg, 16, dtype::bf16, 64);
  ASSERT_TRUE(s64);
  EXPECT_EQ(s64->num_layers, 1);
  EXPECT_EQ(s64->num_kv_heads, 4);
  EXPECT_EQ(s64->head_dim, 128);
  EXPECT_EQ(s64->block_tokens, 16);
  EXPECT_EQ(s64->block_bytes() * 64, real->block_bytes());
  auto s4096 = scaled_layout(cfg, 16, dtype::bf16, 4096);
  ASSERT_TRUE(s4096);
  EXPECT_EQ(s4096->block_bytes() * 4096, real->block_bytes());
  auto odd = scaled_layout(cfg, 16, dtype::bf16, 3);
  ASSERT_FALSE(odd);
  EXPECT_NE(tessera::error_text(odd.error()).find("must divide"), std::string::npos);
  auto tiny = scaled_layout(cfg, 16, dtype::bf16, 32768); // 4 bytes per token left
  ASSERT_FALSE(tiny);
  EXPECT_NE(tessera::error_text(tiny.error()).find("8"), std::string::npos);
}

} // namespace
