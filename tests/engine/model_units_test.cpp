// Model units: the serving config's reader and writer (absent, merge,
// malformed input named by file and field, atomic replace) and the
// least-squares fit (recovers known a, b, c; refuses what cannot be fitted).
#include "engine/model_units.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

using namespace tessera::engine;
namespace fs = std::filesystem;

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream{p} << text;
}

std::string config_error(const std::string& dir, const std::string& key = "cpu") {
  auto r = read_model_units(dir, key);
  EXPECT_FALSE(r) << "expected an error";
  return r ? std::string{} : tessera::error_text(r.error());
}

TEST(ModelUnitsTest, AbsentFileOrEntryReadsAsNotFitted) {
  tessera::test::temp_dir dir{"units-absent"};
  auto r = read_model_units(dir.path().string(), "cpu");
  ASSERT_TRUE(r) << tessera::error_text(r.error());
  EXPECT_FALSE(r->has_value());
  write_file(dir.path() / serving_config_file, R"({"sim-h100": {"a": 0.1, "b": 2, "c": 3}})");
  r = read_model_units(dir.path().string(), "cpu");
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->has_value());
  auto u = serving_units(dir.path().string(), "cpu");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->per_input_token, 1.0);
  EXPECT_EQ(u->per_output_token, 1.0);
  EXPECT_EQ(u->per_request, 0.0);
}

TEST(ModelUnitsTest, WriteThenReadAndWritesMergeOtherEnginesAndKeys) {
  tessera::test::temp_dir dir{"units-merge"};
  write_file(dir.path() / serving_config_file, R"({"comment": "kept", "sim-h100": {"a": 0.1, "b": 2, "c": 3}})");
  fitted_units f{{0.05, 1.5, 7.25}, "2026-12-01T20:00:00Z", 0.031};
  ASSERT_FALSE(write_model_units(dir.path().string(), "cpu", f));
  auto cpu = read_model_units(dir.path().string(), "cpu");
  ASSERT_TRUE(cpu && cpu->has_value());
  EXPECT_DOUBLE_EQ((*cpu)->units.per_input_token, 0.05);
  EXPECT_DOUBLE_EQ((*cpu)->units.per_output_token, 1.5);
  EXPECT_DOUBLE_EQ((*cpu)->units.per_request, 7.25);
  EXPECT_EQ((*cpu)->fitted_at, "2026-12-01T20:00:00Z");
  EXPECT_DOUBLE_EQ((*cpu)->rms_error, 0.031);
  auto sim = read_model_units(dir.path().string(), "sim-h100");
  ASSERT_TRUE(sim && sim->has_value());
  EXPECT_DOUBLE_EQ((*sim)->units.per_output_token, 2.0);
  std::ifstream in{dir.path() / serving_config_file};
  auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["comment"], "kept");
  // Overwriting an entry replaces it; no temporary file is left behind.
  f.units.per_request = 1;
  ASSERT_FALSE(write_model_units(dir.path().string(), "cpu", f));
  EXPECT_DOUBLE_EQ((*read_model_units(dir.path().string(), "cpu"))->units.per_request, 1.0);
  size_t files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator{dir.path()})
    ++files;
  EXPECT_EQ(files, 1u);
}

TEST(ModelUnitsTest, MalformedConfigsNameTheFileAndTheField) {
  tessera::test::temp_dir dir{"units-bad"};
  const auto d = dir.path().string();
  const auto file = (dir.path() / serving_config_file).string();
  write_file(file, "{not json");
  auto e = config_error(d);
  EXPECT_NE(e.find(file), std::string::npos) << e;
  EXPECT_NE(e.find("not valid JSON"), std::string::npos) << e;
  write_file(file, "[1, 2]");
  EXPECT_NE(config_error(d).find("must be a JSON object"), std::string::npos);
  write_file(file, R"({"cpu": 3})");
  EXPECT_NE(config_error(d).find("\"cpu\" must be an object"), std::string::npos);
  write_file(file, R"({"cpu": {"a": 1, "b": 1}})");
  EXPECT_NE(config_error(d).find("\"cpu\".c is missing"), std::string::npos) << config_error(d);
  write_file(file, R"({"cpu": {"a": "1", "b": 1, "c": 0}})");
  EXPECT_NE(config_error(d).find("\"cpu\".a must be a number, got string"), std::string::npos) << config_error(d);
  write_file(file, R"({"cpu": {"a": -0.5, "b": 1, "c": 0}})");
  EXPECT_NE(config_error(d).find("\"cpu\".a must be finite and >= 0, got -0.5"), std::string::npos) << config_error(d);
  write_file(file, R"({"cpu": {"a": 1, "b": 1e999, "c": 0}})");
  EXPECT_FALSE(read_model_units(d, "cpu")); // 1e999 is not JSON the parser accepts, or inf: refused either way
  write_file(file, R"({"cpu": {"a": 0, "b": 0, "c": 0}})");
  EXPECT_NE(config_error(d).find("all 0"), std::string::npos);
  write_file(file, R"({"cpu": {"a": 1, "b": 1, "c": 0, "rms_error": -1}})");
  EXPECT_NE(config_error(d).find("rms_error"), std::string::npos);
  // Another engine's entry being fine does not hide a bad one, but a bad
  // entry of another engine does not stop this one from being read.
  write_file(file, R"({"cpu": {"a": 1, "b": 1, "c": 0}, "sim-h100": {"a": -1}})");
  EXPECT_TRUE(read_model_units(d, "cpu"));
  EXPECT_FALSE(read_model_units(d, "sim-h100"));
  // A write over a malformed file refuses and leaves it as it was.
  write_file(file, "{not json");
  EXPECT_TRUE(write_model_units(d, "cpu", fitted_units{{1, 1, 0}, "", 0}));
  std::ifstream in{file};
  std::string text{std::istreambuf_iterator<char>{in}, {}};
  EXPECT_EQ(text, "{not json");
  // Invalid units are not written.
  fs::remove(file);
  EXPECT_TRUE(write_model_units(d, "cpu", fitted_units{{-1, 1, 0}, "", 0}));
  EXPECT_TRUE(write_model_units(d, "cpu", fitted_units{{NAN, 1, 0}, "", 0}));
  EXPECT_FALSE(fs::exists(file));
}

