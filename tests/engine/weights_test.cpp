#include "engine/weights.hpp"

#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <span>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "engine/engine_errc.hpp"
#include "engine/weights_check.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

using namespace tessera::engine;
using tessera::error_message;
namespace fs = std::filesystem;

#define EXPECT_CONTAINS(haystack, needle)                                                      \
  EXPECT_NE((haystack).find(needle), std::string::npos) << (haystack)

std::string read_all(const fs::path& p) {
  std::ifstream in{p, std::ios::binary};
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

model_config shape(const char* name) {
  auto s = model_shape(name);
  EXPECT_TRUE(s) << name;
  return s.value_or(model_config{});
}

void write_model(const fs::path& dir, const char* name, random_model_options opts = {}) {
  auto err = write_random_model(dir, shape(name), opts);
  ASSERT_FALSE(err) << tessera::error_text(err);
}

/// Expects loading `dir` to fail with `code`; returns the message.
std::string load_error(const fs::path& dir, engine_errc code) {
  auto w = load_model_weights(dir);
  EXPECT_FALSE(static_cast<bool>(w));
  if (w)
    return {};
  EXPECT_TRUE(w.error() == code) << tessera::error_text(w.error());
  return error_message(w.error());
}

/// A tensor with its own bytes, for rewriting model files.
struct owned_tensor {
  std::string name;
  dtype type;
  std::vector<int64_t> shape;
  std::vector<std::byte> bytes;
};

/// Reads the safetensors file `path`, lets `edit` change the tensor list,
/// and writes it back.
void rewrite_file(const fs::path& path, const std::function<void(std::vector<owned_tensor>&)>& edit) {
  std::vector<owned_tensor> ts;
  {
    auto f = safetensors_file::open(path);
    ASSERT_TRUE(f) << tessera::error_text(f.error());
    for (const auto& t : f->tensors())
      ts.push_back({t.name, t.type, t.shape, {t.data, t.data + t.size_bytes}});
  }
  edit(ts);
  std::vector<tensor_to_write> out;
  for (const auto& t : ts)
    out.push_back({t.name, t.type, t.shape, t.bytes});
  ASSERT_FALSE(write_safetensors(path, out, {{"format", "pt"}}));
}

/// rewrite_file of `dir`/model.safetensors.
void rewrite_model(const fs::path& dir, const std::function<void(std::vector<owned_tensor>&)>& edit) {
  rewrite_file(dir / "model.safetensors", edit);
}

owned_tensor* find(std::vector<owned_tensor>& ts, const std::string& name) {
  for (auto& t : ts)
    if (t.name == name)
      return &t;
  ADD_FAILURE() << "no tensor " << name;
  return nullptr;
}

std::vector<float> values(const tensor_view& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = load_as_f32(t.data, t.type, i);
  return v;
}

bool same_bytes(const tensor_view& a, const tensor_view& b) {
  return a.size_bytes == b.size_bytes && std::memcmp(a.data, b.data, a.size_bytes) == 0;
}

TEST(WeightsTest, WritesAndLoadsEveryNanoShapeInBf16AndF32) {
  for (const char* name : {"nano", "nano-tied", "nano-mha", "nano-qwen2", "nano-llama3"}) {
    for (dtype t : {dtype::bf16, dtype::f32}) {
      SCOPED_TRACE(std::string{name} + " " + std::string{to_safetensors_name(t)});
      tessera::test::temp_dir dir;
      write_model(dir.path(), name, {.seed = 7, .weight_dtype = t});
      auto w = load_model_weights(dir.path());
      ASSERT_TRUE(w) << tessera::error_text(w.error());
      const auto& m = **w;
      const auto cfg = shape(name);
      EXPECT_TRUE(m.config == cfg);
      ASSERT_EQ(m.layers.size(), 2u);
      EXPECT_EQ(m.files.size(), 1u);
      const int64_t kv = cfg.num_key_value_heads * 16;
      EXPECT_EQ(m.embed.shape, (std::vector<int64_t>{512, 64}));
      EXPECT_EQ(m.lm_head.shape, (std::vector<int64_t>{512, 64}));
      EXPECT_EQ(m.final_norm.shape, (std::vector<int64_t>{64}));
      for (const auto& l : m.layers) {
        EXPECT_EQ(l.wq.shape, (std::vector<int64_t>{64, 64}));
        EXPECT_EQ(l.wk.shape, (std::vector<int64_t>{kv, 64}));
        EXPECT_EQ(l.wv.shape, (std::vector<int64_t>{kv, 64}));
        EXPECT_EQ(l.wo.shape, (std::vector<int64_t>{64, 64}));
        EXPECT_EQ(l.w_gate.shape, (std::vector<int64_t>{128, 64}));
        EXPECT_EQ(l.w_up.shape, (std::vector<int64_t>{128, 64}));
        EXPECT_EQ(l.w_down.shape, (std::vector<int64_t>{64, 128}));
        EXPECT_EQ(l.bq.has_value(), cfg.attention_bias);
        if (l.bk) {
          EXPECT_EQ(l.bk->shape, (std::vector<int64_t>{kv}));
        }
        for (const auto* v : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down,
                              &l.attn_norm, &l.mlp_norm})
          EXPECT_EQ(v->type, t) << v->name;
        for (float x : values(l.attn_norm))
          ASSERT_EQ(x, 1.0f);
        for (float x : values(l.mlp_norm))
          ASSERT_EQ(x, 1.0f);
      }
      for (float x : values(m.final_norm))
        ASSERT_EQ(x, 1.0f);
      if (cfg.tie_word_embeddings) {
        EXPECT_EQ(m.lm_head.data, m.embed.data);
        EXPECT_EQ(m.lm_head.name, "model.embed_tokens.weight");
      } else {
        EXPECT_NE(m.lm_head.data, m.embed.data);
        EXPECT_EQ(m.lm_head.name, "lm_head.weight");
      }
      // lm_head is read per token even when tied; the embedding never is.
      const int64_t embed_params = 512 * 64;
      const int64_t read_params =
        cfg.parameter_count() - embed_params + (cfg.tie_word_embeddings ? embed_params : 0);
      EXPECT_EQ(m.bytes_read_per_token(), static_cast<size_t>(read_params) * dtype_size(t));
    }
  }
}

