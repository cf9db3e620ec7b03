// `tessera bench trace` end to end: it starts a server on a nano model,
// replays the six-request fixture (tests/bench/data/README.md) and reports
// exactly the prefix-cache hits the engine's 16-token blocks allow. Never
// asserts on speed (STYLE.md).
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

const std::string fixture = TESSERA_TEST_DATA_DIR "/shared_prefix_trace.jsonl";

TEST(BenchTraceTest, ReplayReportsTheHitsTheEngineBlocksAllow) {
  tessera::test::temp_dir dir{"tessera-bench-trace"};
  const auto model = dir.path() / "nano";
  auto init = run("model init --shape nano --seed 5 --out " + model.string());
  ASSERT_EQ(init.exit_code, 0) << init.out;
  const auto json_path = dir.path() / "trace.json";
  const auto svg_path = dir.path() / "trace.svg";
  // One worker (one cache); arrivals 0.5 s apart, far more than a nano
  // model needs to prefill 128 tokens, so each request finds the blocks of
  // every earlier one cached.
  auto r = run("bench trace --trace " + fixture + " --block-tokens 32 --speedup 2 --window 1 --spawn-server"
               " --model-dir " + model.string() + " --server-args '--mode agg --decode 1 --threads 1'"
               " --label smoke --per-request --json " + json_path.string() + " --svg " + svg_path.string());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("smoke"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("hit %"), std::string::npos) << r.out;

  auto j = nlohmann::json::parse(std::ifstream{json_path});
  EXPECT_EQ(j["label"], "smoke");
  EXPECT_EQ(j["requests"], 6);
  EXPECT_EQ(j["errors"], 0) << j.value("first_error", "");
  EXPECT_EQ(j["prompt_tokens"], 556);
  // tests/bench/data/README.md: 0 + 64 + 96 + 80 + 0 + 48 (whole 16-token
  // blocks, never the last prompt token, only blocks a prompt filled).
  EXPECT_EQ(j["cached_tokens"], 288);
  EXPECT_EQ(j["prefill_tokens_computed"], 556 - 288);
  EXPECT_DOUBLE_EQ(j["hit_rate"].get<double>(), 288.0 / 556.0);
  EXPECT_EQ(j["optimal_hit_tokens"], 320);
  EXPECT_DOUBLE_EQ(j["optimal_hit_rate"].get<double>(), 320.0 / 556.0);
  EXPECT_DOUBLE_EQ(j["fraction_of_optimal"].get<double>(), 288.0 / 320.0);
  EXPECT_EQ(j["output_tokens"], 6 * 4) << "ignore_eos: every request generates output_length tokens";
  EXPECT_GT(j["ttft_ms_p50"].get<double>(), 0);
  EXPECT_LE(j["ttft_ms_p50"].get<double>(), j["ttft_ms_p99"].get<double>());
  EXPECT_GE(j["itl_ms_p50"].get<double>(), 0);
  EXPECT_GT(j["output_tok_s"].get<double>(), 0);
  // The one worker's engine busy share over the replay, from the server's
  // /metrics: it computed every prompt, so more than nothing, and never
  // more than the whole interval.
  ASSERT_EQ(j["worker_busy"].size(), 1u) << j["worker_busy"].dump();
  for (const auto& [worker, share] : j["worker_busy"].items()) {
    EXPECT_GT(share.get<double>(), 0) << worker;
    EXPECT_LE(share.get<double>(), 1.0) << worker;
  }
  EXPECT_NE(r.out.find("engine busy over the replay:"), std::string::npos) << r.out;
  EXPECT_EQ(j["config"]["block_tokens"], 32);
  EXPECT_EQ(j["config"]["speedup"], 2.0);
  EXPECT_EQ(j["config"]["server"]["args"], (nlohmann::json{"--mode", "agg", "--decode", "1", "--threads", "1"}));

  // One request per 1 s window: the engine's count request by request.
  const int want_cached[] = {0, 64, 96, 80, 0, 48};
  ASSERT_EQ(j["windows"].size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    const auto& w = j["windows"][i];
    EXPECT_EQ(w["start_s"], static_cast<double>(i));
    EXPECT_EQ(w["requests"], 1);
    EXPECT_EQ(w["cached_tokens"], want_cached[i]) << "request " << i;
  }

  ASSERT_EQ(j["per_request"].size(), 6u);
  const int want_optimal[] = {0, 64, 96, 96, 0, 64};
  for (size_t i = 0; i < 6; ++i) {
    const auto& p = j["per_request"][i];
    EXPECT_EQ(p["line"], i + 1);
    EXPECT_EQ(p["cached_tokens"], want_cached[i]);
    EXPECT_EQ(p["optimal_hit_tokens"], want_optimal[i]);
    EXPECT_GT(p["ttft_ms"].get<double>(), 0);
    EXPECT_FALSE(p.contains("error"));
  }

  std::ifstream svg{svg_path};
  std::string text{std::istreambuf_iterator<char>{svg}, {}};
  EXPECT_NE(text.find("<svg"), std::string::npos);
  EXPECT_NE(text.find("hit rate"), std::string::npos);

  auto table = run("bench trace --compare " + json_path.string() + " " + json_path.string());
  ASSERT_EQ(table.exit_code, 0) << table.out;
  EXPECT_NE(table.out.find("smoke"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("51.8"), std::string::npos) << "hit % " << table.out;
}

TEST(BenchTraceTest, SimultaneousArrivalsAreAllInFlightAtOnce) {
  // Open loop: 300 requests due at the same moment go out together, each on
  // a connection of its own, whatever the server's pace (a closed-loop or
  // fixed-pool client would hold them back).
  tessera::test::temp_dir dir{"tessera-bench-trace-burst"};
  const auto model = dir.path() / "nano";
  auto init = run("model init --shape nano --seed 5 --out " + model.string());
  ASSERT_EQ(init.exit_code, 0) << init.out;
  const auto trace = dir.path() / "burst.jsonl";
  {
    std::ofstream f{trace};
    for (int i = 0; i < 300; ++i)
      f << R"({"timestamp": 0, "input_length": 256, "output_length": 32, "hash_ids": [)" << 2 * i << ", "
        << 2 * i + 1 << "]}\n";
  }
  const auto json_path = dir.path() / "burst.json";
  auto r = run("bench trace --trace " + trace.string() + " --block-tokens 128 --spawn-server --model-dir " +
               model.string() + " --server-args '--mode agg --decode 1 --threads 1' --json " + json_path.string());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  auto j = nlohmann::json::parse(std::ifstream{json_path});
  EXPECT_EQ(j["requests"], 300);
  EXPECT_EQ(j["errors"], 0) << j.value("first_error", "");
  EXPECT_EQ(j["output_tokens"], 300 * 32);
  EXPECT_EQ(j["cached_tokens"], 0) << "no two requests share a block";
  EXPECT_GE(j["client"]["peak_in_flight"].get<int>(), 100);
  EXPECT_GE(j["client"]["connections_opened"].get<int>(), j["client"]["peak_in_flight"].get<int>());
}

TEST(BenchTraceTest, OptimumOnlyNeedsNoServer) {
  auto r = run("bench trace --trace " + fixture + " --block-tokens 32 --optimum-only");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("optimum 57.6%"), std::string::npos) << r.out;
}

