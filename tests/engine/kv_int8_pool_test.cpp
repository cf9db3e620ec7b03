// The int8 KV pool (--kv-dtype int8, engine/kv_int8.hpp): quantization of a
// token's K/V, paged int8 attention against a dense reference over the
// dequantized K/V, the logprob error against a bf16 pool on a random-weight
// model, exactness of prefix caching and export/import with int8 on both
// sides, and the refusals: a bf16 <-> int8 hand-off, a corrupt scale.
#include <cmath>
#include <cstring>
#include <map>
#include <random>

#include <gtest/gtest.h>

#include "common/error.hpp"
#include "engine/cpu/attention.hpp"
#include "engine/cpu/cpu_backend.hpp"
#include "engine/cpu/kernels.hpp"
#include "engine/engine_errc.hpp"
#include "engine/kv_int8.hpp"
#include "kvstore/block.hpp"
#include "kvstore/block_quant.hpp"
#include "kvstore/tiered_block_store.hpp"
#include "tests/support/engine_runs.hpp"
#include "tests/support/test_model.hpp"

namespace {

using namespace tessera;
using namespace tessera::engine;
using namespace tessera::engine::cpu;

using test::make_request;
using test::random_prompt;
using test::run_one;

TEST(KvInt8Test, QuantizeIsWithinHalfAStepAndKeepsTheLargest) {
  std::mt19937_64 rng{1};
  std::normal_distribution<float> nd{0.0f, 3.0f};
  std::vector<float> x(64);
  for (auto& v : x)
    v = nd(rng);
  x[17] = -25.0f; // the absmax element
  std::vector<int8_t> q(64 * 3, 99);
  const uint16_t h = kv_int8_quantize(x.data(), 64, q.data(), 3); // strided, as a K slab
  const float scale = kv_int8_scale(h);
  EXPECT_NEAR(scale, 25.0f / 127.0f, 25.0f / 127.0f * 1e-3);
  EXPECT_EQ(q[17 * 3], -127);
  for (int i = 0; i < 64; ++i) {
    EXPECT_LE(std::fabs(q[i * 3] * scale - x[i]), scale * 0.5f + 1e-6f) << i;
    EXPECT_EQ(q[i * 3 + 1], 99) << "between strided elements nothing is written";
  }
  // All zeros: scale 0, values 0. A NaN: a NaN scale (the attention then
  // carries the NaN as a bf16 pool would).
  std::vector<float> z(16, 0.0f);
  EXPECT_EQ(kv_int8_scale(kv_int8_quantize(z.data(), 16, q.data(), 1)), 0.0f);
  z[3] = std::nanf("");
  EXPECT_TRUE(std::isnan(kv_int8_scale(kv_int8_quantize(z.data(), 16, q.data(), 1))));
}

TEST(KvInt8Test, LayoutCarriesOneF16ScalePerTokenInEachSlab) {
  kv_layout l{16, 12, 4, 64, dtype::i8};
  EXPECT_EQ(l.slab_values_bytes(), 16u * 64);
  EXPECT_EQ(l.slab_bytes(), 16u * 64 + 16 * 2);
  kv_layout b = l;
  b.kv_dtype = dtype::bf16;
  // 66 bytes per token and head against 128: 1.94x the tokens per pool.
  EXPECT_NEAR(static_cast<double>(b.block_bytes()) / static_cast<double>(l.block_bytes()), 128.0 / 66.0, 1e-9);
  EXPECT_EQ(parse_kv_dtype("int8"), dtype::i8);
  EXPECT_EQ(parse_kv_dtype("bf16"), dtype::bf16);
  EXPECT_FALSE(parse_kv_dtype("int4"));
  EXPECT_FALSE(parse_dtype("I8")) << "no weight is int8";
  EXPECT_EQ(describe(l), "int8 KV (f16 scales), 16-token blocks, 12 layers x 4 KV heads x head_dim 64");
}

// A pool of int8 blocks for attention tests.
struct int8_world {
  kv_layout layout;
  std::vector<std::byte> pool;
  attention_shape shape;