TEST(WeightsTest, RandomMatricesFollowTheRequestedNormal) {
  tessera::test::temp_dir dir;
  write_model(dir.path(), "nano", {.seed = 3, .weight_dtype = dtype::f32, .init_std = 0.05f});
  auto w = load_model_weights(dir.path());
  ASSERT_TRUE(w) << tessera::error_text(w.error());
  auto v = values((*w)->embed);
  double sum = 0, sq = 0;
  for (float x : v) {
    sum += x;
    sq += double{x} * x;
  }
  const double n = static_cast<double>(v.size());
  const double mean = sum / n;
  EXPECT_NEAR(mean, 0.0, 0.002);
  EXPECT_NEAR(std::sqrt(sq / n - mean * mean), 0.05, 0.002);
  // Tensors get different streams.
  EXPECT_FALSE(same_bytes((*w)->layers[0].wq, (*w)->layers[0].wo));
}

TEST(WeightsTest, WritesConfigAndGenerationConfig) {
  tessera::test::temp_dir dir;
  write_model(dir.path(), "nano-qwen2");
  auto cfg = load_model_config(dir.path());
  ASSERT_TRUE(cfg);
  EXPECT_TRUE(*cfg == shape("nano-qwen2"));
  auto gen = nlohmann::json::parse(read_all(dir.path() / "generation_config.json"));
  EXPECT_EQ(gen["bos_token_id"], 0);
  EXPECT_EQ(gen["eos_token_id"], nlohmann::json({1, 4}));
  EXPECT_EQ(gen["do_sample"], false);
  auto f = safetensors_file::open(dir.path() / "model.safetensors");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->metadata().at("format"), "pt");
  EXPECT_FALSE(fs::exists(dir.path() / "model.safetensors.tmp"));
}

