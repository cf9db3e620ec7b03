// `tessera bench serve` end to end: it starts a server on a nano model,
// drives it over HTTP, runs the same load on the engine alone, and writes
// a table, JSON and SVG. Never asserts on speed (STYLE.md), only that every
// request was measured and the numbers are there and positive.
#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>

#include "tests/support/run_tessera.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

using tessera::test::run_result;

run_result run(const std::string& args) {
  return tessera::test::run_tessera(args);
}

void expect_latencies(const nlohmann::json& l, const char* key, bool strictly_positive) {
  ASSERT_TRUE(l.contains(key)) << key;
  const auto& p = l[key];
  for (const char* k : {"count", "mean", "p50", "p90", "p99"})
    ASSERT_TRUE(p.contains(k)) << key << "." << k;
  EXPECT_GT(p["count"].get<int>(), 0) << key;
  EXPECT_LE(p["p50"].get<double>(), p["p90"].get<double>()) << key;
  EXPECT_LE(p["p90"].get<double>(), p["p99"].get<double>()) << key;
  if (strictly_positive)
    EXPECT_GT(p["p50"].get<double>(), 0) << key;
  else
    EXPECT_GE(p["p50"].get<double>(), 0) << key;
}

TEST(BenchServeTest, SpawnedServerRunMeasuresEveryRequestBesideTheEngineAlone) {
  tessera::test::temp_dir dir{"tessera-bench-serve"};
  const auto model = dir.path() / "nano";
  auto init = run("model init --shape nano --seed 5 --out " + model.string());
  ASSERT_EQ(init.exit_code, 0) << init.out;
  const auto json_path = dir.path() / "serve.json";
  const auto svg_path = dir.path() / "serve.svg";
  auto r = run("bench serve --spawn-server --quick --model-dir " + model.string() +
               " --server-args '--mode agg --decode 1 --threads 1' --engine-baseline --engine-threads 1"
               " --json " + json_path.string() + " --svg " + svg_path.string());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("out tok/s"), std::string::npos) << r.out;

  auto j = nlohmann::json::parse(std::ifstream{json_path});
  EXPECT_EQ(j["model"], "nano");
  EXPECT_EQ(j["prompt_tokens"], 16);
  EXPECT_EQ(j["output_tokens"], 8);
  ASSERT_EQ(j["levels"].size(), 2u) << "--quick runs concurrency 1 and 4";
  int want_concurrency[] = {1, 4};
  for (size_t i = 0; i < 2; ++i) {
    const auto& l = j["levels"][i];
    SCOPED_TRACE("level " + l.dump());
    EXPECT_EQ(l["concurrency"], want_concurrency[i]);
    EXPECT_EQ(l["requests"], 4);
    EXPECT_EQ(l["errors"], 0);
    EXPECT_EQ(l["output_tokens"], 4 * 8) << "ignore_eos: every request generates all its tokens";
    EXPECT_GT(l["wall_s"].get<double>(), 0);
    EXPECT_GT(l["requests_per_s"].get<double>(), 0);
    EXPECT_GT(l["output_tok_s"].get<double>(), 0);
    expect_latencies(l, "ttft_ms", true);
    expect_latencies(l, "itl_ms", false); // chunks read together are 0 apart
    expect_latencies(l, "tpot_ms", false);
    EXPECT_GE(l["client_cpu_s"].get<double>(), 0);
    ASSERT_TRUE(l.contains("engine"));
    const auto& e = l["engine"];
    EXPECT_EQ(e["requests"], 4);
    EXPECT_EQ(e["errors"], 0);
    EXPECT_EQ(e["output_tokens"], 4 * 8);
    EXPECT_GT(e["output_tok_s"].get<double>(), 0);
    expect_latencies(e, "ttft_ms", true);
    expect_latencies(e, "itl_ms", true);
    EXPECT_GT(l["server_vs_engine"].get<double>(), 0);
  }
  std::ifstream svg{svg_path};
  std::string text{std::istreambuf_iterator<char>{svg}, {}};
  EXPECT_NE(text.find("<svg"), std::string::npos);
  EXPECT_NE(text.find("engine alone"), std::string::npos);
}

TEST(BenchServeTest, UnreachableServerFailsNamingIt) {
  auto r = run("bench serve --url http://127.0.0.1:1 --quick");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("127.0.0.1:1"), std::string::npos) << r.out;
}

TEST(BenchServeTest, NeedsAServer) {
  auto r = run("bench serve --quick");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("--url"), std::string::npos) << r.out;
}

} // namespace