TEST(ModelUnitsTest, OversizedConfigIsRefused) {
  tessera::test::temp_dir dir{"units-big"};
  write_file(dir.path() / serving_config_file, "{\"x\": \"" + std::string(size_t{2} << 20, 'a') + "\"}");
  EXPECT_NE(config_error(dir.path().string()).find("1 MiB"), std::string::npos);
}

TEST(ModelUnitsTest, EngineKeysNameTheSimGpu) {
  EXPECT_EQ(units_engine_key("cpu", "h100"), "cpu");
  EXPECT_EQ(units_engine_key("sim", "h100"), "sim-h100");
  EXPECT_EQ(units_engine_key("sim", "b200"), "sim-b200");
}

std::vector<units_sample> grid(const model_units& truth, double noise, uint64_t seed) {
  std::mt19937_64 rng{seed};
  std::uniform_real_distribution<double> jitter{-noise, noise};
  std::vector<units_sample> out;
  for (int in : {32, 128, 512, 2048})
    for (int o : {4, 16, 64, 256})
      out.push_back({in, o, truth.cost(in, o) * (1.0 + jitter(rng))});
  return out;
}

TEST(ModelUnitsTest, FitRecoversKnownUnitsExactlyWithoutNoise) {
  const model_units truth{0.012, 0.85, 3.5};
  auto fit = fit_model_units(grid(truth, 0, 1));
  ASSERT_TRUE(fit) << tessera::error_text(fit.error());
  EXPECT_NEAR(fit->units.per_input_token, 0.012, 1e-9);
  EXPECT_NEAR(fit->units.per_output_token, 0.85, 1e-9);
  EXPECT_NEAR(fit->units.per_request, 3.5, 1e-7);
  EXPECT_LT(fit->rms_relative_error, 1e-9);
  ASSERT_EQ(fit->predicted.size(), 16u);
}

TEST(ModelUnitsTest, FitRecoversKnownUnitsWithinToleranceUnderNoiseAndReportsTheError) {
  const model_units truth{0.02, 0.6, 5.0};
  auto fit = fit_model_units(grid(truth, 0.05, 7));
  ASSERT_TRUE(fit) << tessera::error_text(fit.error());
  EXPECT_NEAR(fit->units.per_input_token, 0.02, 0.02 * 0.1);
  EXPECT_NEAR(fit->units.per_output_token, 0.6, 0.6 * 0.1);
  EXPECT_NEAR(fit->units.per_request, 5.0, 5.0 * 0.5);
  EXPECT_GT(fit->rms_relative_error, 0.005); // the noise shows in the error
  EXPECT_LT(fit->rms_relative_error, 0.05);
}

TEST(ModelUnitsTest, FitClampsANegativeCoefficientToZero) {
  // Cost grows with input and output only; a free intercept would come out
  // negative under this noise, which a unit must never be.
  std::vector<units_sample> s;
  for (int in : {100, 200, 400})
    for (int o : {10, 20, 40})
      s.push_back({in, o, 0.01 * in + 1.0 * o - 0.5});
  auto fit = fit_model_units(s);
  ASSERT_TRUE(fit);
  EXPECT_GE(fit->units.per_input_token, 0);
  EXPECT_GE(fit->units.per_output_token, 0);
  EXPECT_EQ(fit->units.per_request, 0.0);
}

TEST(ModelUnitsTest, FitRefusesWhatCannotBeFitted) {
  EXPECT_FALSE(fit_model_units(std::vector<units_sample>{{1, 1, 1}, {2, 2, 2}}));
  // Input never varies: a and c cannot be told apart.
  EXPECT_FALSE(fit_model_units(std::vector<units_sample>{{64, 1, 1}, {64, 2, 2}, {64, 4, 3}, {64, 8, 5}}));
  EXPECT_FALSE(fit_model_units(std::vector<units_sample>{{1, 1, 1}, {2, 3, 2}, {4, 1, NAN}}));
  EXPECT_FALSE(fit_model_units(std::vector<units_sample>{{1, 1, 1}, {2, 3, 2}, {4, 1, -3}}));
  EXPECT_FALSE(fit_model_units(std::vector<units_sample>{{1, 1, 1}, {2, 3, 2}, {-4, 1, 3}}));
}

} // namespace