TEST(WeightsTest, SameSeedGivesIdenticalFilesAndOtherSeedDiffers) {
  tessera::test::temp_dir a, b, c;
  write_model(a.path(), "nano", {.seed = 11});
  write_model(b.path(), "nano", {.seed = 11});
  write_model(c.path(), "nano", {.seed = 12});
  auto bytes_a = read_all(a.path() / "model.safetensors");
  EXPECT_GT(bytes_a.size(), 100'000u);
  EXPECT_EQ(bytes_a, read_all(b.path() / "model.safetensors"));
  EXPECT_NE(bytes_a, read_all(c.path() / "model.safetensors"));
  EXPECT_EQ(read_all(a.path() / "config.json"), read_all(c.path() / "config.json"));
}

TEST(WeightsTest, ShardedModelLoadsIdenticallyToSingleFile) {
  for (const char* name : {"nano", "nano-qwen2", "nano-tied"}) {
    SCOPED_TRACE(name);
    tessera::test::temp_dir one, three;
    write_model(one.path(), name, {.seed = 5});
    write_model(three.path(), name, {.seed = 5, .shards = 3});
    EXPECT_FALSE(fs::exists(three.path() / "model.safetensors"));
    for (const char* shard : {"model-00001-of-00003.safetensors",
                              "model-00002-of-00003.safetensors",
                              "model-00003-of-00003.safetensors"})
      EXPECT_TRUE(fs::exists(three.path() / shard)) << shard;
    auto index = nlohmann::json::parse(read_all(three.path() / "model.safetensors.index.json"));
    EXPECT_TRUE(index["weight_map"].contains("model.layers.1.mlp.down_proj.weight"));

    auto a = load_model_weights(one.path());
    auto b = load_model_weights(three.path());
    ASSERT_TRUE(a) << tessera::error_text(a.error());
    ASSERT_TRUE(b) << tessera::error_text(b.error());
    EXPECT_EQ((*b)->files.size(), 3u);
    EXPECT_EQ(index["metadata"]["total_size"].get<size_t>(),
              (*a)->bytes_read_per_token() +
                ((*a)->config.tie_word_embeddings ? 0 : (*a)->embed.size_bytes));
    EXPECT_TRUE(same_bytes((*a)->embed, (*b)->embed));
    EXPECT_TRUE(same_bytes((*a)->lm_head, (*b)->lm_head));
    EXPECT_TRUE(same_bytes((*a)->final_norm, (*b)->final_norm));
    for (size_t i = 0; i < (*a)->layers.size(); ++i) {
      const auto& x = (*a)->layers[i];
      const auto& y = (*b)->layers[i];
      for (auto m : {&layer_weights::attn_norm, &layer_weights::wq, &layer_weights::wk,
                     &layer_weights::wv, &layer_weights::wo, &layer_weights::mlp_norm,
                     &layer_weights::w_gate, &layer_weights::w_up, &layer_weights::w_down})
        EXPECT_TRUE(same_bytes(x.*m, y.*m)) << (x.*m).name;
      if (x.bq) {
        ASSERT_TRUE(y.bq && y.bk && y.bv);
        EXPECT_TRUE(same_bytes(*x.bq, *y.bq));
        EXPECT_TRUE(same_bytes(*x.bv, *y.bv));
      }
    }
  }
}

TEST(WeightsTest, RejectsInvalidWriterArguments) {
  tessera::test::temp_dir dir;
  auto cfg = shape("nano");
  cfg.num_key_value_heads = 3;
  auto err = write_random_model(dir.path() / "m", cfg, {});
  ASSERT_TRUE(err);
  EXPECT_TRUE(err == engine_errc::bad_config);
  EXPECT_FALSE(fs::exists(dir.path() / "m"));
  err = write_random_model(dir.path() / "m", shape("nano"), {.shards = 0});
  ASSERT_TRUE(err);
  EXPECT_CONTAINS(error_message(err), "shards must be between 1 and");
}

TEST(WeightsTest, MissingConfigIsIoErrorNamingTheFile) {
  tessera::test::temp_dir dir;
  write_model(dir.path(), "nano");
  fs::remove(dir.path() / "config.json");
  auto msg = load_error(dir.path(), engine_errc::io_error);
  EXPECT_CONTAINS(msg, (dir.path() / "config.json").string() + ": cannot open");
}

TEST(WeightsTest, MissingModelFileIsIoErrorNamingTheFile) {
  tessera::test::temp_dir dir;
  write_model(dir.path(), "nano");
  fs::remove(dir.path() / "model.safetensors");
  auto msg = load_error(dir.path(), engine_errc::io_error);
  EXPECT_CONTAINS(msg, (dir.path() / "model.safetensors").string() + ": cannot open");
}

TEST(WeightsTest, TruncatedModelFileIsBadWeights) {
  tessera::test::temp_dir dir;
  write_model(dir.path(), "nano");
  auto path = dir.path() / "model.safetensors";
  fs::resize_file(path, fs::file_size(path) / 2);
  auto msg = load_error(dir.path(), engine_errc::bad_weights);
  EXPECT_CONTAINS(msg, path.string() + ": tensor '");
  EXPECT_CONTAINS(msg, "outside the");
  fs::resize_file(path, 100); // inside the header
  msg = load_error(dir.path(), engine_errc::bad_weights);
  EXPECT_CONTAINS(msg, path.string() + ": header length");
}

TEST(WeightsTest, WrongShapeNamesTensorAndBothShapes) {
  tessera::test::temp_dir dir;
  write_model(dir.path(), "nano");
  rewrite_model(dir.path(), [](std::vector<owned_tensor>& ts) {
    auto* t = find(ts, "model.layers.1.mlp.up_proj.weight");
    t->shape = {64, 128}; // same bytes, transposed shape
  });
  auto msg = load_error(dir.path(), engine_errc::missing_tensor);
  EXPECT_EQ(msg, (dir.path() / "model.safetensors").string() +
                   ": tensor 'model.layers.1.mlp.up_proj.weight' has shape [64, 128], "
                   "expected [128, 64]");
}

TEST(WeightsTest, MissingTensorIsNamed) {
  tessera::test::temp_dir dir;
  write_model(dir.path(), "nano");
  rewrite_model(dir.path(), [](std::vector<owned_tensor>& ts) {
    std::erase_if(ts, [](auto& t) { return t.name == "model.layers.0.self_attn.k_proj.weight"; });
  });
  auto msg = load_error(dir.path(), engine_errc::missing_tensor);
  EXPECT_EQ(msg, (dir.path() / "model.safetensors").string() +
                   ": missing tensor 'model.layers.0.self_attn.k_proj.weight'");
}

TEST(WeightsTest, UntiedModelWithoutLmHeadIsRejected) {
  tessera::test::temp_dir dir;
  write_model(dir.path(), "nano");
  rewrite_model(dir.path(), [](std::vector<owned_tensor>& ts) {
    std::erase_if(ts, [](auto& t) { return t.name == "lm_head.weight"; });
  });
  auto msg = load_error(dir.path(), engine_errc::missing_tensor);
  EXPECT_CONTAINS(msg, "missing tensor 'lm_head.weight'");
}

TEST(WeightsTest, AttentionBiasIsRequiredWhenConfigSaysSo) {
  tessera::test::temp_dir dir;
  write_model(dir.path(), "nano-qwen2");
  rewrite_model(dir.path(), [](std::vector<owned_tensor>& ts) {
    std::erase_if(ts, [](auto& t) { return t.name == "model.layers.1.self_attn.v_proj.bias"; });
  });
  auto msg = load_error(dir.path(), engine_errc::missing_tensor);
  EXPECT_CONTAINS(msg, "missing tensor 'model.layers.1.self_attn.v_proj.bias'");
}

TEST(WeightsTest, IgnoresExtraTensorsAndAcceptsMixedDtypes) {
  tessera::test::temp_dir dir;
  write_model(dir.path(), "nano", {.weight_dtype = dtype::bf16});
  rewrite_model(dir.path(), [](std::vector<owned_tensor>& ts) {
    std::vector<float> inv_freq(8, 0.5f);
    auto b = std::as_bytes(std::span{inv_freq});
    ts.push_back({"model.layers.0.self_attn.rotary_emb.inv_freq", dtype::f32, {8},
                  {b.begin(), b.end()}});
    // Store the final norm as f32 instead.
    auto* norm = find(ts, "model.norm.weight");
    std::vector<float> ones(64, 1.0f);
    auto nb = std::as_bytes(std::span{ones});
    norm->type = dtype::f32;
    norm->bytes.assign(nb.begin(), nb.end());
  });
  auto w = load_model_weights(dir.path());
  ASSERT_TRUE(w) << tessera::error_text(w.error());
  EXPECT_EQ((*w)->final_norm.type, dtype::f32);
  EXPECT_EQ((*w)->embed.type, dtype::bf16);
  EXPECT_EQ(values((*w)->final_norm), std::vector<float>(64, 1.0f));
}

TEST(WeightsTest, IndexNamingMissingShardIsIoErrorNamingTheShard) {
  tessera::test::temp_dir dir;
  write_model(dir.path(), "nano", {.shards = 3});
  fs::remove(dir.path() / "model-00002-of-00003.safetensors");
  auto msg = load_error(dir.path(), engine_errc::io_error);
  EXPECT_CONTAINS(msg, (dir.path() / "model-00002-of-00003.safetensors").string() +
                         ": cannot open");
}

TEST(WeightsTest, IndexPlacingTensorInWrongShardIsMissingTensor) {
  tessera::test::temp_dir dir;
  write_model(dir.path(), "nano", {.shards = 3});
  auto index_path = dir.path() / "model.safetensors.index.json";
  auto index = nlohmann::json::parse(read_all(index_path));
  auto& wm = index["weight_map"];
  ASSERT_NE(wm["model.norm.weight"], "model-00001-of-00003.safetensors");
  wm["model.norm.weight"] = "model-00001-of-00003.safetensors";
  std::ofstream{index_path} << index.dump();
  auto msg = load_error(dir.path(), engine_errc::missing_tensor);
  EXPECT_CONTAINS(msg, (dir.path() / "model-00001-of-00003.safetensors").string() +
                         ": tensor 'model.norm.weight', which model.safetensors.index.json "
                         "places in this shard, is missing");
}

TEST(WeightsTest, IndexMustNameFilesInsideTheFolder) {
  tessera::test::temp_dir dir;
  write_model(dir.path(), "nano", {.shards = 2});
  auto index_path = dir.path() / "model.safetensors.index.json";
  auto index = nlohmann::json::parse(read_all(index_path));
  index["weight_map"]["model.norm.weight"] = "../elsewhere.safetensors";
  std::ofstream{index_path} << index.dump();
  auto msg = load_error(dir.path(), engine_errc::bad_weights);
  EXPECT_CONTAINS(msg, index_path.string() + ": weight_map entry 'model.norm.weight' names "
                                             "'../elsewhere.safetensors'");
  std::ofstream{index_path} << "{\"weight_map\": [";
  msg = load_error(dir.path(), engine_errc::bad_weights);
  EXPECT_CONTAINS(msg, index_path.string() + ": malformed JSON");
}

TEST(WeightsTest, UnknownArchitectureIsUnsupportedNamingConfig) {
  tessera::test::temp_dir dir;
  write_model(dir.path(), "nano");
  auto config = nlohmann::json::parse(read_all(dir.path() / "config.json"));
  config["model_type"] = "gpt_neox";
  config["architectures"] = {"GPTNeoXForCausalLM"};
  std::ofstream{dir.path() / "config.json"} << config.dump();
  auto msg = load_error(dir.path(), engine_errc::unsupported);
  EXPECT_EQ(msg, (dir.path() / "config.json").string() +
                   ": unsupported model_type 'gpt_neox' (supported: llama, mistral, qwen2)");
}

// --- non-finite values ----------------------------------------------------------

/// Sets element `i` of tensor `name` in the safetensors file `file` to `v`.
void poison(const fs::path& file, const std::string& name, size_t i, float v) {
  rewrite_file(file, [&](std::vector<owned_tensor>& ts) {
    auto* t = find(ts, name);
    ASSERT_NE(t, nullptr);
    ASSERT_LT(i * dtype_size(t->type), t->bytes.size());
    store_from_f32(t->bytes.data(), t->type, i, v);
  });
}

TEST(WeightsTest, NonFiniteWeightIsRefusedNamingFileTensorAndElement) {
  struct value {
    float v;
    const char* text;
  };
  for (dtype type : {dtype::f32, dtype::f16, dtype::bf16}) {
    for (value bad : {value{NAN, "NaN"}, value{INFINITY, "+inf"}, value{-INFINITY, "-inf"}}) {
      SCOPED_TRACE(std::string{to_safetensors_name(type)} + " " + bad.text);
      tessera::test::temp_dir dir;
      write_model(dir.path(), "nano", {.weight_dtype = type});
      ASSERT_TRUE(load_model_weights(dir.path()));
      // [128, 64]: element 1234 is row 19, column 18.
      poison(dir.path() / "model.safetensors", "model.layers.0.mlp.up_proj.weight", 1234, bad.v);
      EXPECT_EQ(load_error(dir.path(), engine_errc::bad_weights),
                (dir.path() / "model.safetensors").string() +
                  ": tensor 'model.layers.0.mlp.up_proj.weight' contains " + bad.text +
                  " at element 1234 (index [19, 18])");
    }
  }
}

TEST(WeightsTest, NonFiniteValuesAreFoundAtEitherEndOfATensor) {
  tessera::test::temp_dir dir;
  write_model(dir.path(), "nano-qwen2", {.weight_dtype = dtype::bf16});
  const auto file = dir.path() / "model.safetensors";
  poison(file, "model.layers.1.self_attn.v_proj.bias", 31, NAN);
  EXPECT_EQ(load_error(dir.path(), engine_errc::bad_weights),
            file.string() + ": tensor 'model.layers.1.self_attn.v_proj.bias' contains NaN at element 31");
  // The embedding is checked first, and its very first element counts.
  poison(file, "model.embed_tokens.weight", 0, -INFINITY);
  EXPECT_EQ(load_error(dir.path(), engine_errc::bad_weights),
            file.string() + ": tensor 'model.embed_tokens.weight' contains -inf at element 0 "
                            "(index [0, 0])");
}

TEST(WeightsTest, NonFiniteWeightInAShardNamesTheShard) {
  tessera::test::temp_dir dir;
  write_model(dir.path(), "nano", {.shards = 3});
  auto index = nlohmann::json::parse(read_all(dir.path() / "model.safetensors.index.json"));
  const std::string name = "model.layers.1.mlp.down_proj.weight";
  const auto shard = dir.path() / index["weight_map"][name].get<std::string>();
  poison(shard, name, 64 * 128 - 1, NAN);
  EXPECT_EQ(load_error(dir.path(), engine_errc::bad_weights),
            shard.string() + ": tensor '" + name + "' contains NaN at element 8191 (index [63, 127])");
}

TEST(WeightsTest, NonFiniteValuesInTensorsTheModelDoesNotUseAreIgnored) {
  tessera::test::temp_dir dir;
  write_model(dir.path(), "nano");
  rewrite_model(dir.path(), [](std::vector<owned_tensor>& ts) {
    std::vector<float> inv_freq(8, NAN);
    auto b = std::as_bytes(std::span{inv_freq});
    ts.push_back({"model.layers.0.self_attn.rotary_emb.inv_freq", dtype::f32, {8},
                  {b.begin(), b.end()}});
  });
  auto w = load_model_weights(dir.path());
  EXPECT_TRUE(w) << tessera::error_text(w.error());
}

// Elements of `type` holding `v`, with `bad` at the given indices.
std::vector<std::byte> elements(dtype type, size_t n, float v,
                                const std::vector<std::pair<size_t, float>>& bad = {}) {
  std::vector<std::byte> out(n * dtype_size(type) + 1); // +1: room to misalign
  for (size_t i = 0; i < n; ++i)
    store_from_f32(out.data(), type, i, v);
  for (auto [i, x] : bad)
    store_from_f32(out.data(), type, i, x);
  return out;
}

TEST(WeightsCheckTest, FiniteExtremesAreFinite) {
  for (dtype type : {dtype::f32, dtype::f16, dtype::bf16}) {
    SCOPED_TRACE(to_safetensors_name(type));
    // The largest finite value, the smallest subnormal, both zeros.
    const float largest = type == dtype::f16 ? 65504.0f
                          : type == dtype::bf16 ? 3.3895314e38f
                                                : 3.4028235e38f;
    for (float v : {largest, -largest, 1e-45f, 0.0f, -0.0f}) {
      auto data = elements(type, 100'003, v);
      EXPECT_FALSE(find_non_finite(data.data(), 100'003, type)) << v;
    }
  }
}

TEST(WeightsCheckTest, FindsTheFirstNonFiniteElementAnywhereAndAtAnyAlignment) {
  // More than one 64 KiB chunk of every type; positions at the chunk seams.
  const size_t n = 70'001;
  for (dtype type : {dtype::f32, dtype::f16, dtype::bf16}) {
    const size_t seam = (size_t{64} << 10) / dtype_size(type);
    for (size_t at : {size_t{0}, size_t{7}, seam - 1, seam, n - 1}) {
      SCOPED_TRACE(std::string{to_safetensors_name(type)} + " at " + std::to_string(at));
      std::vector<std::pair<size_t, float>> bad{{at, INFINITY}};
      if (at + 1 < n)
        bad.emplace_back(at + 1, NAN); // only the first counts
      auto data = elements(type, n, 0.5f, bad);
      auto hit = find_non_finite(data.data(), n, type);
      ASSERT_TRUE(hit);
      EXPECT_EQ(hit->index, at);
      EXPECT_FALSE(hit->nan);
      EXPECT_FALSE(hit->negative);
      // The same bytes one byte off any alignment.
      std::memmove(data.data() + 1, data.data(), n * dtype_size(type));
      hit = find_non_finite(data.data() + 1, n, type);
      ASSERT_TRUE(hit);
      EXPECT_EQ(hit->index, at);
    }
    auto data = elements(type, n, 1.0f, {{n - 1, -NAN}});
    auto hit = find_non_finite(data.data(), n, type);
    ASSERT_TRUE(hit);
    EXPECT_EQ(hit->index, n - 1);
    EXPECT_TRUE(hit->nan);
    EXPECT_FALSE(find_non_finite(data.data(), n - 1, type)) << "reads past numel";
  }
}

TEST(WeightsTest, RewritingAsSingleFileRemovesStaleIndex) {
  tessera::test::temp_dir dir;
  write_model(dir.path(), "nano", {.shards = 2});
  write_model(dir.path(), "nano", {.shards = 1});
  EXPECT_FALSE(fs::exists(dir.path() / "model.safetensors.index.json"));
  auto w = load_model_weights(dir.path());
  ASSERT_TRUE(w) << tessera::error_text(w.error());
  EXPECT_EQ((*w)->files.size(), 1u);
}

} // namespace