  int8_world(int32_t bt, int32_t n_heads, int32_t n_kv_heads, int32_t hd, int32_t n_blocks) {
    layout = {bt, 2, n_kv_heads, hd, dtype::i8};
    pool.assign(layout.block_bytes() * n_blocks, std::byte{0});
    shape.layout = &layout;
    shape.pool = pool.data();
    shape.layer = 1;
    shape.n_heads = n_heads;
    shape.n_kv_heads = n_kv_heads;
  }
  void fill(std::span<const kv_block_id> table, int32_t n, uint64_t seed) {
    std::mt19937_64 rng{seed};
    std::normal_distribution<float> nd{0.0f, 1.0f};
    const size_t width = static_cast<size_t>(layout.num_kv_heads) * layout.head_dim;
    std::vector<float> k(width), v(width);
    for (int32_t p = 0; p < n; ++p) {
      for (size_t i = 0; i < width; ++i) {
        // Per-dimension magnitudes as RoPE'd keys have (a few large dims).
        k[i] = nd(rng) * (i % 7 == 0 ? 8.0f : 1.0f);
        v[i] = nd(rng);
      }
      kv_store(shape, table, p, k.data(), v.data());
    }
  }
  // The K (is_v false) or V element `d` of position `j`, dequantized from
  // the pool's bytes: value * that token's scale.
  double at(std::span<const kv_block_id> table, bool is_v, int32_t kv_head, int32_t j, int32_t d) const {
    const int32_t bt = layout.block_tokens;
    const std::byte* slab = pool.data() + static_cast<size_t>(table[j / bt]) * layout.block_bytes() +
                            layout.slab_offset(shape.layer, is_v, kv_head);
    const size_t i = is_v ? static_cast<size_t>(j % bt) * layout.head_dim + d : static_cast<size_t>(d) * bt + j % bt;
    uint16_t h;
    std::memcpy(&h, slab + layout.slab_values_bytes() + 2 * (j % bt), 2);
    return static_cast<double>(reinterpret_cast<const int8_t*>(slab)[i]) * f16_to_f32(h);
  }
};

struct int8_case {
  int32_t bt, n_heads, n_kv_heads, hd;
  const char* isa;
};

class Int8AttentionTest : public testing::TestWithParam<int8_case> {};

TEST_P(Int8AttentionTest, PagedInt8EqualsDenseReferenceOverDequantizedKV) {
  const auto& c = GetParam();
  const std::string before{kernel_isa()};
  if (!set_kernel_isa(c.isa))
    GTEST_SKIP() << "no " << c.isa << " on this CPU";
  const int32_t n_ctx = 3 * c.bt + 5;
  int8_world w{c.bt, c.n_heads, c.n_kv_heads, c.hd, 16};
  std::vector<kv_block_id> table{11, 3, 14, 6, 9};
  table.resize((n_ctx + c.bt - 1) / c.bt);
  w.fill(table, n_ctx, 1);
  const int32_t group = c.n_heads / c.n_kv_heads;
  std::vector<float> scratch(attention_scratch_floats(w.shape, n_ctx));
  std::mt19937_64 rng{7};
  std::normal_distribution<float> nd{0.0f, 0.1f};
  for (int32_t pos : {0, c.bt - 1, c.bt, n_ctx - 1}) {
    for (int32_t g = 0; g < c.n_kv_heads; ++g) {
      std::vector<float> q(static_cast<size_t>(group) * c.hd), out(q.size());
      for (auto& x : q)
        x = nd(rng);
      attend(w.shape, table, g, pos, q.data(), out.data(), scratch.data());
      for (int32_t h = 0; h < group; ++h) {
        std::vector<double> s(pos + 1);
        double m = -1e300, sum = 0;
        for (int32_t j = 0; j <= pos; ++j) {
          double d = 0;
          for (int32_t i = 0; i < c.hd; ++i)
            d += static_cast<double>(q[h * c.hd + i]) * w.at(table, false, g, j, i);
          m = std::max(m, s[j] = d);
        }
        for (auto& x : s)
          sum += (x = std::exp(x - m));
        for (int32_t i = 0; i < c.hd; ++i) {
          double ref = 0;
          for (int32_t j = 0; j <= pos; ++j)
            ref += s[j] / sum * w.at(table, true, g, j, i);
          EXPECT_NEAR(out[h * c.hd + i], ref, 2e-5) << "pos " << pos << " kv head " << g << " head " << h << " dim " << i;
        }
      }
    }
  }
  set_kernel_isa(before);
}

INSTANTIATE_TEST_SUITE_P(Layouts, Int8AttentionTest,
                         testing::Values(int8_case{16, 4, 2, 16, "avx512"}, int8_case{32, 6, 2, 64, "avx512"},
                                         int8_case{16, 4, 2, 16, "generic"}, int8_case{32, 6, 2, 64, "generic"},
                                         int8_case{8, 4, 1, 24, "avx512"}, // portable fallback
                                         int8_case{16, 4, 2, 16, "avx2"}, int8_case{32, 6, 2, 64, "avx2"},
                                         int8_case{8, 4, 1, 24, "avx2"}));

TEST(Int8AttentionIsaTest, VectorAndScalarPathsAgreeAndIgnoreStaleSlots) {
  if (!set_kernel_isa("avx512"))
    GTEST_SKIP() << "no AVX-512 on this CPU";
  int8_world w{16, 4, 2, 64, 4};
  // Stale bytes in the block's unused slots (a reused block): a NaN scale
  // and values past the query's position must not reach its output.
  std::memset(w.pool.data(), 0x7f, w.pool.size());
  std::vector<kv_block_id> table{2, 0, 3};
  w.fill(table, 40, 3);
  std::vector<float> scratch(attention_scratch_floats(w.shape, 40));
  std::vector<float> q(2 * 64, 0.05f), vec(q.size()), port(q.size());
  for (size_t i = 0; i < q.size(); ++i)
    q[i] = 0.03f * static_cast<float>(static_cast<int>(i % 11) - 5);
  attend(w.shape, table, 1, 39, q.data(), vec.data(), scratch.data());
  ASSERT_TRUE(set_kernel_isa("generic"));
  attend(w.shape, table, 1, 39, q.data(), port.data(), scratch.data());
  set_kernel_isa("avx512");
  for (size_t i = 0; i < vec.size(); ++i) {
    ASSERT_TRUE(std::isfinite(vec[i])) << i;
    EXPECT_NEAR(vec[i], port[i], 1e-5) << i;
  }
}

TEST(Int8AttentionIsaTest, Avx2PathAgreesWithScalarForEveryKvDtype) {
  const std::string before{kernel_isa()};
  if (!set_kernel_isa("avx2"))
    GTEST_SKIP() << "no AVX2 on this CPU";
  for (auto kv : {dtype::f32, dtype::bf16, dtype::i8}) {
    int8_world w{16, 6, 2, 32, 6};
    w.layout.kv_dtype = kv;
    w.pool.assign(w.layout.block_bytes() * 6, std::byte{0});
    w.shape.pool = w.pool.data();
    std::vector<kv_block_id> table{4, 1, 5, 0};
    w.fill(table, 53, 11);
    std::vector<float> scratch(attention_scratch_floats(w.shape, 53));
    std::vector<float> q(3 * 32), vec(q.size()), port(q.size());
    for (size_t i = 0; i < q.size(); ++i)
      q[i] = 0.02f * static_cast<float>(static_cast<int>(i % 13) - 6);
    for (int32_t pos : {0, 7, 8, 52}) {
      ASSERT_TRUE(set_kernel_isa("avx2"));
      attend(w.shape, table, 1, pos, q.data(), vec.data(), scratch.data());
      ASSERT_TRUE(set_kernel_isa("generic"));
      attend(w.shape, table, 1, pos, q.data(), port.data(), scratch.data());
      for (size_t i = 0; i < vec.size(); ++i)
        EXPECT_NEAR(vec[i], port[i], 1e-5) << "dtype " << static_cast<int>(kv) << " pos " << pos << " " << i;
    }
  }
  set_kernel_isa(before);
}

// Teacher-forced log-probabilities of `tokens` (each next token given the
// ones before) with a pool of `kv` elements.
std::vector<double> teacher_logprobs(std::string_view shape, dtype kv, const std::vector<int32_t>& tokens) {
  cpu_backend_options o;
  o.kv_dtype = kv;
  o.num_blocks = static_cast<int32_t>(tokens.size() / 16 + 2);
  o.threads = 2;
  auto be = make_cpu_backend(test::test_model_weights(shape), o);
  EXPECT_TRUE(be);
  std::vector<kv_block_id> table(o.num_blocks);
  for (int32_t i = 0; i < o.num_blocks; ++i)
    table[i] = i;
  const int32_t n = static_cast<int32_t>(tokens.size()) - 1;
  const int32_t vocab = (*be)->logits_vocab();
  std::vector<float> logits(static_cast<size_t>(n) * vocab);
  forward_seq f{std::span{tokens}.first(n), 0, table, n};
  (*be)->forward(std::span{&f, 1}, logits.data());
  std::vector<double> out(n);
  for (int32_t r = 0; r < n; ++r) {
    const float* row = logits.data() + static_cast<size_t>(r) * vocab;
    double m = -1e300, sum = 0;
    for (int32_t i = 0; i < vocab; ++i)
      m = std::max(m, static_cast<double>(row[i]));
    for (int32_t i = 0; i < vocab; ++i)
      sum += std::exp(row[i] - m);
    out[r] = row[tokens[r + 1]] - m - std::log(sum);
  }
  return out;
}

TEST(KvInt8Test, LogprobErrorAgainstBf16PoolIsSmall) {
  // 320 tokens on the random-weight `tiny` model (6 layers, 6 KV heads,
  // head_dim 48). The bound: mean |error| < 0.01 here and max < 0.1 (the
  // issue's target is mean < 0.02 on `small` over 2k tokens, measured by
  // `tessera bench kv-int8 --pool`); a broken scale or layout gives errors
  // of whole nats.
  auto tokens = random_prompt(321, 42, 32000);
  auto ref = teacher_logprobs("tiny", dtype::bf16, tokens);
  auto q = teacher_logprobs("tiny", dtype::i8, tokens);
  auto f32 = teacher_logprobs("tiny", dtype::f32, tokens);
  double mean = 0, max = 0, mean_bf16 = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double e = std::fabs(q[i] - ref[i]);
    mean += e / static_cast<double>(ref.size());
    max = std::max(max, e);
    mean_bf16 += std::fabs(ref[i] - f32[i]) / static_cast<double>(ref.size());
  }
  RecordProperty("mean_abs_logprob_error", std::to_string(mean));
  std::printf("int8 vs bf16 KV, tiny, 320 tokens: mean |dlogprob| %.5f, max %.5f (bf16 vs f32: %.5f)\n",
              mean, max, mean_bf16);
  EXPECT_LT(mean, 0.01);
  EXPECT_LT(max, 0.1);
  EXPECT_GT(mean, 0.0) << "int8 should not be bitwise bf16";
}

