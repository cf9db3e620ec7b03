// `tessera bench units` through the binary, on the sim engine (seconds): the
// fit and its table, --write storing it under the engine's key in the model
// folder's serving config (merged with what is there), and bad options. And
// a serve of mixed sim devices (--sim-worker-gpus), each worker joining the
// router with its own device's units.
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/child_process.hpp"
#include "common/error.hpp"
#include "tests/support/curl.hpp"
#include "tests/support/run_tessera.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

using namespace std::chrono_literals;

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

TEST(BenchUnitsCliTest, AMixedSimFleetJoinsEachWorkerInItsOwnDevicesUnits) {
  tessera::test::temp_dir dir{"tessera-mixed-fleet"};
  const auto model = dir.path() / "nano";
  ASSERT_EQ(run("model init --shape nano --no-weights --out " + model.string()).exit_code, 0);
  {
    std::ofstream f{model / "tessera_serving.json"};
    f << R"({"sim-h100": {"a": 0.025, "b": 0.79, "c": 0, "d": 5e-05},)"
         R"( "sim-a100": {"a": 0.08, "b": 1.27, "c": 0, "d": 0.0001}})";
  }
  const uint16_t port = tessera::test::free_port();
  const std::string cmd = "exec " + tessera::test::tessera_binary() + " serve --model " + model.string() +
                          " --engine sim --sim-time-scale 0 --sim-worker-gpus h100,a100 --prefill 2 --decode 2"
                          " --router-load units --port " + std::to_string(port) + " 2>&1";
  auto c = tessera::child_process::spawn("/bin/sh", {"-c", cmd}, {.capture_stdout = true});
  ASSERT_TRUE(c) << tessera::error_text(c.error());
  int h100 = 0, a100 = 0;
  std::string log;
  for (;;) {
    auto line = c->read_line(60s);
    ASSERT_TRUE(line) << "the server did not start:\n" << log;
    log += *line + "\n";
    h100 += line->find("joined, units a 0.025 b 0.79 c 0 d 5e-05") != std::string::npos;
    a100 += line->find("joined, units a 0.08 b 1.27 c 0 d 0.0001") != std::string::npos;
    if (line->find("listening on") != std::string::npos)
      break;
  }
  // Two prefill and two decode workers, every other one an A100.
  EXPECT_EQ(h100, 2) << log;
  EXPECT_EQ(a100, 2) << log;
  EXPECT_NE(log.find("sim h100"), std::string::npos) << log;
  EXPECT_NE(log.find("sim a100"), std::string::npos) << log;
  auto reply = tessera::test::curl({"-H", "Content-Type: application/json", "-d",
                                    R"({"model": "nano", "prompt": "hello", "max_tokens": 3})"},
                                   "http://127.0.0.1:" + std::to_string(port) + "/v1/completions");
  EXPECT_EQ(reply.status, 200) << reply.body;
  c->kill(SIGTERM);
  auto code = c->wait(30s);
  ASSERT_TRUE(code);
  EXPECT_EQ(*code, 0);
}

TEST(BenchUnitsCliTest, MixedSimDevicesNeedTheSimAndKnownPresets) {
  tessera::test::temp_dir dir{"tessera-mixed-fleet-bad"};
  const auto model = dir.path() / "nano";
  ASSERT_EQ(run("model init --shape nano --no-weights --out " + model.string()).exit_code, 0);
  auto cpu = run("serve --model " + model.string() + " --sim-worker-gpus h100,a100 --port 0");
  EXPECT_NE(cpu.exit_code, 0) << cpu.out;
  EXPECT_NE(cpu.out.find("--sim-worker-gpus needs --engine sim"), std::string::npos) << cpu.out;
  auto unknown = run("serve --model " + model.string() + " --engine sim --sim-worker-gpus h100,b200 --port 0");
  EXPECT_NE(unknown.exit_code, 0) << unknown.out;
  EXPECT_NE(unknown.out.find("b200"), std::string::npos) << unknown.out;
}

} // namespace
