// `tessera generate` on a model whose weights hold a NaN: it exits with an
// error naming the file, the tensor and the element, instead of running
// (every request would fail) or aborting.
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/error.hpp"
#include "engine/safetensors.hpp"
#include "tests/support/run_tessera.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/test_model.hpp"

namespace {

using namespace tessera;
namespace fs = std::filesystem;

// Copies the test model `shape` into `to` with element `i` of tensor `name`
// set to `v`.
void write_poisoned_model(const fs::path& to, const std::string& name, size_t i, float v) {
  fs::copy(test::test_model_dir("nano", engine::dtype::bf16, 5), to, fs::copy_options::recursive);
  const auto path = to / "model.safetensors";
  struct owned {
    std::string name;
    engine::dtype type;
    std::vector<int64_t> shape;
    std::vector<std::byte> bytes;
  };
  std::vector<owned> ts;
  {
    auto f = engine::safetensors_file::open(path);
    ASSERT_TRUE(f) << error_text(f.error());
    for (const auto& t : f->tensors())
      ts.push_back({t.name, t.type, t.shape, {t.data, t.data + t.size_bytes}});
  }
  bool found = false;
  std::vector<engine::tensor_to_write> out;
  for (auto& t : ts) {
    if (t.name == name) {
      engine::store_from_f32(t.bytes.data(), t.type, i, v);
      found = true;
    }
    out.push_back({t.name, t.type, t.shape, t.bytes});
  }
  ASSERT_TRUE(found) << "no tensor " << name;
  auto err = engine::write_safetensors(path, out, {{"format", "pt"}});
  ASSERT_FALSE(err) << error_text(err);
}

TEST(NanWeightsCliTest, GenerateRefusesTheModelNamingTheTensor) {
  test::temp_dir dir{"tessera-nan-cli"};
  const auto model = dir.path() / "nano";
  write_poisoned_model(model, "model.layers.1.mlp.up_proj.weight", 77, NAN);
  auto r = test::run_tessera("generate --model " + model.string() +
                             " --prompt 'Hello world' --max-tokens 4 --temperature 0");
  EXPECT_EQ(r.exit_code, 1) << "expected a clean error exit (-1: killed by a signal)\n" << r.out;
  EXPECT_NE(r.out.find((model / "model.safetensors").string() +
                       ": tensor 'model.layers.1.mlp.up_proj.weight' contains NaN at element 77"),
            std::string::npos)
    << r.out;
  EXPECT_EQ(r.out.find("assertion failed"), std::string::npos) << r.out;
}

} // namespace