test::test_engine_options int8_opts(int32_t blocks = 256, int32_t chunk = 0) {
  test::test_engine_options o;
  o.backend.num_blocks = blocks;
  o.backend.kv_dtype = dtype::i8;
  o.engine.scheduling.max_prefill_chunk = chunk;
  return o;
}

TEST(KvInt8EngineTest, PrefixCachedAndChunkedEqualUncachedTokenForToken) {
  auto prompt = random_prompt(70, 3);
  auto uncached_opts = int8_opts();
  uncached_opts.engine.enable_prefix_caching = false;
  auto reference = run_one(*test::make_test_engine("nano", uncached_opts), make_request(2, prompt, 16));
  auto eng = test::make_test_engine("nano", int8_opts());
  auto first = run_one(*eng, make_request(1, prompt, 16));
  auto second = run_one(*eng, make_request(2, prompt, 16));
  EXPECT_EQ(second.cached_prompt_tokens, 64);
  EXPECT_EQ(first, reference);
  EXPECT_EQ(second, reference);
  for (int chunk : {1, 7})
    EXPECT_EQ(run_one(*test::make_test_engine("nano", int8_opts(256, chunk)), make_request(2, prompt, 16)), reference)
      << "chunk " << chunk;
  // And int8 is not bf16 (the test would pass vacuously otherwise).
  test::test_engine_options bf16 = uncached_opts;
  bf16.backend.kv_dtype = dtype::bf16;
  auto other = run_one(*test::make_test_engine("nano", bf16), make_request(2, prompt, 16));
  EXPECT_NE(other.logprobs, reference.logprobs);
}

