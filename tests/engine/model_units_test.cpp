// Model units: the serving config's reader and writer (absent, merge,
// malformed input named by file and field, atomic replace) and the
// least-squares fit (recovers known a, b, c, d; refuses what cannot be
// fitted); configs written before d read with d = 0, a bad d is refused.
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

TEST(ModelUnitsTest, AConfigWrittenBeforeTheContextTermLoadsWithDZero) {
  tessera::test::temp_dir dir{"units-old"};
  const auto d = dir.path().string();
  write_file(dir.path() / serving_config_file,
             R"({"sim-h100": {"a": 0.0267, "b": 0.848, "c": 0, "fitted_at": "2026-11-30T10:00:00Z", "rms_error": 0.07}})");
  auto u = serving_units(d, "sim-h100");
  ASSERT_TRUE(u) << tessera::error_text(u.error());
  EXPECT_DOUBLE_EQ(u->per_input_token, 0.0267);
  EXPECT_DOUBLE_EQ(u->per_output_token, 0.848);
  EXPECT_EQ(u->per_context_token, 0.0);
  // With d = 0 a request costs what the a, b, c model said.
  EXPECT_DOUBLE_EQ(u->cost(8192, 256), 0.0267 * 8192 + 0.848 * 256);
  // A fit with d is written and read back with it; only d set is not free.
  fitted_units f{{0.01, 0.5, 1, 2.5e-5}, "2026-12-02T06:00:00Z", 0.01};
  ASSERT_FALSE(write_model_units(d, "cpu", f));
  auto back = read_model_units(d, "cpu");
  ASSERT_TRUE(back && back->has_value());
  EXPECT_DOUBLE_EQ((*back)->units.per_context_token, 2.5e-5);
  EXPECT_DOUBLE_EQ((*back)->units.cost(1000, 10), 0.01 * 1000 + 1 + 0.5 * 10 + 2.5e-5 * (1000 * 10 + 45));
  EXPECT_FALSE(write_model_units(d, "cpu", fitted_units{{0, 0, 0, 1e-4}, "", 0}));
}

TEST(ModelUnitsTest, ABadDIsRefusedByName) {
  tessera::test::temp_dir dir{"units-bad-d"};
  const auto d = dir.path().string();
  const auto file = (dir.path() / serving_config_file).string();
  write_file(file, R"({"cpu": {"a": 1, "b": 1, "c": 0, "d": -0.001}})");
  EXPECT_NE(config_error(d).find("\"cpu\".d must be finite and >= 0, got -0.001"), std::string::npos)
    << config_error(d);
  write_file(file, R"({"cpu": {"a": 1, "b": 1, "c": 0, "d": "0.1"}})");
  EXPECT_NE(config_error(d).find("\"cpu\".d must be a number, got string"), std::string::npos) << config_error(d);
  write_file(file, R"({"cpu": {"a": 1, "b": 1, "c": 0, "d": null}})");
  EXPECT_NE(config_error(d).find("\"cpu\".d must be a number, got null"), std::string::npos) << config_error(d);
  write_file(file, R"({"cpu": {"a": 0, "b": 0, "c": 0, "d": 0}})");
  EXPECT_NE(config_error(d).find("a, b, c and d are all 0"), std::string::npos) << config_error(d);
  fs::remove(file);
  auto err = write_model_units(d, "cpu", fitted_units{{1, 1, 0, NAN}, "", 0});
  ASSERT_TRUE(err);
  EXPECT_NE(tessera::error_text(err).find(".d must be finite"), std::string::npos) << tessera::error_text(err);
  EXPECT_TRUE(write_model_units(d, "cpu", fitted_units{{1, 1, 0, INFINITY}, "", 0}));
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

TEST(ModelUnitsTest, FitRecoversKnownUnitsWithAContextTerm) {
  // Decode reads the context's KV each token: at 2048 in, 256 out the
  // context term is about as large as b's.
  const model_units truth{0.025, 0.6, 2.0, 3e-4};
  auto fit = fit_model_units(grid(truth, 0, 3));
  ASSERT_TRUE(fit) << tessera::error_text(fit.error());
  EXPECT_NEAR(fit->units.per_input_token, 0.025, 1e-9);
  EXPECT_NEAR(fit->units.per_output_token, 0.6, 1e-9);
  EXPECT_NEAR(fit->units.per_request, 2.0, 1e-7);
  EXPECT_NEAR(fit->units.per_context_token, 3e-4, 1e-12);
  EXPECT_LT(fit->rms_relative_error, 1e-9);
  // Under 2 % noise, within 10 %.
  auto noisy = fit_model_units(grid(truth, 0.02, 11));
  ASSERT_TRUE(noisy);
  EXPECT_NEAR(noisy->units.per_context_token, 3e-4, 3e-5);
  EXPECT_NEAR(noisy->units.per_output_token, 0.6, 0.06);
  // The a, b, c model cannot follow it: its error is what d removes.
  auto linear = fit_model_units(grid(truth, 0, 3), false);
  ASSERT_TRUE(linear);
  EXPECT_EQ(linear->units.per_context_token, 0.0);
  EXPECT_GT(linear->rms_relative_error, 0.05);
  // Data with no context cost fits d = 0 (never negative).
  auto flat = fit_model_units(grid(model_units{0.012, 0.85, 3.5}, 0.02, 5));
  ASSERT_TRUE(flat);
  EXPECT_GE(flat->units.per_context_token, 0.0);
  EXPECT_LT(flat->units.per_context_token, 1e-5);
}

TEST(ModelUnitsTest, FitWithTooFewPointsForDFitsABC) {
  // 3 samples cannot separate 4 coefficients: d stays 0, a, b, c exact.
  const model_units truth{0.5, 2.0, 1.0};
  std::vector<units_sample> s{{10, 1, truth.cost(10, 1)}, {20, 4, truth.cost(20, 4)}, {40, 2, truth.cost(40, 2)}};
  auto fit = fit_model_units(s);
  ASSERT_TRUE(fit) << tessera::error_text(fit.error());
  EXPECT_EQ(fit->units.per_context_token, 0.0);
  EXPECT_NEAR(fit->units.per_input_token, 0.5, 1e-9);
  EXPECT_NEAR(fit->units.per_output_token, 2.0, 1e-9);
  EXPECT_NEAR(fit->units.per_request, 1.0, 1e-9);
}

} // namespace
