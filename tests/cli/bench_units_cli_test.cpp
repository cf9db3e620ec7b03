// `tessera bench units` through the binary, on the sim engine (seconds): the
// fit and its table, --write storing it under the engine's key in the model
// folder's serving config (merged with what is there), and bad options.
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/run_tessera.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

using tessera::test::run_result;

run_result run(const std::string& args) {
  return tessera::test::run_tessera(args);
}

TEST(BenchUnitsCliTest, FitsTheSimEngineAndWritesTheServingConfig) {
  tessera::test::temp_dir dir{"tessera-bench-units"};
  const auto model = dir.path() / "nano";
  auto init = run("model init --shape nano --no-weights --out " + model.string());
  ASSERT_EQ(init.exit_code, 0) << init.out;
  {
    std::ofstream f{model / "tessera_serving.json"};
    f << R"({"cpu": {"a": 0.5, "b": 2, "c": 1}})";
  }
  const auto json_path = dir.path() / "units.json";
  auto r = run("bench units --model-dir " + model.string() +
               " --engine sim --sim-gpu h100 --inputs 32,128,384 --outputs 4,16,64 --concurrency 4 --write --json " +
               json_path.string());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("model units for"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("relative RMS error"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sim-h100"), std::string::npos) << r.out;

  std::ifstream in{json_path};
  auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["points"].size(), 9u);
  EXPECT_GE(j["a"].get<double>(), 0);
  EXPECT_GT(j["b"].get<double>(), 0); // decoding a token costs time
  EXPECT_LT(j["rms_error"].get<double>(), 0.5);
  // The context term: fitted (>= 0), printed beside the a, b, c fit, which
  // can only fit worse.
  EXPECT_GE(j["d"].get<double>(), 0);
  EXPECT_NE(r.out.find("without d"), std::string::npos) << r.out;
  EXPECT_LE(j["rms_error"].get<double>(), j["without_d"]["rms_error"].get<double>() + 1e-12);
  for (const auto& p : j["points"])
    EXPECT_GT(p["measured_ms"].get<double>(), 0);

  std::ifstream sc{model / "tessera_serving.json"};
  auto serving = nlohmann::json::parse(sc);
  ASSERT_TRUE(serving.contains("sim-h100")) << serving.dump();
  EXPECT_DOUBLE_EQ(serving["sim-h100"]["b"].get<double>(), j["b"].get<double>());
  EXPECT_DOUBLE_EQ(serving["sim-h100"]["d"].get<double>(), j["d"].get<double>());
  EXPECT_DOUBLE_EQ(serving["cpu"]["a"].get<double>(), 0.5); // kept
}

TEST(BenchUnitsCliTest, RefusesAGridThatCannotSeparateTheTerms) {
  tessera::test::temp_dir dir{"tessera-bench-units-bad"};
  const auto model = dir.path() / "nano";
  ASSERT_EQ(run("model init --shape nano --no-weights --out " + model.string()).exit_code, 0);
  auto r = run("bench units --model-dir " + model.string() + " --engine sim --inputs 64 --outputs 4,16");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("--inputs and --outputs each need >= 2 distinct lengths"), std::string::npos) << r.out;
  // A malformed serving config is named, and --write leaves it alone.
  {
    std::ofstream f{model / "tessera_serving.json"};
    f << "{broken";
  }
  r = run("bench units --model-dir " + model.string() + " --engine sim --inputs 16,32 --outputs 2,4 --write");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("tessera_serving.json: not valid JSON"), std::string::npos) << r.out;
}

} // namespace