TEST(KvInt8EngineTest, BlockHashNamespaceIncludesTheKvDtype) {
  auto prompt = random_prompt(40, 9);
  auto a = test::make_test_engine("nano", int8_opts());
  test::test_engine_options b_opts;
  auto b = test::make_test_engine("nano", b_opts);
  EXPECT_NE(a->block_hashes(prompt, ""), b->block_hashes(prompt, ""));
}

// Prefill on one int8 engine, export, import into another: the same tokens
// and logprobs as one engine; returns the export for the refusal tests.
kv_export handed_off(float temperature, test::run_result* whole_out = nullptr) {
  auto r = make_request(5, random_prompt(37, 6), 16, temperature);
  auto whole = run_one(*test::make_test_engine("nano", int8_opts()), r);
  auto b = test::make_test_engine("nano", int8_opts());
  EXPECT_FALSE(b->add_request(r));
  std::map<uint64_t, test::run_result> partial;
  for (int i = 0; i < 4; ++i)
    test::collect(partial, b->step());
  auto kv = b->export_request(r.id);
  EXPECT_TRUE(kv);
  auto c = test::make_test_engine("nano", int8_opts(128));
  run_one(*c, make_request(50, random_prompt(40, 60), 2)); // churn its pool
  EXPECT_FALSE(c->import_request(r, *kv));
  auto tail = test::drain(*c)[r.id];
  auto joined = partial[r.id];
  joined.tokens.insert(joined.tokens.end(), tail.tokens.begin(), tail.tokens.end());
  joined.logprobs.insert(joined.logprobs.end(), tail.logprobs.begin(), tail.logprobs.end());
  joined.finish = tail.finish;
  EXPECT_EQ(joined, whole) << "temperature " << temperature;
  if (whole_out)
    *whole_out = whole;
  return *kv;
}