TEST(BenchTraceTest, BadTraceNamesFileLineAndField) {
  // The fixture is laid out for 32-token blocks: at 512, line 1's three ids
  // are two too many.
  auto r = run("bench trace --trace " + fixture + " --optimum-only");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find(fixture + ":1: hash_ids: 3 ids for input_length 96"), std::string::npos) << r.out;
}

TEST(BenchTraceTest, UnreachableServerFailsNamingIt) {
  auto r = run("bench trace --trace " + fixture + " --block-tokens 32 --url http://127.0.0.1:1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("127.0.0.1:1"), std::string::npos) << r.out;
}

// Another node's metrics endpoint that does not answer fails the run
// before the replay, naming it: its workers would drop out of the host
// guard without a word.
TEST(BenchTraceTest, AMetricsEndpointThatDoesNotAnswerFailsBeforeTheReplayNamingIt) {
  tessera::test::temp_dir dir{"tessera-bench-trace-metrics"};
  const auto model = dir.path() / "nano";
  auto init = run("model init --shape nano --seed 5 --out " + model.string());
  ASSERT_EQ(init.exit_code, 0) << init.out;
  auto r = run("bench trace --trace " + fixture + " --block-tokens 32 --spawn-server --model-dir " + model.string() +
               " --server-args '--mode agg --decode 1 --threads 1' --metrics http://127.0.0.1:1");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("--metrics http://127.0.0.1:1: GET /metrics failed"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(" sent, "), std::string::npos) << "no request may be replayed:\n" << r.out;
}

} // namespace