TEST(KvInt8EngineTest, ExportThenImportContinuesIdentically) {
  handed_off(0.0f);
  handed_off(0.7f);
}

TEST(KvInt8EngineTest, HandOffBetweenInt8AndBf16PoolsIsRefusedNamingBoth) {
  auto kv = handed_off(0.0f);
  auto r = make_request(5, random_prompt(37, 6), 16);
  auto bf16 = test::make_test_engine("nano", test::test_engine_options{});
  auto err = bf16->import_request(r, kv);
  EXPECT_TRUE(err == engine_errc::kv_mismatch);
  const auto text = error_text(err);
  EXPECT_NE(text.find("int8 KV"), std::string::npos) << text;
  EXPECT_NE(text.find("bf16 KV"), std::string::npos) << text;
  EXPECT_FALSE(bf16->reserve_import(r, kv)) << "the zero-copy path refuses too";
}

// Where token `t`'s K scale of (layer, head) lies in block `block` of `data`.
size_t scale_at(const kv_layout& l, size_t block, int32_t layer, bool is_v, int32_t head, int32_t t) {
  return block * l.block_bytes() + l.slab_offset(layer, is_v, head) + l.slab_values_bytes() + 2 * static_cast<size_t>(t);
}

TEST(KvInt8EngineTest, ACorruptScaleInAnImportedBlockIsRefused) {
  auto kv = handed_off(0.0f);
  auto r = make_request(5, random_prompt(37, 6), 16);
  // NaN, +inf, a negative scale (f16 bits), in a K and in a V slab.
  const std::pair<uint16_t, bool> bad[] = {{0x7e00, false}, {0x7c00, true}, {0xbc00, false}, {0x8001, true}};
  for (auto [bits, is_v] : bad) {
    auto corrupt = kv;
    std::memcpy(corrupt.data.data() + scale_at(kv.layout, 1, 1, is_v, 1, 5), &bits, 2);
    auto eng = test::make_test_engine("nano", int8_opts());
    auto err = eng->import_request(r, corrupt);
    EXPECT_TRUE(err == engine_errc::kv_mismatch) << bits;
    const auto text = error_text(err);
    EXPECT_NE(text.find("block 1"), std::string::npos) << text;
    EXPECT_NE(text.find(std::string{"layer 1"} + (is_v ? " V" : " K") + " head 1 token 5"), std::string::npos) << text;
    EXPECT_FALSE(eng->has_unfinished()) << "nothing was imported";
  }
}

TEST(KvInt8EngineTest, ACorruptScaleWrittenStraightIntoThePoolIsRefusedAtCommit) {
  auto r = make_request(7, random_prompt(53, 15), 20);
  auto prefill = test::make_test_engine("nano", int8_opts(64));
  auto first = r;
  first.params.max_tokens = 1;
  first.keep_kv = true;
  run_one(*prefill, first);
  auto src = prefill->export_request_blocks(r.id);
  ASSERT_TRUE(src) << error_text(src.error());
  auto decode = test::make_test_engine("nano", int8_opts(128));
  auto plan = decode->reserve_import(r, src->meta);
  ASSERT_TRUE(plan) << error_text(plan.error());
  ASSERT_EQ(test::put_blocks(*prefill, *src, *decode, *plan), 4u);
  // The RMA put a block whose scale is -inf.
  const auto& l = decode->get_backend().layout();
  const uint16_t neg_inf = 0xfc00;
  std::memcpy(decode->get_backend().kv_pool_memory().data() + scale_at(l, plan->blocks[2], 0, true, 0, 3), &neg_inf, 2);
  auto err = decode->commit_import(r.id);
  EXPECT_TRUE(err == engine_errc::kv_mismatch);
  EXPECT_NE(error_text(err).find("layer 0 V head 0 token 3"), std::string::npos) << error_text(err);
  EXPECT_FALSE(decode->has_unfinished()) << "the request did not start";
  EXPECT_TRUE(decode->cancel_import(r.id));
}

TEST(KvInt8EngineTest, ATierBlockWithACorruptScaleIsNotUsed) {
  auto prompt = random_prompt(64, 12);
  auto a = test::make_test_engine("nano", int8_opts());
  run_one(*a, make_request(1, prompt, 1));
  const auto hashes = a->block_hashes(prompt, "");
  ASSERT_EQ(hashes.size(), 4u);
  auto b = test::make_test_engine("nano", int8_opts());
  const auto& l = b->get_backend().layout();
  auto fetch = [&](size_t i, std::span<std::byte> out) {
    if (!a->read_cached_block(hashes[i], out))
      return false;
    if (i == 2) {
      const uint16_t nan = 0x7e01;
      std::memcpy(out.data() + scale_at(l, 0, 1, false, 0, 0), &nan, 2);
    }
    return true;
  };
  EXPECT_EQ(b->extend_cached_prefix(hashes, fetch), 2u) << "the chain stops before the corrupt block";
}

TEST(KvInt8StoreTest, TheStoreKeepsAnInt8PoolBlockAsItIsAndRefusesACorruptOne) {
  auto prompt = random_prompt(32, 13);
  auto a = test::make_test_engine("nano", int8_opts());
  run_one(*a, make_request(1, prompt, 1));
  const auto hashes = a->block_hashes(prompt, "");
  const auto& l = a->get_backend().layout();
  std::vector<std::byte> bytes(l.block_bytes());
  ASSERT_TRUE(a->read_cached_block(hashes[0], bytes));
  auto b = kvstore::make_block(l, l.block_tokens, bytes);
  const kvstore::block_key key{1, hashes[0]};
  EXPECT_FALSE(kvstore::validate_block(key, b));
  EXPECT_FALSE(kvstore::encode_int8_block(b)) << "an int8 pool block is not quantized again";
  {
    // An int8 tier keeps it as it is, counts it as int8, not as refused,
    // and gives back the same bytes.
    kvstore::tiered_store_options o;
    o.tier_codec = kvstore::block_codec::int8;
    auto store = kvstore::tiered_block_store::open(o);
    ASSERT_TRUE(store);
    ASSERT_FALSE((*store)->put(key, b));
    const auto s = (*store)->stats();
    EXPECT_EQ(s.int8_blocks, 1u);
    EXPECT_EQ(s.int8_refused, 0u);
    auto back = (*store)->get(key);
    ASSERT_TRUE(back);
    ASSERT_TRUE(back->block.payload);
    EXPECT_TRUE(*back->block.payload == bytes);
  }
  const uint16_t neg_zero = 0x8000; // -0 is a scale of 0: fine
  std::memcpy(bytes.data() + scale_at(l, 0, 0, false, 0, 0), &neg_zero, 2);
  EXPECT_FALSE(kvstore::validate_block(key, kvstore::make_block(l, l.block_tokens, bytes)));
  const uint16_t neg = 0x8400;
  std::memcpy(bytes.data() + scale_at(l, 0, 1, true, 1, 15), &neg, 2);
  auto err = kvstore::validate_block(key, kvstore::make_block(l, l.block_tokens, bytes));
  EXPECT_TRUE(err);
  EXPECT_NE(error_text(err).find("scale of layer 1 V head 1 token 15"), std::string::npos) << error_text(err);
}

} // namespace
